# Cython declarations for csum.py (compiled build only): the 16-bit field
# update and the IPv4 header sum are C arithmetic; sums of arbitrary length
# stay Python integers.
cimport cython
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy

cdef bint LITTLE_ENDIAN

@cython.locals(total=long)
cpdef long replace16(long check, long old, long new) noexcept
cpdef long long fold(long long value) noexcept
cpdef long long seed(long long pseudo_sum) noexcept
@cython.locals(raw=cython.p_uchar, total=uint64_t, i=Py_ssize_t, word=uint32_t)
cpdef bint ip_header_ok(bytes data, Py_ssize_t off) noexcept
@cython.locals(raw=cython.p_uchar, p=cython.p_uchar, n=Py_ssize_t, words=Py_ssize_t, k=Py_ssize_t,
               i=Py_ssize_t, word=uint32_t, native=uint64_t, tail=uint64_t)
cpdef long sum16_range(bytes data, Py_ssize_t start, Py_ssize_t end) noexcept
