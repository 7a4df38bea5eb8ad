"""Per-flow and total statistics from the engine's deliveries, and the
versioned JSON document (schema grotool.stats/1, documented in docs/json.md)."""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..engine.skb import delivered_bytes
from ..linktypes import SUPPORTED_LINKTYPES
from .flows import FlowNamer, FlowTuple, flow_json

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only: the recent flows' table
else:
    from ..engine._interpreted import cython

SCHEMA = "grotool.stats/1"


_count = itemgetter(1)


def most_common_first(counts: Dict[str, int]) -> Dict[str, int]:
    """dict(Counter(counts).most_common()): largest count first, ties in
    first-seen order, without building a Counter (this runs once per flow)."""
    if len(counts) < 2:
        return dict(counts)
    return dict(sorted(counts.items(), key=_count, reverse=True))


class _UnknownLinkNamer:
    """Frames of a link type grotool does not parse form one flow per link type."""

    def __init__(self, linktype: int):
        self.flow: FlowTuple = (f"linktype-{linktype}", "", "", None, None, (), ())

    def __call__(self, key: bytes, data: bytes) -> FlowTuple:
        return self.flow


def make_namer(linktype: int, vxlan_ports=(), geneve_ports=()):
    """Names come from the headers GRO compared: tunnels are looked into only
    where the host has them (the engine's VXLAN/GENEVE ports)."""
    if linktype not in SUPPORTED_LINKTYPES:
        return _UnknownLinkNamer(linktype)
    return FlowNamer(linktype, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)


# The compiled collector finds a flow delivered again in a table of the last
# flows seen, by a hash of their identity's bytes computed in C: one string
# compare instead of hashing the identity (a new string each delivery) for the dict.
RECENT_FLOWS = 4096              # a power of two
_MIX_A = 0x9E3779B97F4A7C15      # odd 64-bit multipliers (C unsigned integers compiled)
_MIX_B = 0xC2B2AE3D27D4EB4F


def _recent_slot(key) -> int:
    """The recent-flows table's slot for an engine flow identity of 16 bytes or
    more (compiled build only): three of its words mixed."""
    n = len(key)
    at = cython.cast(cython.p_uchar, key)
    memcpy(cython.address(a), at, 8)
    memcpy(cython.address(b), at + (n >> 1) - 4, 8)
    memcpy(cython.address(c), at + n - 8, 8)
    h = (a * _MIX_A) ^ (b * _MIX_B) ^ c ^ n
    return ((h * _MIX_A) >> 52) & (RECENT_FLOWS - 1)


class ReasonTally:
    """One flush reason's packets over all flows (the totals), counted as they
    come: a flow's slot holds its reason's tally, so counting a delivery adds to
    both with C integers, and reading the totals sums nothing."""

    __slots__ = ("reason", "packets")

    def __init__(self, reason: str):
        self.reason = reason
        self.packets = 0


# A flow counts its first REASON_SLOTS distinct flush reasons in place (C integers
# in the compiled build: stats.pxd sizes the array by this number); any further
# ones, which few flows see, in a dict.
REASON_SLOTS = 8


class FlowStats:
    __slots__ = ("flow", "packets_in", "packets_out", "super_packets", "max_segs", "_slot_tallies", "_slot_counts",
                 "_more_reasons", "bytes_out", "interface", "layers", "layout")

    def __init__(self, flow: FlowTuple, interface: int = 0):
        self._start(flow, interface)

    def _start(self, flow: FlowTuple, interface: int) -> None:
        """__init__'s work: the compiled collector makes its records with
        __new__ and this (a C call each, not the call protocol)."""
        self.flow = flow
        self.interface = interface
        self.packets_in = 0
        self.packets_out = 0
        self.super_packets = 0
        self.max_segs = 0
        # flush reason -> packets (reason_counts): its reasons' tallies in first-seen order, and its counts
        self._slot_tallies: List[ReasonTally] = []
        self._slot_counts = [0] * 8                  # REASON_SLOTS zeros (a C array in the compiled build)
        self._more_reasons: Optional[Dict[str, int]] = None    # past the slots, in first-seen order
        self.bytes_out = 0
        # (reason, "outer"/"inner") -> packets, of encapsulated packets (a plain dict:
        # a Counter per flow cost more than the rest of a new flow's record); made
        # on the first encapsulated delivery: most flows never need it
        self.layers: Optional[Dict[Tuple[str, str], int]] = None
        self.layout: Optional["LayoutTotals"] = None   # with --layout: this flow's super-packets' shapes

    def count(self, reason: str, tallies: Dict[str, ReasonTally]) -> None:
        """One more packet flushed for ``reason``, in this flow and in its tally
        among ``tallies`` (the collector's, made on the reason's first sight)."""
        slots = self._slot_tallies
        n = len(slots)
        for i in range(n):
            tally = slots[i]
            if tally.reason == reason:
                self._slot_counts[i] += 1
                tally.packets += 1
                return
        tally = tallies.get(reason)
        if tally is None:
            # in delivery order: a reason's first sight overall
            tally = tallies[reason] = ReasonTally(reason)
        tally.packets += 1
        if n < REASON_SLOTS:
            slots.append(tally)
            self._slot_counts[n] = 1
            return
        more = self._more_reasons
        if more is None:
            more = self._more_reasons = {}
        more[reason] = more.get(reason, 0) + 1

    @property
    def reason_counts(self) -> Dict[str, int]:
        """Flush reason -> packets, in first-seen order (a new dict)."""
        counts = {}
        for i, tally in enumerate(self._slot_tallies):
            counts[tally.reason] = self._slot_counts[i]
        if self._more_reasons:
            counts.update(self._more_reasons)
        return counts

    @property
    def reasons(self) -> Counter:
        return Counter(self.reason_counts)

    def to_json(self) -> dict:
        doc = {
            "flow": flow_json(self.flow),
            "interface": self.interface,
            "packets_in": self.packets_in,
            "packets_out": self.packets_out,
            "super_packets": self.super_packets,
            "max_segs": self.max_segs,
            "avg_segs": round(self.packets_in / self.packets_out, 3) if self.packets_out else 0.0,
            "bytes_out": self.bytes_out,
            "flush_reasons": most_common_first(self.reason_counts),
        }
        if self.layers:
            doc["flush_layers"] = layers_json(self.layers)
        if self.layout is not None:
            doc["skb_layout"] = self.layout.to_json()
        return doc


def layers_json(layers: Dict[Tuple[str, str], int]) -> dict:
    """reason -> {"outer": n, "inner": m}: which header an L3 check failed on."""
    out: Dict[str, Dict[str, int]] = {}
    for (reason, layer), n in sorted(layers.items()):
        out.setdefault(reason, {})[layer] = n
    return out


class LayoutTotals:
    """The skb layout model summed over super-packets (engine/layout.py)."""

    __slots__ = ("layout", "max_skb_frags", "super_packets", "with_frag_list", "frag_list_skbs", "frags",
                 "slow_pulls", "bytes", "truesize")

    def __init__(self, layout: str, max_skb_frags: int):
        self.layout = layout
        self.max_skb_frags = max_skb_frags
        self.super_packets = self.with_frag_list = self.frag_list_skbs = self.frags = 0
        self.slow_pulls = self.bytes = self.truesize = 0

    def shape_of(self, delivery):
        return delivery.shape(self.layout, self.max_skb_frags)

    def add(self, delivery, shape) -> None:
        self.super_packets += 1
        self.with_frag_list += 1 if shape.frag_list else 0
        self.frag_list_skbs += shape.frag_list
        self.frags += shape.frags
        self.slow_pulls += shape.slow_pulls
        self.bytes += delivery.frame_len - delivery.l2_len
        self.truesize += shape.truesize

    def to_json(self) -> dict:
        return {
            "layout": self.layout,
            "super_packets": self.super_packets,
            "with_frag_list": self.with_frag_list,
            "frag_list_skbs": self.frag_list_skbs,
            "page_frags": self.frags,
            "slow_pulls": self.slow_pulls,
            "len_over_truesize": round(self.bytes / self.truesize, 4) if self.truesize else 0.0,
        }


def _new_flow_stats(flow: FlowTuple, interface: int) -> FlowStats:
    """FlowStats(flow, interface); compiled, without the call protocol."""
    if cython.compiled:
        fs = FlowStats.__new__(FlowStats)
        fs._start(flow, interface)
        return fs
    return FlowStats(flow, interface)


class StatsCollector:
    """Feed it every Delivery in order; it never keeps the packets themselves.
    Flows are told apart by capture interface too: each interface is its own device."""

    def __init__(self, linktype: int, interfaces: Optional[List[dict]] = None, *, layout: str = "",
                 max_skb_frags: int = 17, vxlan_ports=(), geneve_ports=()):
        self.linktype = linktype
        self._ports = (tuple(vxlan_ports), tuple(geneve_ports))
        self.namer = make_namer(linktype, *self._ports)
        self.interfaces: List[dict] = interfaces if interfaces is not None else []
        self._namers: Dict[int, object] = {0: self.namer}
        self.flows: Dict[tuple, FlowStats] = {}       # (interface, flow) -> its statistics
        # every flush reason seen, in first-seen order: its packets over all flows
        self._tallies: Dict[str, ReasonTally] = {}
        self.packets_in = 0
        self.packets_out = 0
        self.super_packets = 0
        self.max_segs = 0
        # the skb layout model, only when asked for (--layout): it costs per super-packet
        self.layout = LayoutTotals(layout, max_skb_frags) if layout else None
        self.layers: Counter = Counter()
        # engine flow identity -> its FlowStats: the identity holds every byte the
        # flow description is made of, so one description per identity is exact
        self._by_key: Dict[object, FlowStats] = {}
        # the compiled build's recent flows (identity, FlowStats) by _recent_slot
        self._recent_keys: list = [None] * RECENT_FLOWS if cython.compiled else []
        self._recent_flows: list = [None] * RECENT_FLOWS if cython.compiled else []

    def _namer_of(self, interface: int):
        namer = self._namers.get(interface)
        if namer is None:
            linktype = self.linktype
            for info in self.interfaces:
                if info["id"] == interface:
                    linktype = info["linktype"]
            namer = self._namers[interface] = make_namer(linktype, *self._ports)
        return namer

    def describe(self, delivery) -> FlowTuple:
        """A delivery's (or decision event's) flow, through the namer's cache by
        flow identity."""
        return self._name(delivery.interface, delivery.key, delivery.data, True)

    def _name(self, interface: int, key: bytes, data: bytes, cached: bool) -> FlowTuple:
        """describe() of a delivery's fields, or with cached False past the namer's
        cache: add() names each new flow identity once, its _by_key being that
        cache already."""
        namer = self.namer if not interface else self._namer_of(interface)
        if type(namer) is FlowNamer:
            flow_namer = namer          # typed in the compiled build: a C call, not the call protocol
            if cached:
                return flow_namer.name(key, data)
            return flow_namer.describe(data)
        return namer(key, data)

    def interface_name(self, interface: int) -> str:
        for info in self.interfaces:
            if info["id"] == interface:
                return info["name"]
        return f"if{interface}"

    @property
    def reason_counts(self) -> Dict[str, int]:
        """Flush reason -> packets, in first-seen order."""
        return {reason: tally.packets for reason, tally in self._tallies.items()}

    @property
    def reasons(self) -> Counter:
        return Counter(self.reason_counts)

    @property
    def interfaces_seen(self) -> int:
        return len({fs.interface for fs in self.flows.values()})

    def add(self, delivery) -> FlowStats:
        """Count a delivery; returns its flow's statistics."""
        key = delivery.key
        interface = delivery.interface
        fs = None
        slot = -1
        if cython.compiled and not interface and len(key) >= 16:
            slot = _recent_slot(key)
            recent = self._recent_keys[slot]
            if recent is not None and recent == key:
                fs = self._recent_flows[slot]
                slot = -1
        if fs is None and key:
            fs = self._by_key.get((interface, key) if interface else key)
        if fs is None:
            if interface and key:
                key = (interface, key)
            # the compiled build's deliveries are the engine's: their bytes by a C call
            data = delivered_bytes(delivery) if cython.compiled else delivery.data
            flow = self._name(interface, delivery.key, data, False)
            if key:
                # a new flow identity is nearly always a new flow: one look-up that
                # inserts (hashing the flow tuple once), its record made beforehand
                fs = _new_flow_stats(flow, interface)
                fs = self.flows.setdefault((interface, flow), fs)
                if len(self._by_key) < 1_000_000:
                    self._by_key[key] = fs
            else:
                fs = self.flows.get((interface, flow))
                if fs is None:
                    fs = self.flows[(interface, flow)] = FlowStats(flow, interface)
        if slot >= 0:
            self._recent_keys[slot] = key
            self._recent_flows[slot] = fs
        segs = delivery.segs
        reason = delivery.reason
        fs.packets_in += segs
        fs.packets_out += 1
        fs.bytes_out += delivery.frame_len
        fs.count(reason, self._tallies)
        layer = delivery.layer
        if layer:
            layers = fs.layers
            if layers is None:
                layers = fs.layers = {}
            layers[reason, layer] = layers.get((reason, layer), 0) + 1
            self.layers[reason, layer] += 1
        if segs > fs.max_segs:
            fs.max_segs = segs
        self.packets_in += segs
        self.packets_out += 1
        if segs > 1:
            fs.super_packets += 1
            self.super_packets += 1
            layout = self.layout
            if layout is not None:
                shape = layout.shape_of(delivery)
                layout.add(delivery, shape)
                if fs.layout is None:
                    fs.layout = LayoutTotals(layout.layout, layout.max_skb_frags)
                fs.layout.add(delivery, shape)
        if segs > self.max_segs:
            self.max_segs = segs
        return fs

    def sorted_flows(self) -> List[FlowStats]:
        return sorted(self.flows.values(), key=lambda f: (-f.packets_in, f.flow[0], f.flow[1], f.flow[2],
                                                          f.flow[3] or 0, f.flow[4] or 0, f.flow[5], f.interface))

    def totals(self, engine_stats: Optional[dict] = None) -> dict:
        """The document's totals (cheap: no per-flow work)."""
        totals = {
            "packets_in": self.packets_in,
            "packets_out": self.packets_out,
            "super_packets": self.super_packets,
            "segments_coalesced": self.packets_in - self.packets_out,
            "coalescing_ratio": round(self.packets_in / self.packets_out, 4) if self.packets_out else 0.0,
            "max_segs": self.max_segs,
            "flows": len(self.flows),
            "flush_reasons": most_common_first(self.reason_counts),
        }
        if self.layout is not None:
            totals["skb_layout"] = self.layout.to_json()
        if self.layers:
            totals["flush_layers"] = layers_json(self.layers)
        if engine_stats is not None:
            totals["checksums"] = engine_stats
        return totals

    def document(self, input_info: dict, settings: dict, engine_stats: Optional[dict] = None,
                 totals: Optional[dict] = None) -> dict:
        """The grotool.stats/1 document; ``totals`` (from totals()) if already made."""
        return {
            "schema": SCHEMA,
            "input": input_info,
            "settings": settings,
            "totals": self.totals(engine_stats) if totals is None else totals,
            "flows": [f.to_json() for f in self.sorted_flows()],
        }
