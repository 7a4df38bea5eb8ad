# Cython declarations for tcp.py (compiled build only): packets are Skbs, the
# GRO core a GroNode, offsets and header words C integers, so fields and bytes
# are read as C values instead of Python objects.  No rule lives here.
cimport cython
from libc.string cimport memcmp
from grotool.engine.skb cimport Skb, Stats, defer_key, extend_key, merged_segments, settled_key
from grotool.engine.gro cimport Bucket, GroNode
from grotool.engine.network cimport inet_gro_flush, ipv6_gro_flush, network_flush
from grotool.engine.csum cimport seed, sum16_range

cdef long TCP_FLAG_CWR, TCP_FLAG_ECE, TCP_FLAG_URG, TCP_FLAG_ACK, TCP_FLAG_PSH, TCP_FLAG_RST
cdef long TCP_FLAG_SYN, TCP_FLAG_FIN, TCP_DOFF, TCP_RESERVED, TCP_WINDOW
cdef long _NOT_COMPARED, _COMPARED, _FIN_PSH, _FINAL_FLAGS, SEQ_MASK

@cython.locals(raw=cython.p_uchar, top=long)
cpdef long word32(bytes data, Py_ssize_t at) noexcept
@cython.locals(raw_a=cython.p_uchar, raw_b=cython.p_uchar)
cpdef bint same_bytes(bytes a, Py_ssize_t i, bytes b, Py_ssize_t j, Py_ssize_t n) noexcept
@cython.locals(raw=cython.p_uchar, kind=int, olen=int)
cdef Py_ssize_t option_step(bytes data, Py_ssize_t at, Py_ssize_t i, Py_ssize_t n)
@cython.locals(i=Py_ssize_t, step=Py_ssize_t, n=Py_ssize_t, found=list)
cpdef list option_offsets(bytes opts)
@cython.locals(i=Py_ssize_t, step=Py_ssize_t)
cpdef _options_reason(bytes data, Py_ssize_t at, bytes data2, Py_ssize_t at2, Py_ssize_t n)
# pseudo_sum: what pseudo4/pseudo6 return (a C long); segment_sum reduced mod 0xFFFF
@cython.locals(stats=Stats, data=bytes, field=long, folded=long, off=Py_ssize_t, segment_sum=long, total=long)
cpdef bint validate_l4(GroNode gro, Skb skb, long pseudo_sum, Py_ssize_t field_at, lco=*)
cpdef checksum_verified(Skb skb)
@cython.locals(raw=cython.p_uchar, total=long, at=Py_ssize_t)
cpdef long pseudo4(data, Py_ssize_t nh, Py_ssize_t length, long proto=*)
@cython.locals(raw=cython.p_uchar, total=long, at=Py_ssize_t)
cpdef long pseudo6(data, Py_ssize_t nh, Py_ssize_t length, long proto=*)
@cython.locals(data=bytes, off=Py_ssize_t, n=Py_ssize_t, thlen=Py_ssize_t, nh=Py_ssize_t, ps=long)
cpdef _receive(Bucket bucket, Skb skb, GroNode gro, bint ipv6)
cpdef tcp4_gro_receive(Bucket bucket, Skb skb, GroNode gro)
cpdef tcp6_gro_receive(Bucket bucket, Skb skb, GroNode gro)
cpdef _never_merged_reason(long flags)
cpdef _flag_diff_reason(long flags, long diff)
cpdef _final_reason(long flags, Py_ssize_t length)
@cython.locals(data=bytes, d2=bytes, off=Py_ssize_t, end=Py_ssize_t, length=Py_ssize_t, mss=Py_ssize_t,
               th2=Py_ssize_t, flags=long, flags2=long, diff=long, outer=Py_ssize_t, p=Skb,
               final=bint, seq=long, ack=long, seq2=long, ack2=long)
cpdef tcp_gro_receive(Bucket bucket, Skb skb, GroNode gro, Py_ssize_t thlen)
@cython.locals(flag_byte=int, check=long)
cpdef _finish(GroNode gro, Skb p, bytearray header, list gso_type, Py_ssize_t thoff, long pseudo_sum,
              str family_type)
@cython.locals(nh=Py_ssize_t, length=Py_ssize_t)
cpdef tcp4_gro_complete(GroNode gro, Skb p, bytearray header, list gso_type, Py_ssize_t thoff)
@cython.locals(nh=Py_ssize_t, length=Py_ssize_t)
cpdef tcp6_gro_complete(GroNode gro, Skb p, bytearray header, list gso_type, Py_ssize_t thoff)
