# Cython declarations for offloads.py (compiled build only): the tables stay
# Python dicts and lists; the recursion counter is a C call.
cimport cython
from grotool.engine.skb cimport Skb

cdef class PacketOffload:
    cdef public int type
    cdef public object gro_receive, gro_complete
    cpdef receive(self, bucket, Skb skb, gro)
    cpdef complete(self, gro, Skb p, bytearray header, list gso_type, Py_ssize_t nhoff)

@cython.locals(entry=PacketOffload)
cpdef PacketOffload packet_offload(tuple offload_list, int ethertype)

cpdef bint enter_layer(Skb skb)
