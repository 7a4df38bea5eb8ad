"""The split job (`grotool split`): capture in -> grotool.gso -> capture out.

Glue between grotool.io and grotool.gso; no printing.

Which frames are super-packets, and their gso_size:
1. a per-packet sidecar (``grotool replay --packets`` JSON lines, or the
   ``grotool kernel --json`` document), given or found next to the capture:
   a record with segs/gso_segs > 1 is split with its gso_size and gso_type;
   every other record passes through;
2. without one, a frame whose packet (the innermost IP packet: link header,
   VLAN tags and tunnel headers counted off) is longer than the link MTU is a
   super-packet.  The MTU is ``--mtu``, else the one the capture implies
   (grotool.report.mtu: at least 1500).  It is split with ``--mss``, else the
   largest payload of an ordinary (within the MTU) segment of the same flow in
   the capture, else the payload that fills the MTU.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .compare import load_sidecar
from .errors import InputError
from .gso import NotSegmentable, flow_key, parse, segment
from .io.capture import CaptureReader, PcapWriter
from .io.safe_output import check_outputs
from .linktypes import LINK_HEADER_BYTES, LINKTYPE_ETHERNET
from .report.mtu import DEFAULT_MTU, MtuCensus

LINK_MTU = DEFAULT_MTU
_LINK_HEADER = LINK_HEADER_BYTES


@dataclass
class SplitResult:
    frames_in: int = 0
    frames_out: int = 0
    super_packets: int = 0          # frames split into 2 or more segments
    passed: int = 0                 # frames written unchanged
    sidecar: Optional[str] = None
    not_segmentable: Counter = field(default_factory=Counter)   # reason -> frames passed unchanged
    ignored: List[str] = field(default_factory=list)             # files beside the input not taken as sidecar
    mss_sources: Counter = field(default_factory=Counter)       # sidecar / option / flow / mtu -> super-packets
    linktype: int = LINKTYPE_ETHERNET
    mtu: Optional[int] = None       # without a sidecar: the link MTU super-packets were told by
    mtu_from: Optional[str] = None  # "option" (--mtu) or "capture" (the MTU it implies)
    invalid_timestamps: int = 0     # records read (and written) with the previous record's timestamp
    first_invalid_timestamp: Optional[dict] = None

    def as_dict(self) -> dict:
        return {"frames_in": self.frames_in, "frames_out": self.frames_out, "super_packets": self.super_packets,
                "passed_unchanged": self.passed, "sidecar": self.sidecar,
                "not_segmentable": dict(self.not_segmentable), "gso_size_from": dict(self.mss_sources),
                "mtu": self.mtu, "mtu_from": self.mtu_from}


@dataclass
class SidecarEntry:
    segs: int
    gso_size: int
    gso_type: Tuple[str, ...]


def _entry(raw, where: str) -> SidecarEntry:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: entry is not an object")
    segs = raw.get("gso_segs", raw.get("segs", 1))
    size = raw.get("gso_size", 0)
    types = raw.get("gso_type", [])
    for name, value in (("segs", segs), ("gso_size", size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InputError(f"{where}: {name} {value!r} is not a non-negative integer")
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise InputError(f"{where}: gso_type {types!r} is not a list of names")
    return SidecarEntry(segs, size, tuple(types))


def load_segs(path: Optional[str], capture: str, auto: bool,
              ignored: Optional[List[str]] = None) -> Tuple[Optional[str], Optional[List[SidecarEntry]]]:
    """The sidecar to use (path, entries), or (None, None).  A file beside the
    capture is used only when it declares a sidecar schema (compare.find_sidecar);
    the others are described in ``ignored``."""
    from .compare import find_sidecar

    if path is not None:
        return path, [_entry(e, f"{path}: packet {i}") for i, e in enumerate(load_sidecar(path))]
    if not auto:
        return None, None
    cand, raw, notes = find_sidecar(capture)
    if ignored is not None:
        ignored.extend(notes)
    if cand is None:
        return None, None
    return cand, [_entry(e, f"{cand}: packet {i}") for i, e in enumerate(raw)]


def link_overhead(data: bytes, linktype: int) -> int:
    """Bytes in front of the network header: the link header and VLAN tags."""
    hlen = _LINK_HEADER.get(linktype, 0)
    if linktype == LINKTYPE_ETHERNET:
        at = 12
        while len(data) >= at + 6 and data[at:at + 2] in (b"\x81\x00", b"\x88\xa8"):
            at += 4
            hlen += 4
    return hlen


def _payload_len(data: bytes, linktype: int) -> Optional[Tuple[bytes, int]]:
    """(flow key, L4 payload length), or None when GSO could not segment the flow."""
    try:
        chain = parse(data, linktype)
    except NotSegmentable:
        return None
    return flow_key(data, chain), chain.end - chain.payload_off


class _Survey:
    """The first pass over a capture without a sidecar: the packet lengths of
    frames longer than the MTU floor (what the capture implies), and per flow
    the largest payload of a segment within the floor and the (packet length,
    payload) of the longer ones, until the MTU is known."""

    def __init__(self, census: MtuCensus, linktype: int):
        self.census = census
        self.linktype = linktype
        self.within: Dict[bytes, int] = {}
        self.longer: Dict[bytes, List[Tuple[int, int]]] = {}

    def add(self, data: bytes, wirelen: int, record: int) -> None:
        got = _payload_len(data, self.linktype)
        l3_length = len(data) - link_overhead(data, self.linktype)
        length = l3_length
        if l3_length > self.census.floor:
            length = self.census.add(self.linktype, data, len(data), l3_length, record)
        if got is None:
            return
        key, payload = got
        if length <= self.census.floor:
            if payload > self.within.get(key, 0):
                self.within[key] = payload
        else:
            self.longer.setdefault(key, []).append((length, payload))

    def largest(self, mtu: int) -> Dict[bytes, int]:
        """Per flow, the largest payload of an ordinary segment (packet within ``mtu``)."""
        best = dict(self.within)
        for key, pairs in self.longer.items():
            for length, payload in pairs:
                if length <= mtu and payload > best.get(key, 0):
                    best[key] = payload
        return best


def _strip_fcs(data: bytes, wirelen: int, fcs: int) -> Tuple[bytes, int]:
    """The frame without a captured FCS (the output link type announces none)."""
    if fcs and len(data) >= fcs and wirelen >= len(data):
        return data[:-fcs], wirelen - fcs
    return data, wirelen


def split_capture(input_path: str, output_path: Optional[str], mss: Optional[int] = None,
                  segs_path: Optional[str] = None, auto_sidecar: bool = True,
                  mtu: Optional[int] = None) -> SplitResult:
    """Split the super-packets of ``input_path`` (see the module docstring);
    ``mtu``: the link MTU (None: the one the capture implies, at least 1500)."""
    check_outputs([output_path], ["output capture"], [input_path, segs_path])
    result = SplitResult()
    sidecar_path, entries = load_segs(segs_path, input_path, auto_sidecar, result.ignored)
    result.sidecar = sidecar_path
    largest: Dict[bytes, int] = {}
    buffered: Optional[list] = None
    buffered_fcs = 0
    census = None
    if entries is None:
        census = MtuCensus(LINK_MTU if mtu is None else mtu, fixed=mtu is not None)
        # the MTU the capture implies and each flow's largest ordinary segment: a first pass
        with CaptureReader(input_path) as reader:
            linktype = reader.linktype if reader.linktype is not None else LINKTYPE_ETHERNET
            if input_path == "-":
                buffered = list(reader)
                records: Iterable = buffered
            else:
                records = reader
            buffered_fcs = reader.fcs_len
            survey = _Survey(census, linktype)
            for record, (_ts, data, wirelen) in enumerate(records, 1):
                data, wirelen = _strip_fcs(data, wirelen, buffered_fcs)
                survey.add(data, wirelen, record)
            result.invalid_timestamps = reader.invalid_timestamps
            result.first_invalid_timestamp = reader.first_invalid_timestamp
            result.mtu = census.implied
            result.mtu_from = "option" if mtu is not None else "capture"
            largest = survey.largest(result.mtu)
    with CaptureReader(input_path) if buffered is None else _Buffered(buffered, linktype, buffered_fcs) as reader:
        linktype = reader.linktype if reader.linktype is not None else LINKTYPE_ETHERNET
        result.linktype = linktype
        fcs = reader.fcs_len
        writer = PcapWriter(output_path, linktype, 262144) if output_path else None
        try:
            for ts, data, wirelen in reader:
                index = result.frames_in
                result.frames_in += 1
                data, wirelen = _strip_fcs(data, wirelen, fcs)
                cut = 0 <= wirelen and len(data) < wirelen     # cut by snaplen: never split, stays cut
                out = None if cut else _split_one(data, index, linktype, entries, sidecar_path, mss,
                                                  largest, result, census)
                if out is None:
                    result.passed += 1
                    result.frames_out += 1
                    if writer:
                        writer.write(ts, data, wirelen if cut else None)
                    continue
                result.super_packets += 1
                result.frames_out += len(out)
                if writer:
                    for frame in out:
                        writer.write(ts, frame)
        except BaseException:
            if writer:
                writer.abort()
            raise
        if entries is not None and len(entries) != result.frames_in:
            if writer:
                writer.abort()
            raise InputError(f"{sidecar_path}: has {len(entries)} packets, but {input_path} has {result.frames_in}")
        if writer:
            writer.close()
        if isinstance(reader, CaptureReader):
            result.invalid_timestamps = reader.invalid_timestamps
            result.first_invalid_timestamp = reader.first_invalid_timestamp
    return result


def _split_one(data: bytes, index: int, linktype: int, entries, sidecar_path, mss, largest,
               result: SplitResult, census: Optional[MtuCensus] = None) -> Optional[List[bytes]]:
    """The segments of one frame, or None to pass it through unchanged."""
    gso_type: Tuple[str, ...] = ()
    if entries is not None:
        if index >= len(entries):
            raise InputError(f"{sidecar_path}: has {len(entries)} packets, but the capture has more")
        entry = entries[index]
        if entry.segs <= 1:
            return None
        gso_type = entry.gso_type
        size, source = entry.gso_size, "sidecar"
        if not size:
            result.not_segmentable["sidecar gives no gso_size"] += 1
            return None
    else:
        l3_length = len(data) - link_overhead(data, linktype)
        if l3_length <= result.mtu or census.packet_length(linktype, data, len(data), l3_length) <= result.mtu:
            return None
        if mss is not None:
            size, source = mss, "option"
        else:
            try:
                chain = parse(data, linktype)
            except NotSegmentable as exc:
                result.not_segmentable[str(exc)] += 1
                return None
            key = flow_key(data, chain)
            if key in largest:
                size, source = largest[key], "flow"
            else:
                # nothing to learn from: the payload that fills the MTU after the packet's own headers
                at = census.packet_length(linktype, data, len(data), l3_length)
                size, source = result.mtu - (chain.payload_off - (len(data) - at)), "mtu"
    try:
        if size <= 0:
            raise NotSegmentable("no usable gso_size")
        out = segment(data, linktype, size, gso_type)
    except NotSegmentable as exc:
        result.not_segmentable[str(exc)] += 1
        return None
    if len(out) == 1:
        return None
    result.mss_sources[source] += 1
    return out


class _Buffered:
    """Records already read from standard input, replayed for the second pass."""

    format = "pcap"

    def __init__(self, records: list, linktype: int, fcs_len: int):
        self._records = records
        self.linktype = linktype
        self.fcs_len = fcs_len

    def __iter__(self):
        return iter(self._records)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
