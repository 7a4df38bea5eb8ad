# Cython declarations for skb.py (used only by the compiled build): every Skb
# field becomes a typed C field.  Offsets, lengths and small counters are
# C integers (bounded by the frame and aggregate sizes), and so are the frame's
# and the delivery's timestamps and the jiffies (bounded by the engine's clock);
# the flush reason and the checksum sum stay Python objects.  No rule lives here.
cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.string cimport memcpy, memmove
from cpython.object cimport PyObject

cdef extern from "Python.h":
    PyObject **PySequence_Fast_ITEMS(object)
    void Py_SET_SIZE(object, Py_ssize_t)
    void Py_DecRef(PyObject *)

cdef long long NO_CLOCK

@cython.final
cdef class Skb:
    cdef public bytes data
    cdef public Py_ssize_t start
    cdef public Py_ssize_t end
    cdef public long long ts
    cdef public Py_ssize_t index
    cdef public long long hash
    cdef public Py_ssize_t l2_len
    cdef public int protocol
    cdef public Py_ssize_t off
    cdef public object flush
    cdef public int proto
    cdef public bytes key
    cdef public Py_ssize_t key_from_frame
    cdef public Py_ssize_t key_at
    cdef public Py_ssize_t key_n
    cdef public Py_ssize_t key_at2
    cdef public Py_ssize_t key_n2
    cdef public Py_ssize_t key_at3
    cdef public Py_ssize_t key_n3
    cdef public Py_ssize_t count
    cdef public Py_ssize_t network_offsets[2]
    cdef public int encap_mark
    cdef public int outer_family
    cdef public int inner_family
    cdef public Py_ssize_t l4_off
    cdef public bint same_flow
    cdef public int ip_fixedid
    cdef public int is_flist
    cdef public int recursion
    cdef public str flush_layer
    cdef public int csum_level
    cdef public object csum
    cdef public Py_ssize_t length
    cdef public Py_ssize_t payload_len
    cdef public Py_ssize_t gso_size
    cdef public long long age
    cdef public Skb next_merged
    cdef public Skb last_merged
    cdef public long long flag_or
    cdef public int encapsulation

@cython.final
cdef class Delivery:
    cdef public long long ts
    cdef bytes _data
    cdef Skb _head
    cdef bytearray _header
    cdef public Py_ssize_t frame_len
    cdef public Py_ssize_t segs
    cdef public str reason
    cdef tuple _indices
    cdef public bytes key
    cdef public Py_ssize_t gso_size
    cdef public tuple gso_type
    cdef public Py_ssize_t payload
    cdef public Py_ssize_t queue
    cdef public Py_ssize_t poll
    cdef public str layer
    cdef public Py_ssize_t l2_len
    cdef public Py_ssize_t header_len
    cdef public Py_ssize_t first_len
    cdef tuple _merged_lens
    cdef public bint fraglist
    cdef public Py_ssize_t interface
    cdef long long _delivered_ns

@cython.final
cdef class Stats:
    cdef public long long frames, csum_offloaded, csum_verified, csum_bad, ip_csum_bad
    cdef public long long polls, irqs, timer_polls, normal_batches, tcp_fraglist_assumed, outgoing
    cdef public dict udp_no_gro_path, udp_tunnel_payloads

cpdef _fill(Delivery delivery, long long ts, bytes data, Py_ssize_t segs, str reason, tuple indices, bytes key,
            Py_ssize_t gso_size, tuple gso_type, Py_ssize_t payload, Py_ssize_t queue, Py_ssize_t poll,
            str layer, Py_ssize_t l2_len, Py_ssize_t header_len, Py_ssize_t first_len, tuple merged_lens,
            bint fraglist, Py_ssize_t interface, long long delivered_ns)
@cython.locals(s=Skb, out=list)
cpdef list merged_segments(Skb head)
@cython.locals(s=Skb)
cpdef tuple segment_indices(Skb head)
@cython.locals(s=Skb)
cpdef tuple merged_payload_lens(Skb head)
@cython.locals(delivery=Delivery, data=bytes)
cpdef Delivery new_delivery(Skb skb, str reason, bytes key, Py_ssize_t payload, Py_ssize_t queue, Py_ssize_t poll,
                            str layer)
@cython.locals(delivery=Delivery)
cpdef Delivery new_super_packet(Skb p, bytearray header, str reason, tuple gso_type, Py_ssize_t queue,
                                Py_ssize_t poll, str layer)
cdef inline unsigned char *_copy_waiting(unsigned char *dst, bytes key, unsigned char *src, Py_ssize_t start,
                                         Py_ssize_t head, Py_ssize_t at0, Py_ssize_t n0, Py_ssize_t at1,
                                         Py_ssize_t n1, Py_ssize_t at3, Py_ssize_t n3)
cdef inline bint _waiting_in_frame(Skb skb, Py_ssize_t size)
@cython.locals(head=Py_ssize_t, key=bytes, at0=Py_ssize_t, n0=Py_ssize_t, at1=Py_ssize_t, n1=Py_ssize_t,
               at3=Py_ssize_t, n3=Py_ssize_t, size=Py_ssize_t, k=Py_ssize_t, out=bytes, dst=cython.p_uchar,
               src=cython.p_uchar, start=Py_ssize_t)
cpdef void extend_key(Skb skb, bytes data, Py_ssize_t at, Py_ssize_t n, Py_ssize_t at2=*, Py_ssize_t n2=*)
@cython.locals(head=Py_ssize_t, n0=Py_ssize_t, n1=Py_ssize_t, n3=Py_ssize_t, size=Py_ssize_t,
               m=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t, key=bytes, out=bytes, dst=cython.p_uchar,
               src=cython.p_uchar, bits=cython.p_uchar)
cpdef void extend_key_masked(Skb skb, bytes data, Py_ssize_t at, bytes mask, Py_ssize_t at2, Py_ssize_t n2)
cpdef void defer_key(Skb skb, Py_ssize_t at, Py_ssize_t n, Py_ssize_t at2=*, Py_ssize_t n2=*) noexcept
@cython.locals(i=Py_ssize_t, wa=cython.ulonglong, wb=cython.ulonglong, ha=cython.uint, hb=cython.uint)
cdef inline bint _same(const unsigned char *a, const unsigned char *b, Py_ssize_t n) noexcept
@cython.locals(data=bytes, own=bytes, k=Py_ssize_t, head=Py_ssize_t, n0=Py_ssize_t, n1=Py_ssize_t,
               n3=Py_ssize_t, dst=cython.p_uchar, src=cython.p_uchar)
cpdef bint key_matches(bytes key, Skb skb)
@cython.locals(head=Py_ssize_t)
cpdef bytes settled_key(Skb skb)
@cython.locals(first=bytes, s=Skb, total=Py_ssize_t, out=bytes)
cpdef bytes _join_super_packet(bytearray header, Skb p)
@cython.locals(s=Skb, n=Py_ssize_t, total=Py_ssize_t, header_len=Py_ssize_t,
               end=Py_ssize_t)
cdef Py_ssize_t _super_packet_length(bytearray header, Skb p) except? -2
@cython.locals(s=Skb, n=Py_ssize_t, at=Py_ssize_t, src=cython.p_uchar)
cdef void _copy_super_packet(bytearray header, Skb p, unsigned char *dst) noexcept
@cython.locals(n=Py_ssize_t, data=bytes, p=Skb, src=cython.p_uchar)
cdef bint copy_frame(Delivery delivery, unsigned char *dst) except -1

@cython.locals(off=Py_ssize_t)
cpdef _init_skb(Skb skb, bytes data, Py_ssize_t start, Py_ssize_t end, long long ts, Py_ssize_t index, Py_ssize_t l2_len, long long hash_,
                int protocol, bytes key)
@cython.locals(skb=Skb)
cpdef Skb new_skb(bytes data, Py_ssize_t start, Py_ssize_t end, long long ts, Py_ssize_t index, Py_ssize_t l2_len,
                  int protocol, bytes key)
@cython.locals(start=Py_ssize_t, end=Py_ssize_t)
cpdef bytes frame_bytes(Skb skb)
cpdef bytes delivered_bytes(Delivery delivery)
@cython.locals(start=Py_ssize_t)
cpdef void rebase(Skb skb)

@cython.locals(n=Py_ssize_t, i=Py_ssize_t, slots="PyObject **")
cpdef void clear_keeping_room(list items) noexcept
@cython.locals(n=Py_ssize_t, slots="PyObject **", gone="PyObject *")
cpdef void delete_keeping_room(list items, Py_ssize_t i) noexcept
