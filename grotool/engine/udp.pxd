# Cython declarations for udp.py (compiled build only): see tcp.pxd.  Datagrams
# are Skbs, the GRO core a GroNode, offsets and header words C integers; the
# completions stay untyped (they run once per super-packet).  No rule lives here.
cimport cython
from grotool.engine.skb cimport Skb, extend_key, settled_key
from grotool.engine.gro cimport Bucket, GroNode
from grotool.engine.network cimport gro_receive_network_flush
from grotool.engine.offloads cimport enter_layer
from grotool.engine.tcp cimport checksum_verified, validate_l4

cdef Py_ssize_t UDP_GRO_CNT_MAX

@cython.locals(data=bytes, off=Py_ssize_t, check=long, unverified=bint)
cpdef _receive(Bucket bucket, Skb skb, GroNode gro, pseudo)
cpdef udp4_gro_receive(Bucket bucket, Skb skb, GroNode gro)
cpdef udp6_gro_receive(Bucket bucket, Skb skb, GroNode gro)
@cython.locals(off=Py_ssize_t, data=bytes, dport=long, ports=dict, kind=str)
cpdef udp_gro_receive(Bucket bucket, Skb skb, GroNode gro, sk, long check, bint unverified)
@cython.locals(data=bytes, off=Py_ssize_t, ulen=Py_ssize_t, key=bytes, p=Skb, first_len=Py_ssize_t)
cpdef udp_gro_receive_segment(Bucket bucket, Skb skb, GroNode gro, long check)
