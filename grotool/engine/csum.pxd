# Cython declarations for csum.py (compiled build only): the 16-bit field
# update and the IPv4 header sum are C arithmetic; sums of arbitrary length
# stay Python integers.
cimport cython

@cython.locals(total=long)
cpdef long replace16(long check, long old, long new)
cpdef long long fold(long long value)
cpdef long long seed(long long pseudo_sum)
@cython.locals(raw=cython.p_uchar, total=long, i=Py_ssize_t)
cpdef bint ip_header_ok(bytes data, Py_ssize_t off)
