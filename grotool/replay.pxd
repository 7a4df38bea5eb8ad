# Cython declarations for replay.py (used only by the compiled build): the
# per-frame loop keeps the interface number, FCS length, MTU bound and counters
# as C integers, and calls the engine, the statistics and the pcap writer
# directly (C calls, no boxed arguments).
import cython
from grotool.engine cimport Engine
from grotool.engine.skb cimport Delivery, clear_keeping_room, copy_frame
from grotool.io.capture cimport PcapWriter, _Records
from grotool.report.stats cimport StatsCollector

@cython.locals(d=Delivery, at=cython.Py_ssize_t)
cpdef _deliver(list out, fix, StatsCollector collector, after, PcapWriter writer)
@cython.locals(ts=cython.longlong, last_ts=cython.longlong, ifid=cython.Py_ssize_t, last_ifid=cython.Py_ssize_t,
               fcs=cython.Py_ssize_t, limit=cython.Py_ssize_t, wirelen=cython.Py_ssize_t,
               l3_length=cython.Py_ssize_t, out=list, start=cython.Py_ssize_t, end=cython.Py_ssize_t,
               in_place=cython.bint)
cpdef tuple _feed_records(_Records records, Engine engine, fix, StatsCollector collector, after, PcapWriter writer,
                          interface, verifier, Py_ssize_t mtu, reader, census, bint directed=*)
cdef dict LINK_HEADER_BYTES
cdef tuple VLAN_ETHERTYPES
@cython.locals(length=cython.Py_ssize_t, at=cython.Py_ssize_t, raw="const unsigned char *", ethertype=int)
cpdef Py_ssize_t _l3_length(Py_ssize_t linktype, bytes data, Py_ssize_t wirelen)
