# Cython declarations for capture.py (used only by the compiled build): the pcap
# record iterator keeps its buffer position and the record header's fields as C
# integers, so walking a record costs no Python integer arithmetic.
import cython
from libc.string cimport memcpy
from cpython.bytearray cimport PyByteArray_FromStringAndSize

cdef class _Records:
    cdef public long long ts
    cdef public Py_ssize_t wirelen, interface, view_start, view_end
    cdef public bint outbound
    cpdef next_data(self)
    cpdef next_view(self)

cdef class _PcapngRecords(_Records):
    cdef object records
    cpdef next_data(self)

cdef class _PcapRecords(_Records):
    cdef object reader, stream, name, unpack_header
    cdef bint swap
    cdef bytes buf, spare
    cdef long long fraction_ns, fraction_limit
    cdef Py_ssize_t max_caplen, file_size, pos, end, offset, spare_pos
    cdef bint eof, done, in_place
    cdef public Py_ssize_t index

    @cython.locals(have=cython.Py_ssize_t, start=cython.Py_ssize_t, take=cython.Py_ssize_t)
    cpdef refill(self, Py_ssize_t need)
    cpdef cut_short(self, Py_ssize_t at, str detail)
    @cython.locals(pos=cython.Py_ssize_t, stop=cython.Py_ssize_t, at=cython.Py_ssize_t,
                   sec=cython.longlong, fraction=cython.longlong, caplen=cython.longlong,
                   wirelen=cython.longlong, raw="const unsigned char *", word0=cython.uint, word1=cython.uint,
                   word2=cython.uint, word3=cython.uint)
    cpdef next_view(self)
    cpdef next_data(self)

cdef Py_ssize_t WRITE_GATHER_BYTES, WRITE_GATHER_PIECES
cdef bint WRITES_IN_PLACE
cdef long long _PCAP_TIME_LIMIT
cdef Py_ssize_t WRITE_COPY_BYTES

cdef bint BIG_ENDIAN_MACHINE
@cython.locals(word=cython.uint)
cdef inline void _put_le32(unsigned char *out, unsigned long long value) noexcept
@cython.locals(word=cython.uint)
cdef inline unsigned int _native_word(const unsigned char *raw, Py_ssize_t at) noexcept
cdef inline unsigned int _swap32(unsigned int word) noexcept

cpdef bytearray _write_buffer(Py_ssize_t size)

@cython.final
cdef class PcapWriter:
    cdef public object path, _out, _pack
    cdef public Py_ssize_t packets, _pending_bytes
    cdef public list _pending
    cdef public bytearray _buffer
    cdef public Py_ssize_t _fill, _sealed

    cpdef write(self, ts_ns, data, wirelen=*)
    @cython.locals(n=cython.Py_ssize_t, at=cython.Py_ssize_t, pending=list)
    cpdef write_ts(self, long long ts, data, wirelen=*)
    @cython.locals(at=cython.Py_ssize_t, out=cython.p_uchar)
    cpdef Py_ssize_t reserve(self, long long ts, Py_ssize_t n) except? -2
    cpdef void unreserve(self, Py_ssize_t n)
    cpdef void _seal(self) except *
    cpdef _flush_pending(self)
