# Cython declarations for link.py (compiled build only).
cimport cython
from grotool.engine.skb cimport Skb, new_skb

@cython.final
cdef class LinkLayer:
    cdef public int linktype
    cdef public int kind
    cdef public Py_ssize_t l2_len
    cdef public Py_ssize_t proto_at
    @cython.locals(l2=Py_ssize_t, at=Py_ssize_t, skb=Skb, frame=bytes)
    cpdef Skb make(self, data, long long ts, Py_ssize_t index, Py_ssize_t start=*, Py_ssize_t end=*)
    @cython.locals(kind=int, l2=Py_ssize_t, at=Py_ssize_t, n=Py_ssize_t, version=int, skb=Skb, identity=bytes)
    cpdef Skb make_other(self, bytes data, long long ts, Py_ssize_t index)
