# Cython declarations for offloads.py (compiled build only): the tables stay
# Python dicts and lists; the recursion counter is a C call.
cimport cython
from grotool.engine.skb cimport Skb

@cython.locals(entry=tuple, offload_type=int)
cpdef tuple packet_offload(tuple offload_list, int ethertype)

cpdef bint enter_layer(Skb skb)
