# Cython declarations for ipv6.py (compiled build only): see tcp.pxd.
cimport cython
from grotool.engine.skb cimport Skb, extend_key_masked
from grotool.engine.gro cimport Bucket, GroNode
from grotool.engine.offloads cimport PacketOffload, enter_layer
from grotool.engine.tcp cimport tcp6_gro_complete, tcp6_gro_receive

cdef list INET6_OFFLOADS

@cython.locals(data=bytes, raw=cython.p_uchar, off=Py_ssize_t, pending=bint, nexthdr=int, pos=Py_ssize_t,
               hlen=Py_ssize_t, entry=tuple)
cpdef ipv6_gro_receive(Bucket bucket, Skb skb, GroNode gro)
@cython.locals(thoff=Py_ssize_t, l4=int, payload=Py_ssize_t)
cpdef ipv6_gro_complete(gro, Skb p, bytearray header, list gso_type, Py_ssize_t nhoff)

cdef class Ipv6Offload(PacketOffload):
    cpdef receive(self, bucket, Skb skb, gro)
    cpdef complete(self, gro, Skb p, bytearray header, list gso_type, Py_ssize_t nhoff)
