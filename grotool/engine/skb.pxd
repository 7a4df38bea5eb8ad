# Cython declarations for skb.py (used only by the compiled build): the fields
# Skb.__init__ always sets become typed C fields; the aggregate fields that
# hold() and the layers add later stay in the instance dict, so reading one
# before it is set still raises AttributeError, as in the interpreted engine.
cdef class Skb:
    cdef dict __dict__
    cdef public object data, ts, index, hash, l2_len, protocol, off, flush, proto, key, count
    cdef public object network_offsets, encap_mark, outer_family, l4_off, same_flow, recursion
    cdef public object csum_level, csum
