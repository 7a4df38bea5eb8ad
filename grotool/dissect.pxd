# Cython declarations for dissect.py (compiled build only): the walk's state is
# a C struct, offsets and header fields C integers, and header bytes are read
# through a pointer into the frame, only where a length check already covered
# them.  No rule lives here.
cimport cython

cdef class _Walk:
    cdef readonly bytes data
    cdef readonly Py_ssize_t n, frame_len
    cdef readonly bint records
    cdef readonly list layers, checksums
    cdef readonly tuple tunnels
    cdef readonly object problem, vlans, ethertype
    cdef readonly object family, l3, src, dst, ip_proto, fragment, frag_header, l3_end, l3_ok, l4
    cdef readonly object l4_proto, sport, dport, payload_off, payload_len, check_at, seq, ack, tcp_flags, window

    cdef restart(self, bytes data, Py_ssize_t frame_len, bint records)
    cdef no_inner(self)
    cdef no_transport(self)
    cdef found_ip(self, long family, Py_ssize_t l3, long proto, Py_ssize_t l4, Py_ssize_t end, bytes src,
                  bytes dst, bint fragment, bint frag_header, bint ok)
    cdef fail(self, str text)
    cdef bint need(self, Py_ssize_t off, Py_ssize_t size, str what) except -1

cdef dict _IPV6_FORMS
cdef dict _ADDR_CACHE

cdef bint TEXT_IN_PLACE
cdef char _ADDR_TEXT[48]                # an address's text: 39 characters at most

from libc.string cimport memcpy, memcmp
cdef Py_ssize_t _TEXT_SLOTS
cdef list _SLOT_TEXTS
cdef unsigned char _TEXT_KEYS[4096 * 16]    # _TEXT_SLOTS addresses of 16 bytes at most
cdef unsigned char _TEXT_KEY_SIZE[4096]     # 0: an empty slot
@cython.locals(octets=cython.p_uchar, last=Py_ssize_t, slot=Py_ssize_t, key=cython.p_uchar, text=str)
cdef str _cached_addr_format(bytes data, Py_ssize_t at, Py_ssize_t size)
cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void *PyUnicode_DATA(object text)
@cython.locals(text=object)
cdef str _ascii_text(const char *out, Py_ssize_t n)

cdef Py_ssize_t _put_decimal(char *out, long value) noexcept
@cython.locals(n=Py_ssize_t, i=Py_ssize_t, digit=long)
cdef Py_ssize_t _put_hex(char *out, long value) noexcept

cpdef str addr_text(raw)
cpdef str _addr_format(bytes raw)
@cython.locals(octets=cython.p_uchar, a=long, b=long, c=long, d=long, w0=long, w1=long, w2=long, w3=long,
               w4=long, w5=long, w6=long, w7=long, zero_words=long,
               form=tuple, template=str, run_at=Py_ssize_t, run_len=Py_ssize_t, words=tuple,
               out=cython.p_char, n=Py_ssize_t, i=Py_ssize_t)
cdef str _addr_format_at(bytes data, Py_ssize_t at, Py_ssize_t size)
cdef Py_ssize_t _address_at(Py_ssize_t l3, long family, bint dst) noexcept
@cython.locals(at=Py_ssize_t)
cdef bytes _ip_address(bytes data, Py_ssize_t l3, long family, bint dst)
cdef tuple _ip_addresses(bytes data, Py_ssize_t l3, long family)
cpdef str ip_address_text(bytes data, Py_ssize_t l3, long family, bint dst)

@cython.locals(top=long)
cdef long _word32(const unsigned char* raw, Py_ssize_t at)

@cython.locals(w=_Walk, off=Py_ssize_t)
cpdef _Walk walk_frame(bytes data, linktype, Py_ssize_t frame_len, vxlan, geneve, bint records, _Walk walk=*)

@cython.locals(data=cython.p_uchar, etype=long, alen=Py_ssize_t, version=long, off=Py_ssize_t)
cdef Py_ssize_t _link(_Walk walk, linktype) except? -2
cdef long _TPID_8021Q, _TPID_8021AD, _TPID_QINQ
cdef long _C_ETH_P_IP, _C_ETH_P_IPV6, _C_ETH_P_TEB
cdef long _C_IPPROTO_IPIP, _C_IPPROTO_TCP, _C_IPPROTO_UDP, _C_IPPROTO_IPV6, _C_IPPROTO_GRE
@cython.locals(data=cython.p_uchar, vlans=list, tci=long, inner=long)
cdef Py_ssize_t _vlan_tags(_Walk walk, Py_ssize_t off, long etype) except? -2

@cython.locals(data=cython.p_uchar, records=bint, version=long, ihl=Py_ssize_t, tot=Py_ssize_t, frag=long,
               proto=long, src=bytes, dst=bytes, fields=tuple, end=Py_ssize_t, ok=bint, plen=Py_ssize_t,
               l4=Py_ssize_t, fragment=bint, frag_header=bint, complete=bint, count=long, nxt=long, word=long,
               hlen=Py_ssize_t, jumbo=Py_ssize_t)
cdef bint _ip_header(_Walk walk, Py_ssize_t off, long etype, Py_ssize_t limit) except -1
@cython.locals(pos=Py_ssize_t, stop=Py_ssize_t, otype=long, olen=long)
cdef Py_ssize_t _jumbo_length(const unsigned char* data, Py_ssize_t n, Py_ssize_t start, Py_ssize_t hlen)
@cython.locals(_depth=Py_ssize_t, family=long, proto=long, l4=Py_ssize_t, end=Py_ssize_t, src=bytes, dst=bytes,
               inner_etype=long)
cdef _network(_Walk walk, Py_ssize_t off, long etype, Py_ssize_t limit, vxlan, geneve)
@cython.locals(data=cython.p_uchar, need=Py_ssize_t, version=long)
cdef bint _inner_ip_present(_Walk walk, Py_ssize_t off, long etype, str what) except -1
@cython.locals(data=cython.p_uchar, vlans=tuple, link_vlans=tuple, off=Py_ssize_t, etype=long)
cdef Py_ssize_t _enter(_Walk walk, str kind, long family, bytes src, bytes dst, long ip_proto, key, sport, dport,
                       Py_ssize_t outer_l3, Py_ssize_t inner, long etype_inner, bint ethernet) except? -2
@cython.locals(data=cython.p_uchar, records=bint, flags=long, proto=long, version=long, csum_flag=long,
               routing=long, key_flag=long, seq_flag=long, hlen=Py_ssize_t, pos=Py_ssize_t, fields=list)
cdef Py_ssize_t _gre(_Walk walk, Py_ssize_t outer_l3, long family, bytes src, bytes dst, Py_ssize_t off,
                     Py_ssize_t end) except? -2
@cython.locals(data=cython.p_uchar, off=Py_ssize_t, flags=long, vni=long)
cdef Py_ssize_t _vxlan(_Walk walk, Py_ssize_t outer_l3, long family, bytes src, bytes dst, Py_ssize_t l4,
                       Py_ssize_t end) except? -2
@cython.locals(data=cython.p_uchar, off=Py_ssize_t, version=long, optlen=Py_ssize_t, proto=long, vni=long,
               hlen=Py_ssize_t)
cdef Py_ssize_t _geneve(_Walk walk, Py_ssize_t outer_l3, long family, bytes src, bytes dst, Py_ssize_t l4,
                        Py_ssize_t end) except? -2
@cython.locals(out=list, cls=long, typ=long, olen=Py_ssize_t)
cdef tuple _geneve_options(const unsigned char* data, Py_ssize_t pos, Py_ssize_t stop)
@cython.locals(data=cython.p_uchar, n=Py_ssize_t, doff_byte=long, doff=Py_ssize_t)
cdef _tcp(_Walk walk, Py_ssize_t l4, Py_ssize_t end, long family, bytes src, bytes dst)
@cython.locals(data=cython.p_uchar)
cdef bint _udp(_Walk walk, Py_ssize_t l4, Py_ssize_t end, long family, bytes src, bytes dst) except -1
