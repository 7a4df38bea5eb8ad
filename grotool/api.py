"""grotool's Python API: a small, stable contract like the command line.

    >>> import grotool
    >>> run = grotool.Replay("captures/bulk-4flows.pcap", device="veth")
    >>> for packet in run:
    ...     pass
    >>> run.statistics.packets_out
    73

Documented in docs/api.md.  Everything public is exported from ``grotool``:
``Replay``, ``Packet``, ``Decision``, ``Statistics``, ``FlowStatistics``,
``Settings``, ``DpdkSettings``, ``GrotoolError``, ``InputError``.  Names not
listed there may change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from .dpdk.engine import DpdkSettings
from .engine import Engine
from .engine.skb import Delivery
from .engine.config import TIMESTAMP_YEARS, Settings, timestamp_fits
from .errors import GrotoolError, InputError

__all__ = ["Replay", "Packet", "Decision", "Statistics", "FlowStatistics", "Settings", "DpdkSettings",
           "GrotoolError", "InputError"]
STACKS = ("linux", "dpdk")

Frame = Union[Tuple[int, bytes], Tuple[int, bytes, int]]


@dataclass(frozen=True)
class Packet:
    """One packet Linux would hand to the stack: a super-packet, or a frame
    that was not merged (its bytes unchanged).  With ``stack="dpdk"``: one
    packet DPDK's GRO returned to the application."""

    data: bytes = field(repr=False)  # the packet, link header included
    timestamp_ns: int                # its first frame's timestamp
    segments: int                    # input frames it covers
    frames: Tuple[int, ...]          # those frames' numbers, 1-based as Wireshark shows them
    reason: str                      # why it was delivered now (`grotool reasons`)
    flow: str                        # e.g. "tcp 10.1.0.1:40000 > 10.0.0.1:5201"
    gso_size: int = 0                # super-packets: the segment size (mss); DPDK sets none (0)
    gso_type: Tuple[str, ...] = ()   # super-packets: e.g. ("tcpv4",); DPDK: ()
    queue: int = 0                   # RX queue (NAPI instance)
    poll: int = 0                    # NAPI poll number on that queue; DPDK: the rx burst after which it came back

    @property
    def is_super_packet(self) -> bool:
        return self.segments > 1


@dataclass(frozen=True)
class Decision:
    """One GRO decision (``Replay(..., events=True)``): what happened to an input
    frame (``kind`` "frame": merged, held, sent_up), or a held aggregate that was
    completed and delivered (``kind`` "completion": completed_held, evicted,
    flushed).  The fields of the grotool.events/1 records (docs/events.md)."""

    kind: str
    frame: int                       # the input frame (1-based); for a completion its first frame
    timestamp_ns: int
    outcome: str
    reason: Optional[str]            # None for a plain merge or hold
    function: str                    # the kernel function that decided ("" without reason)
    evidence: str                    # e.g. "ttl 63 != 64" ("" when none applies)
    flow: str
    layer: str = ""                  # "outer"/"inner" for an L3 reason of a tunnelled packet
    queue: int = 0
    poll: int = 0
    held_frame: Optional[int] = None  # the held aggregate compared with: its first frame ...
    held_segments: int = 0           # ... and its segments then
    frames: Tuple[int, ...] = ()     # frames delivered by this decision (empty when none)
    segments: int = 0
    cause: Optional[int] = None      # completion: the frame whose arrival completed it


@dataclass(frozen=True)
class FlowStatistics:
    flow: str
    frames_in: int
    packets_out: int
    super_packets: int
    max_segments: int
    flush_reasons: Dict[str, int]    # most frequent first


@dataclass(frozen=True)
class Statistics:
    frames_in: int
    packets_out: int
    super_packets: int
    coalescing_ratio: float          # frames in / packets out
    flush_reasons: Dict[str, int]    # most frequent first
    flows: Tuple[FlowStatistics, ...]   # busiest first
    document: dict                   # the whole grotool.stats/1 document (docs/json.md)


class Replay:
    """Replay a capture, or frames, through grotool's simulation of Linux GRO.

    ``source`` is a capture path (pcap or pcapng, gzip ok) or an iterable of
    ``(timestamp_ns, frame_bytes)`` (or ``(timestamp_ns, frame_bytes,
    wire_length)``) tuples, or scapy packets (a list, a ``PacketList``,
    ``rdpcap()``: timestamps from ``.time``, link type from the first layer);
    ``linktype`` says what the frames are (default 1, Ethernet; a capture
    file and scapy packets say it themselves).  Settings come as a
    ``grotool.Settings`` or as keyword arguments named like the replay
    options (``device="veth"``, ``budget=64``, ``gro_flush_timeout=...``).

    Iterating yields ``Packet`` objects in delivery order, lazily; a Replay
    runs once.  ``statistics`` is ready after the iteration (reading it
    earlier runs the replay to its end).  Bad input raises ``InputError``.

    With ``events=True``, ``events()`` yields a ``Decision`` per input frame
    and per completed aggregate: instead of iterating packets (lazily), or
    after the packet iteration (then they were kept in memory).

    ``stack="dpdk"`` replays through the model of DPDK 22.11's lib/gro
    instead (docs/dpdk.md), with ``dpdk=`` a ``grotool.DpdkSettings`` or a
    dict of its fields (``{"mode": "heavy", "burst": 16}``; defaults without
    it); Linux's settings do not apply.  The same Packet and Statistics come
    out; the model runs the whole input at the first packet, and its
    ``statistics.document`` is the ``grotool.dpdk/1`` document.
    """

    def __init__(self, source: Union[str, os.PathLike, Iterable[Frame]], settings: Optional[Settings] = None, *,
                 linktype: Optional[int] = None, events: bool = False, stack: str = "linux",
                 dpdk: Union[DpdkSettings, Mapping, None] = None, **options):
        if stack not in STACKS:
            raise ValueError(f"stack must be one of {', '.join(STACKS)}, not {stack!r}")
        self.stack = stack
        if stack == "dpdk":
            if settings is not None or options:
                raise TypeError("with stack='dpdk' the settings are dpdk=grotool.DpdkSettings(...) (or a dict of "
                                "its fields): Linux's replay options do not apply")
            if events:
                raise ValueError("decision events are Linux's: for DPDK's decisions use grotool explain --stack dpdk")
            self.settings = _dpdk_settings(dpdk)
        else:
            if dpdk is not None:
                raise TypeError("dpdk= goes with stack='dpdk'")
            if settings is not None and options:
                raise TypeError("give either settings or keyword options, not both")
            try:
                self.settings = settings if settings is not None else Settings(**options)
                self.settings.validate()
            except TypeError as exc:
                raise TypeError(f"unknown replay option: {exc}") from None
        self._events_on = bool(events)
        self._decisions: List[Decision] = []
        self._source = source
        self._linktype = linktype
        self._iterator: Optional[Iterator[Packet]] = None
        self._statistics: Optional[Statistics] = None
        self._started = False

    # -- iteration -----------------------------------------------------------------
    def __iter__(self) -> Iterator[Packet]:
        if self._started:
            raise RuntimeError("a Replay runs once; make a new one to replay again")
        self._started = True
        return self._run_dpdk() if self.stack == "dpdk" else self._run()

    @property
    def statistics(self) -> Statistics:
        if self._statistics is None:
            if not self._started:
                for _ in self:
                    pass
            else:
                raise RuntimeError("statistics are ready once the iteration has ended")
        return self._statistics

    def packets(self) -> List[Packet]:
        """All packets at once (small captures)."""
        return list(self)

    def events(self) -> Iterator[Decision]:
        """The decisions, in the order the engine made them (needs events=True)."""
        if not self._events_on:
            raise RuntimeError("decision events are off: make the Replay with events=True")
        if not self._started:
            self._started = True
            return self._run_for_events()
        if self._statistics is None:
            raise RuntimeError("the packet iteration is still running: read events() after it, or instead of it")
        decisions, self._decisions = self._decisions, []
        return iter(decisions)

    def _run_for_events(self) -> Iterator[Decision]:
        pending = self._decisions
        for _ in self._run():
            if pending:
                yield from pending
                pending.clear()
        yield from pending
        pending.clear()

    def _run(self) -> Iterator[Packet]:
        from .report.flows import flow_label
        from .report.stats import StatsCollector

        records, linktype, close = self._open()
        try:
            collector = StatsCollector(linktype, vxlan_ports=self.settings.vxlan_ports,
                                       geneve_ports=self.settings.geneve_ports)
            add = collector.add
            engine = Engine(linktype, self.settings, events=self._decision_sink(collector) if self._events_on else None)

            def packet(d) -> Packet:
                flow = add(d).flow
                return Packet(d.data, d.ts, d.segs, tuple(i + 1 for i in d.indices), d.reason,
                              flow_label(flow), d.gso_size, tuple(d.gso_type), d.queue, d.poll)

            feed = engine.feed
            for ts, data, wirelen, outbound in records:
                if outbound:
                    # the capture marks it as sent by its host (pcapng epb_flags): the engine places it
                    engine.receive_sent(ts, data, wirelen)
                    out = engine.drain()
                else:
                    out = feed(ts, data, wirelen)
                for d in out:
                    yield packet(d)
            for d in engine.finish():
                yield packet(d)
        finally:
            close()
        self._statistics = _statistics(collector.document({"linktype": linktype, "packets": engine.stats.frames},
                                                          self.settings.as_dict()))

    def _run_dpdk(self) -> Iterator[Packet]:
        from .dpdk.engine import simulate
        from .dpdk.run import DpdkRun
        from .report.flows import flow_label
        from .report.stats import StatsCollector

        frames, stamps, info = self._dpdk_input()
        packets = simulate(frames, self.settings)
        collector = StatsCollector(1, vxlan_ports=self.settings.vxlan_ports)
        for p in packets:
            # a Delivery as the statistics read it (the compiled collector takes nothing else)
            flow = collector.add(Delivery(stamps[p.covers[0]], p.data, len(p.covers), p.reason, tuple(p.covers))).flow
            yield Packet(p.data, stamps[p.covers[0]], len(p.covers), tuple(i + 1 for i in p.covers), p.reason,
                         flow_label(flow), poll=p.burst + 1)
        stats = _statistics(collector.document(info, self.settings.as_json()))
        document = DpdkRun(packets, stamps, info, self.settings, "model").document()
        self._statistics = Statistics(stats.frames_in, stats.packets_out, stats.super_packets,
                                      stats.coalescing_ratio, stats.flush_reasons, stats.flows, document)

    def _dpdk_input(self):
        """(Ethernet frames, timestamps, input info) for the DPDK model: a capture as
        `replay --stack dpdk` reads it, or the frames given, made Ethernet likewise."""
        from .oracle import ethernet_frame, read_input

        source = self._source
        if isinstance(source, (str, os.PathLike)):
            frames, stamps, info = read_input(os.fspath(source))
            if self._linktype is not None and self._linktype != info["linktype"]:
                raise InputError(f"{os.fspath(source)}: link type {info['linktype']}, not {self._linktype}")
            return frames, stamps, info
        records, linktype, close = self._open()
        frames, stamps = [], []
        try:
            for ts, data, _wirelen, _outbound in records:
                frames.append(ethernet_frame(linktype, data, f"frame {len(frames) + 1}"))
                stamps.append(ts)
        finally:
            close()
        return frames, stamps, {"path": None, "linktype": linktype, "packets": len(frames),
                                "output_linktype": 1}

    def _decision_sink(self, collector):
        from .report.flows import flow_label

        keep = self._decisions.append
        describe = collector.describe

        def sink(e) -> None:
            keep(Decision(e.kind, e.frame, e.ts, e.outcome, e.reason, e.function, e.evidence,
                          flow_label(describe(e)), e.layer, e.queue, e.poll, e.held_frame, e.held_segs,
                          e.frames, e.segs, e.cause))
        return sink

    def _open(self):
        source = self._source
        if isinstance(source, (str, os.PathLike)):
            from .io.capture import CaptureReader

            reader = CaptureReader(os.fspath(source))
            linktype = reader.linktype if reader.linktype is not None else 1
            if self._linktype is not None and self._linktype != linktype:
                reader.close()
                raise InputError(f"{reader.name}: link type {linktype}, not {self._linktype}")
            fcs = reader.fcs_len

            def records():
                marked = reader.records_with_interface()
                for ts, data, wirelen, _ in marked:
                    if fcs and len(data) >= fcs and wirelen >= len(data):
                        data, wirelen = data[:-fcs], wirelen - fcs      # the kernel never sees the FCS
                    yield ts, data, wirelen, marked.outbound
            return records(), linktype, reader.close
        items = iter(source)
        first = next(items, None)
        if first is None:
            return iter(()), self._linktype if self._linktype is not None else 1, lambda: None
        if _is_scapy_packet(first):
            linktype = self._linktype if self._linktype is not None else _scapy_linktype(first, 1)
            return _scapy_frames(first, items, linktype), linktype, lambda: None
        return _frames(_chain_first(first, items)), self._linktype if self._linktype is not None else 1, \
            lambda: None


def _dpdk_settings(dpdk: Union[DpdkSettings, Mapping, None]) -> DpdkSettings:
    if dpdk is None:
        settings = DpdkSettings()
    elif isinstance(dpdk, DpdkSettings):
        settings = dpdk
    elif isinstance(dpdk, Mapping):
        values = dict(dpdk)
        for name in ("gro_types", "vxlan_ports"):
            if name in values and not isinstance(values[name], tuple):
                values[name] = tuple(values[name].split(",")) if isinstance(values[name], str) else \
                    tuple(values[name])
        try:
            settings = DpdkSettings(**values)
        except TypeError as exc:
            raise TypeError(f"unknown DPDK setting: {exc}") from None
    else:
        raise TypeError(f"dpdk= takes a grotool.DpdkSettings or a dict of its fields, not {type(dpdk).__name__}")
    problem = settings.problem()
    if problem:
        raise ValueError(problem)
    return settings


def _chain_first(first, rest):
    yield first
    yield from rest


# The link type of a scapy packet, by its first layer's class (LINKTYPE_ values);
# raw IP (101) carries IPv4 and IPv6 alike, so a list may mix them.
SCAPY_LINKTYPES = {"Ether": 1, "Dot3": 1, "IP": 101, "IPv6": 101, "CookedLinux": 113, "CookedLinuxV2": 276}


def _is_scapy_packet(item) -> bool:
    """A scapy Packet, told by its class hierarchy: scapy is never imported here
    (a caller passing tuples never pays for it)."""
    return any(c.__name__ == "Packet" and c.__module__ == "scapy.packet" for c in type(item).__mro__)


def _scapy_linktype(packet, number: int) -> int:
    name = type(packet).__name__
    linktype = SCAPY_LINKTYPES.get(name)
    if linktype is None:
        raise InputError(f"frame {number}: a scapy {name} packet: grotool takes frames starting with "
                         f"{', '.join(SCAPY_LINKTYPES)} (or give bytes and linktype=)")
    return linktype


def _scapy_frames(first, rest, linktype: int):
    """(timestamp_ns, bytes, wire length) of scapy packets: the timestamp from
    ``.time`` (seconds, as rdpcap sets it and scapy stamps a new packet), the
    wire length from ``.wirelen`` when rdpcap read one; every packet of the
    link type the first one has."""
    for k, packet in enumerate(_chain_first(first, rest)):
        number = k + 1
        if not _is_scapy_packet(packet):
            raise InputError(f"frame {number}: {type(packet).__name__} among scapy packets")
        if k and SCAPY_LINKTYPES.get(type(packet).__name__) != linktype and \
                _scapy_linktype(packet, number) != linktype:
            raise InputError(f"frame {number}: a scapy {type(packet).__name__} packet after "
                             f"{type(first).__name__} ones: one link type per replay")
        try:
            ts = int(round(packet.time * 1_000_000_000))
        except (TypeError, ValueError, ArithmeticError):
            raise InputError(f"frame {number}: scapy packet time {packet.time!r} is not a number of seconds") \
                from None
        if not timestamp_fits(ts):
            raise InputError(f"frame {number}: timestamp {ts} ns is outside {TIMESTAMP_YEARS} that grotool takes")
        data = bytes(packet)
        wirelen = getattr(packet, "wirelen", None)
        yield ts, data, wirelen if isinstance(wirelen, int) and wirelen > len(data) else -1, False


def _frames(source: Iterable[Frame]):
    for k, item in enumerate(source):
        try:
            if len(item) == 2:
                ts, data = item
                wirelen = -1
            else:
                ts, data, wirelen = item
        except (TypeError, ValueError):
            raise InputError(f"frame {k + 1}: expected (timestamp_ns, bytes) or (timestamp_ns, bytes, wire_length)") \
                from None
        if not isinstance(data, (bytes, bytearray, memoryview)) or not isinstance(ts, int):
            raise InputError(f"frame {k + 1}: expected an integer timestamp in ns and bytes")
        if not timestamp_fits(ts):
            raise InputError(f"frame {k + 1}: timestamp {ts} ns is outside {TIMESTAMP_YEARS} that grotool takes")
        yield int(ts), bytes(data), wirelen, False


def _statistics(doc: dict) -> Statistics:
    from .report.flows import flow_from_json, flow_label

    def label(flow: dict) -> str:
        return flow_label(flow_from_json(flow))

    totals = doc["totals"]
    flows = tuple(FlowStatistics(label(f["flow"]), f["packets_in"], f["packets_out"], f["super_packets"],
                                 f["max_segs"], dict(f["flush_reasons"])) for f in doc["flows"])
    return Statistics(totals["packets_in"], totals["packets_out"], totals["super_packets"],
                      totals["coalescing_ratio"], dict(totals["flush_reasons"]), flows, doc)
