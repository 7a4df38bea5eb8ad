# Cython declarations for the Engine (compiled build only).
cimport cython
from grotool.engine.link cimport LinkLayer
from grotool.engine.napi cimport NicDevice, VethDevice
from grotool.engine.skb cimport Stats

@cython.final
cdef class Engine:
    cdef dict __dict__
    cdef public object settings, device, _device_feed, _event_sink
    cdef public Stats stats
    cdef public LinkLayer _link
    cdef public NicDevice _nic
    cdef public VethDevice _veth
    cdef public list _events, _out
    cdef public Py_ssize_t _index
    cdef public int linktype
    cdef public dict _others, interface_linktypes
    @cython.locals(out=list, result=list)
    cpdef list feed(self, ts, data, Py_ssize_t wirelen=*, Py_ssize_t interface=*)
    cpdef list receive(self, ts, data, Py_ssize_t wirelen=*, Py_ssize_t interface=*)
    @cython.locals(index=Py_ssize_t, out=list)
    cpdef list receive_record(self, long long ts, data, Py_ssize_t wirelen=*, Py_ssize_t interface=*,
                              Py_ssize_t start=*, Py_ssize_t end=*)
    cpdef _advance_devices(self, long long ts, Py_ssize_t interface)
    cpdef list receive_sent(self, long long ts, data, Py_ssize_t wirelen=*, Py_ssize_t interface=*)
