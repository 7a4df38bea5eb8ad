# Cython declarations for ipv6.py (compiled build only): see tcp.pxd.
cimport cython
from grotool.engine.skb cimport Skb
from grotool.engine.offloads cimport enter_layer

cdef list INET6_OFFLOADS
cdef tuple BYTE_VALUES

@cython.locals(data=bytes, raw=cython.p_uchar, off=Py_ssize_t, pending=bint, nexthdr=int, pos=Py_ssize_t,
               hlen=Py_ssize_t, entry=tuple)
cpdef ipv6_gro_receive(bucket, Skb skb, gro)
@cython.locals(d1=bytes, d2=bytes)
cpdef ipv6_gro_flush(Skb p, Skb skb, Py_ssize_t offset, int inner)
