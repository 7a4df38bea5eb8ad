# Cython declarations for ipv4.py (compiled build only): see tcp.pxd.
cimport cython
from grotool.engine.skb cimport Skb, defer_key
from grotool.engine.csum cimport ip_header_ok, replace16
from grotool.engine.tcp cimport tcp4_gro_complete, tcp4_gro_receive
from grotool.engine.offloads cimport PacketOffload
from grotool.engine.gro cimport Bucket, GroNode

cdef list INET_OFFLOADS
cdef int GRO_RECURSION_LIMIT
cdef int IP_DF, IP_MF, IP_OFFSET, IP_RESERVED, _MF_OR_OFFSET

@cython.locals(data=bytes, raw=cython.p_uchar, off=Py_ssize_t, n=Py_ssize_t, proto=int, entry=tuple, tot_len=int,
               frag_off=int, mark=int, depth=int)
cpdef inet_gro_receive(Bucket bucket, Skb skb, GroNode gro)
@cython.locals(total=Py_ssize_t, new_len=long, old_len=long, check=long)
cpdef inet_gro_complete(gro, Skb p, bytearray header, list gso_type, Py_ssize_t nhoff)

cdef class InetOffload(PacketOffload):
    cpdef receive(self, bucket, Skb skb, gro)
    cpdef complete(self, gro, Skb p, bytearray header, list gso_type, Py_ssize_t nhoff)
