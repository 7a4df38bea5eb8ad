# Cython declarations for replay.py (used only by the compiled build): the
# per-frame loop keeps the interface number, FCS length, MTU bound and counters
# as C integers.
import cython

@cython.locals(ifid=cython.Py_ssize_t, last_ifid=cython.Py_ssize_t, fcs=cython.Py_ssize_t,
               limit=cython.Py_ssize_t, wirelen=cython.Py_ssize_t, over_mtu=cython.Py_ssize_t)
cpdef tuple _feed_records(records, feed, add, write, interface, verifier, Py_ssize_t mtu, reader)
