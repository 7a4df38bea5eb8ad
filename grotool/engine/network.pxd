# Cython declarations for network.py (compiled build only): see tcp.pxd.
cimport cython
from grotool.engine.skb cimport Skb
from grotool.engine.gro cimport GroNode

@cython.locals(d1=bytes, d2=bytes, at2=Py_ssize_t, ipid_offset=long, count=long, bit=int, rule=int, df=int)
cpdef inet_gro_flush(Skb p, Skb skb, Py_ssize_t offset, int inner, GroNode gro)
@cython.locals(d1=bytes, d2=bytes, at2=Py_ssize_t)
cpdef ipv6_gro_flush(Skb p, Skb skb, Py_ssize_t offset, int inner, GroNode gro)

cpdef network_flush(Skb p, Skb skb, Py_ssize_t offset, int inner, GroNode gro)
cpdef gro_receive_network_flush(Skb p, Skb skb, GroNode gro)
