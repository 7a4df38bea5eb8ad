# Cython declarations for gro.py (compiled build only): the GRO core's state
# as typed C fields and its methods as C-callable methods.  No rule lives here.
cimport cython
from cpython.bytearray cimport PyByteArray_FromStringAndSize
from grotool.engine.skb cimport (Delivery, Skb, Stats, clear_keeping_room, delete_keeping_room, key_matches,
                                 new_delivery, new_super_packet)

cdef int GRO_HASH_BUCKETS, MAX_GRO_SKBS, GRO_LEGACY_MAX_SIZE
cdef dict PACKET_OFFLOADS
from grotool.engine.offloads cimport PacketOffload, packet_offload

@cython.final
cdef class Bucket:
    cdef public list held
    @cython.locals(p=Skb)
    cpdef Skb find(self, long long hash_, bytes key)
    @cython.locals(p=Skb)
    cpdef Skb find_waiting(self, long long hash_, Skb skb)
    @cython.locals(held=list, i=Py_ssize_t)
    cpdef remove(self, Skb p)

@cython.final
cdef class GroNode:
    cdef dict __dict__
    cdef public object settings, host, events, _deliver
    cdef public long long jiffies
    cdef public Stats stats
    cdef public list buckets, rx_list
    cdef list _gso_types
    cdef public tuple packet_offloads
    cdef public PacketOffload last_offload
    cdef public Py_ssize_t held_count, rx_count, queue, poll, _batch, max_skb_frags, size_check_from
    cdef public bint verify_l4, csum_auto, gro_enabled, rx_gro_list, l4_csum_full
    # the kernel profile's rows (kernels.py), read by the rule sites
    cdef public object kernel
    cdef public bint rx_count_segs, tcp_fraglist, tcp_cwr_compared, udp_l3_checks, flist_honours_flush
    cdef public bint bigtcp_ipv4, bigtcp_strict, bigtcp_ipv6_room, udp_tunnel_seed_outer
    cdef public bint udp_zero_csum_tunnel
    cdef public int ipid_rule
    cdef public bytes ipv6_key_fields
    cdef public Py_ssize_t ipv6_max_size, ipv4_max_size

    @cython.locals(bucket=Bucket, entry=PacketOffload, pp=Skb, oldest=Skb)
    cpdef receive(self, Skb skb)
    @cython.locals(gro_len=Py_ssize_t)
    cpdef hold(self, Bucket bucket, Skb skb)
    @cython.locals(total=Py_ssize_t)
    cpdef merge_allowed_size(self, Skb p, Skb skb, Py_ssize_t length)
    cpdef bint bigtcp_eligible(self, Skb p, Skb skb)
    @cython.locals(length=Py_ssize_t, total=Py_ssize_t, last=Skb)
    cpdef merge(self, Skb p, Skb skb)
    @cython.locals(length=Py_ssize_t, last=Skb)
    cpdef merge_list(self, Skb p, Skb skb)
    @cython.locals(header=bytearray, gso_type=list, first=bytes, raw=cython.p_uchar, start=Py_ssize_t,
                   entry=PacketOffload)
    cpdef complete(self, Skb p, reason)
    @cython.locals(parsed=bint)
    cpdef normal(self, Skb skb, reason)
    cpdef normal_one(self, Delivery delivery)
    cpdef normal_list(self)
    @cython.locals(bucket=Bucket, held=list, p=Skb, jiffies="long long")
    cpdef flush(self, bint flush_old, reason)
    cpdef flush_normal(self, bint flush_old, reason)
