# Cython declarations for rss.py (compiled build only).
cimport cython

@cython.locals(raw=cython.p_uchar, n=Py_ssize_t, ihl=Py_ssize_t, proto=int, pos=Py_ssize_t, nexthdr=int)
cpdef (Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t) input_ranges(bytes data, Py_ssize_t off, int protocol,
                                                                    Py_ssize_t end) noexcept
@cython.locals(first=Py_ssize_t, first_len=Py_ssize_t, second=Py_ssize_t, second_len=Py_ssize_t, end=Py_ssize_t)
cpdef bytes hash_input(bytes data, Py_ssize_t off, int protocol, Py_ssize_t end=*)
@cython.locals(row=Py_ssize_t)
cdef inline unsigned int _four_bytes(const unsigned int *words, Py_ssize_t pos, const unsigned char *raw,
                                     Py_ssize_t at) noexcept
cpdef list _byte_windows(key, Py_ssize_t shift, Py_ssize_t pos)
@cython.locals(table=bytearray, buf="unsigned char *", words="unsigned int *", shift=Py_ssize_t, pos=Py_ssize_t,
               base=Py_ssize_t, windows=list, size=Py_ssize_t, j=int, v=Py_ssize_t, window=cython.uint)
cpdef bytes _flat_table(key, Py_ssize_t bits, Py_ssize_t nbytes)
@cython.locals(result=cython.uint, entry=cython.uint, pos=Py_ssize_t, row=list, raw="const unsigned char *")
cpdef unsigned int _hash_by_tables(list tables, bytes tuple_bytes)

@cython.final
cdef class Toeplitz:
    cdef public bytes _key_bytes
    cdef public object _key
    cdef public Py_ssize_t _bits, _misses
    cdef public dict cache
    cdef bytes _flat
    cdef Py_ssize_t _flat_bytes
    @cython.locals(nbits=Py_ssize_t, shift=Py_ssize_t, i=Py_ssize_t)
    cpdef hash(self, bytes tuple_bytes)
    @cython.locals(first=Py_ssize_t, first_len=Py_ssize_t, second=Py_ssize_t, second_len=Py_ssize_t,
                   flat="const unsigned char *", words="const unsigned int *", raw="const unsigned char *",
                   result=cython.uint, pos=Py_ssize_t)
    cpdef unsigned int flow_hash(self, bytes data, Py_ssize_t off, int protocol, Py_ssize_t end=*) except? 0
    @cython.locals(j=int, tables=list, row=list)
    cpdef list _tables(self, Py_ssize_t nbytes)
