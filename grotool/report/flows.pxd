# Cython declarations for flows.py (compiled build only): naming a new flow
# reads the dissector's walk state as C fields and calls it directly.
cimport cython
from grotool.dissect cimport _Walk, walk_frame, addr_text, ip_address_text

cdef tuple _PROTO_NAME_OF
@cython.locals(names=dict, number=Py_ssize_t)
cdef tuple _flow(src, dst, proto, fragment, sport, dport, vlans, ethertype, problem, tunnels)
@cython.locals(w=_Walk, family=long, l3=Py_ssize_t)
cpdef tuple _describe(linktype, data, vxlan, geneve, _Walk walk=*)

@cython.final
cdef class FlowNamer:
    cdef public object linktype, vxlan_ports, geneve_ports
    cdef public dict _cache
    cdef _Walk _walk

    cpdef tuple describe(self, data)
    cpdef tuple name(self, key, data)
