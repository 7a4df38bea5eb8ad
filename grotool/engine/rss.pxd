# Cython declarations for rss.py (compiled build only).
cimport cython

@cython.locals(raw=cython.p_uchar, n=Py_ssize_t, ihl=Py_ssize_t, proto=int, pos=Py_ssize_t, nexthdr=int, addrs=bytes)
cpdef bytes hash_input(bytes data, Py_ssize_t off, int protocol)
@cython.locals(result=cython.uint, pos=Py_ssize_t, row=list, raw="const unsigned char *")
cpdef unsigned int _hash_by_tables(list tables, bytes tuple_bytes)
