# Cython declarations for stats.py (used only by the compiled build): the
# counters a delivery updates are C integers and the per-flow record a C
# struct, so adding a delivery costs no attribute dictionary look-ups.
import cython
from libc.string cimport memcpy
from grotool.engine.skb cimport Delivery, delivered_bytes
from grotool.report.flows cimport FlowNamer

cdef Py_ssize_t RECENT_FLOWS
cdef unsigned long long _MIX_A, _MIX_B
@cython.locals(n=Py_ssize_t, at=cython.p_uchar, a=cython.ulonglong, b=cython.ulonglong, c=cython.ulonglong,
               h=cython.ulonglong)
cdef Py_ssize_t _recent_slot(bytes key) noexcept

@cython.final
cdef class ReasonTally:
    cdef public str reason
    cdef public Py_ssize_t packets

@cython.final
cdef class FlowStats:
    cdef public object flow, interface, layout
    cdef public dict layers
    cdef list _slot_tallies
    cdef Py_ssize_t _slot_counts[8]     # REASON_SLOTS (stats.py; tests/test_stats_totals.py checks they agree)
    cdef dict _more_reasons
    cdef public Py_ssize_t packets_in, packets_out, super_packets, max_segs, bytes_out
    @cython.locals(slots=list, n=Py_ssize_t, i=Py_ssize_t, tally=ReasonTally, more=dict)
    cpdef void count(self, str reason, dict tallies) except *
    cdef void _start(self, flow, interface) except *

@cython.locals(fs=FlowStats)
cdef FlowStats _new_flow_stats(flow, interface)

@cython.final
cdef class StatsCollector:
    cdef dict __dict__
    cdef public object linktype, namer, interfaces, layout, layers
    cdef public dict flows, _tallies, _by_key, _namers
    cdef list _recent_keys, _recent_flows
    cdef public tuple _ports
    cdef public Py_ssize_t packets_in, packets_out, super_packets, max_segs

    # given the engine's deliveries (replay, api): a Delivery, whose fields are read as C struct fields
    @cython.locals(fs=FlowStats, segs=cython.Py_ssize_t, slot=cython.Py_ssize_t, recent=bytes, data=bytes)
    cpdef FlowStats add(self, Delivery delivery)
    # a flow's name: describe (explain, decision events) through the namer's cache,
    # _name(..., False) without it (add, once per new flow identity)
    cpdef tuple describe(self, delivery)
    @cython.locals(flow_namer=FlowNamer)
    cpdef tuple _name(self, interface, key, data, bint cached)
