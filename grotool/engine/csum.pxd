# Cython declarations for csum.py (compiled build only): the 16-bit field
# update is C arithmetic; sums of arbitrary length stay Python integers.
cimport cython

@cython.locals(total=long)
cpdef long replace16(long check, long old, long new)
cpdef fold(value)
cpdef seed(pseudo_sum)
