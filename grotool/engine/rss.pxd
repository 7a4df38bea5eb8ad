# Cython declarations for rss.py (compiled build only).
cimport cython

@cython.locals(raw=cython.p_uchar, n=Py_ssize_t, ihl=Py_ssize_t, proto=int, pos=Py_ssize_t, nexthdr=int, addrs=bytes)
cpdef bytes hash_input(bytes data, Py_ssize_t off, int protocol)
