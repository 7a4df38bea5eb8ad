# Cython declarations for network.py (compiled build only): see tcp.pxd.
cimport cython
from grotool.engine.skb cimport Skb

@cython.locals(d1=bytes, d2=bytes, ipid_offset=long, count=long, bit=int)
cpdef inet_gro_flush(Skb p, Skb skb, Py_ssize_t offset, int inner)
@cython.locals(d1=bytes, d2=bytes)
cpdef ipv6_gro_flush(Skb p, Skb skb, Py_ssize_t offset, int inner)

cpdef network_flush(Skb p, Skb skb, Py_ssize_t offset, int inner)
cpdef gro_receive_network_flush(Skb p, Skb skb)
