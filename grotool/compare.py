"""Compare two captures as GRO results (``grotool compare A B``).

What is compared
----------------
Every record is classified and put in a *flow*:

* TCP (not a fragment): flow ``(tcp, src, dst, sport, dport, vlans, tunnels)``;
  each packet is the tuple ``(first sequence number, payload length[, segments])``.
* UDP (not a fragment): flow ``(udp, ...)``; each packet is
  ``(payload length[, segments])`` by ordinal.
* Anything else (ARP, ICMP, IP fragments, other protocols, frames too short or
  malformed to parse): grouped by its description (``grotool.report.flows``),
  each packet compared by its exact captured bytes and wire length.

Headers are read by ``grotool.dissect``: through a tunnel (IP-in-IP, GRE,
VXLAN on UDP port 4789, GENEVE on 6081) the flow is the inner packet's, with
the tunnel's outer identity (``tunnels``: kind, outer addresses, key or VNI,
outer UDP ports) part of it.

Two captures are *identical* when they have the same flows and, flow by flow,
the same sequence of packets.  With ``require_order`` the global sequence of
packets must be the same as well (per-flow order is always required; the kernel
interleaves flows in delivery order, see kernel-oracle.md section 4).
The headers of TCP/UDP packets count too: the bytes from the network header
to the payload (IP ID, TTL/hop limit, TOS, TCP flags, ACK, window, options)
must be equal; only the TCP/UDP checksum fields (the packet's and a tunnel's
outer UDP one) are left out (``grotool kernel --csum auto`` fixes checksums
that replay keeps).  Other packets are compared by their bytes from the
network header on.  When both sidecars carry flush reasons (``replay
--packets``), the reasons must be equal as well.  Timestamps, link headers
(MAC addresses; the kernel oracle writes Ethernet whatever the input's link
type) and Ethernet padding are not compared.  Flags are shown in the context rows to help debugging.

Segments
--------
A pcap does not say how many wire segments a super-packet was built from
(``gso_segs``).  It is taken from a JSON sidecar when one is available: an
explicit path, or, unless ``auto_sidecar=False``, a file next to the capture
named like it with ``.json`` (``kernel.pcap`` -> ``kernel.json`` or
``kernel.pcap.json``).  A sidecar is a JSON object with a ``packets`` list (or
a bare list) holding one object per capture record, in record order, with
``gso_segs`` (0 or 1 for a non-GSO packet) or ``gso_size`` (segments are then
``ceil(payload / gso_size)``).  A file without such a list (for example the
``grotool.stats/1`` document of ``grotool replay --json``) is ignored when
auto-detected, and an error when named explicitly.  Segments are compared only
when both sides have them; otherwise the comparison is on
``(seq, payload length)`` and a note says so.  For two GRO results of the same
input that is nearly as strong: equal first sequence number and length means
the same input bytes were merged into that packet.

Result document (``CompareResult.to_json()``, schema ``grotool.compare/1``)::

    {
      "schema": "grotool.compare/1",
      "identical": bool,
      "compared": {"tcp": [...fields], "udp": [...], "other": "bytes",
                   "segments": bool, "require_order": bool},
      "inputs": {"a": INPUT, "b": INPUT},
      "counts": {...},
      "order": {"required": bool, "identical": bool, "first_difference": ORDER_DIFF|null},
      "flows": [FLOW, ...],      # order of first appearance in A, then B-only flows
      "notes": [str, ...]
    }
    INPUT = {"path", "format", "linktype", "packets", "tcp_packets", "udp_packets",
             "other_packets", "sidecar": path|null}
    FLOW  = {"flow": {proto, src, dst, sport, dport, vlan[, tunnel]}, "label", "kind": "tcp"|"udp"|"bytes",
             "status": "identical"|"different"|"only_in_a"|"only_in_b",
             "packets_a", "packets_b", "payload_bytes_a", "payload_bytes_b",
             "differing_regions", "first_difference": DIFF|null}
    DIFF  = {"ordinal_a", "ordinal_b", "seq", "rel_seq", "summary",
             "a": [ROW, ...], "b": [ROW, ...],          # the packets that differ
             "context": {"a": [ROW, ...], "b": [ROW, ...], "seq_base": int|null}}
    ROW   = {"frame" (1-based record number, as Wireshark numbers frames), "ordinal"
             (0-based within the flow), "len", "segs"|null, "in_difference": bool,
             tcp: "seq", "rel_seq", "flags"; bytes: "wirelen", "sha256", "head" (hex)}
    ORDER_DIFF = {"position" (0-based), "summary", "context": {"a": [OROW], "b": [OROW]}}
    OROW  = {"position", "frame", "flow" (label), "kind", "entry" (text), "in_difference"}
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .dissect import dissect
from .errors import InputError
from .io.capture import CaptureReader
from .linktypes import LINK_HEADER_BYTES
from .report.flows import FlowTuple, flow_json, flow_label, flow_of

SCHEMA = "grotool.compare/1"

KIND_TCP = "tcp"
KIND_UDP = "udp"
KIND_BYTES = "bytes"

CONTEXT_BEFORE = 2
CONTEXT_AFTER = 2
MAX_REGION_ROWS = 8
HEAD_BYTES = 256
REALIGN_LIMIT = 4096
SEQ_MOD = 1 << 32

_TCP_FLAG_LETTERS = ((0x01, "F"), (0x02, "S"), (0x04, "R"), (0x08, "P"), (0x10, "A"), (0x20, "U"),
                     (0x40, "E"), (0x80, "C"))

FlowId = Tuple[str, FlowTuple]          # (kind, flow tuple)


# ----------------------------------------------------------------------------
# Packets
# ----------------------------------------------------------------------------
@dataclass(slots=True)
class Packet:
    frame: int                 # 1-based record number
    kind: str
    length: int                # L4 payload bytes (bytes kind: captured length)
    seq: Optional[int] = None
    flags: int = 0
    segs: Optional[int] = None
    wirelen: int = 0
    digest: bytes = b""
    head: bytes = b""
    hdr: bytes = b""           # TCP/UDP: digest of the header bytes from the network header to the payload
    reason: Optional[str] = None   # flush reason from a `replay --packets` sidecar
    l2: int = 0                # bytes kind: link header bytes, left out of the digest and the wire length

    @property
    def seq_end(self) -> int:
        """Next sequence number after this packet (SYN and FIN count one)."""
        return (self.seq + self.length + (self.flags & 0x02 and 1) + (self.flags & 0x01 and 1)) % SEQ_MOD

    def key(self, with_segs: bool) -> tuple:
        if self.kind == KIND_TCP:
            key = (self.seq, self.length, self.segs) if with_segs else (self.seq, self.length)
            return key + (self.hdr, self.reason)
        if self.kind == KIND_UDP:
            key = (self.length, self.segs) if with_segs else (self.length,)
            return key + (self.hdr, self.reason)
        return (self.digest, self.wirelen - self.l2, self.reason)


def tcp_flags_text(flags: int) -> str:
    return "".join(letter for bit, letter in _TCP_FLAG_LETTERS if flags & bit) or "."


def _classify(linktype: int, data: bytes, frame_len: int):
    """(kind, flow tuple, seq, flags, payload length, checksum offsets, payload
    offset) of one record (the last two None for kind bytes).  The checksum
    offsets are those of every TCP/UDP checksum field captured, a tunnel's
    outer UDP one included.

    TCP and UDP are the innermost transport of a packet that is not a
    fragment, whose headers were captured and whose IP length fits the frame
    (``frame_len``: the wire length when the capture was cut short); anything
    else is kind bytes, named by its description.
    """
    d = dissect(data, linktype, wirelen=frame_len)
    flow = flow_of(d)
    if d.l3_ok and not d.fragment and not d.frag_header and d.l4_proto in (6, 17) and d.payload_off <= d.l3_end:
        l4_csums = tuple(c.at for c in d.checksums if c.kind in ("tcp", "udp") and c.at + 2 <= len(data))
        if d.l4_proto == 6:
            return KIND_TCP, flow, d.seq, d.tcp_flags, d.l3_end - d.payload_off, l4_csums, d.payload_off
        return KIND_UDP, flow, None, 0, d.l3_end - d.payload_off, l4_csums, d.payload_off
    return KIND_BYTES, flow, None, 0, len(data), None, None


_LINK_HEADER = LINK_HEADER_BYTES


def _header_digest(linktype: int, data: bytes, l4_csums: Tuple[int, ...], payload_at: int) -> bytes:
    """Digest of the bytes from the network header to the payload: any header
    field (TTL, TOS, IP ID, flags, window, ACK, options) counts; the link
    header, the TCP/UDP checksums (the packet's and a tunnel's outer UDP one,
    which `grotool kernel --csum auto` fixes and replay keeps), the payload and
    Ethernet padding do not."""
    start = _LINK_HEADER.get(linktype, 0)
    head = bytearray(data[start:payload_at])
    for at in l4_csums:
        head[at - start:at - start + 2] = b"\0\0"
    return hashlib.sha256(head).digest()[:8]


# ----------------------------------------------------------------------------
# Sidecars
# ----------------------------------------------------------------------------
def sidecar_candidates(path: str) -> List[str]:
    if path == "-":
        return []
    base = path[:-3] if path.endswith(".gz") else path
    stem, _ = os.path.splitext(base)
    out = []
    for cand in (stem + ".json", base + ".json", path + ".json", stem + ".jsonl"):
        if cand not in out and cand != path:
            out.append(cand)
    return out


# What a file found beside a capture must declare to be taken as its per-packet
# sidecar: the document of `grotool kernel --json`, or the lines of `grotool
# replay --packets` (each line carries the schema).  Anything else there (a
# tshark -T json export, a statistics document) is ignored, with a note.
SIDECAR_SCHEMAS = ("grotool.kernel/1", "grotool.packets/1")


def declared_schema(path: str) -> Optional[str]:
    """The ``schema`` a JSON document (or the first line of JSON Lines) declares;
    None when it declares none or is not JSON.  Reads the first line only when
    that line is a whole JSON object (JSON Lines), else the whole file."""
    try:
        with open(path) as f:
            first = f.readline(1 << 20)
            try:
                head = json.loads(first)
            except ValueError:
                head = json.loads(first + f.read())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    schema = head.get("schema") if isinstance(head, dict) else None
    return schema if isinstance(schema, str) else None


def find_sidecar(capture: str) -> Tuple[Optional[str], Optional[list], List[str]]:
    """The sidecar beside ``capture``: (path, packets, notes on the files
    beside it that were ignored).  Only a file declaring one of SIDECAR_SCHEMAS
    is a sidecar."""
    ignored = []
    for cand in sidecar_candidates(capture):
        if not os.path.isfile(cand):
            continue
        schema = declared_schema(cand)
        if schema not in SIDECAR_SCHEMAS:
            what = f"schema {schema}" if schema else "no grotool schema"
            ignored.append(f"ignored {cand} beside {capture}: {what}, not a per-packet sidecar "
                           f"({' or '.join(SIDECAR_SCHEMAS)}); name it with --segs to use it anyway")
            continue
        return cand, load_sidecar(cand), ignored
    return None, None, ignored


def _sidecar_packets(doc):
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict) and isinstance(doc.get("packets"), list):
        return doc["packets"]
    if isinstance(doc, dict) and ("segs" in doc or "gso_segs" in doc):
        return [doc]                     # `replay --packets` lines of a one-packet capture
    return None


def load_sidecar(path: str) -> list:
    """The per-record list of a sidecar; InputError when it has none."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise InputError(f"{path}: cannot open sidecar: {exc.strerror}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        # JSON Lines, as `grotool replay --packets FILE` writes: one object per packet
        try:
            doc = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError:
            raise InputError(f"{path}: sidecar is not valid JSON: {exc}") from None
    packets = _sidecar_packets(doc)
    if packets is None:
        schema = doc.get("schema") if isinstance(doc, dict) else None
        raise InputError(f"{path}: not a per-packet sidecar (no 'packets' list"
                         + (f"; schema {schema}" if schema else "") + ")")
    return packets


def _sidecar_segs(entry, payload: int, where: str) -> int:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: entry is not an object")
    segs = entry.get("gso_segs", entry.get("segs"))
    if segs is not None:
        if not isinstance(segs, int) or isinstance(segs, bool) or segs < 0:
            raise InputError(f"{where}: gso_segs {segs!r} is not a non-negative integer")
        return max(1, segs)
    size = entry.get("gso_size")
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise InputError(f"{where}: gso_size {size!r} is not a non-negative integer")
        return max(1, -(-payload // size)) if size else 1
    raise InputError(f"{where}: neither gso_segs nor gso_size")


# ----------------------------------------------------------------------------
# Reading one capture
# ----------------------------------------------------------------------------
@dataclass
class Side:
    path: str
    format: str = ""
    linktype: Optional[int] = None
    packets: int = 0
    counts: Dict[str, int] = field(default_factory=lambda: {KIND_TCP: 0, KIND_UDP: 0, KIND_BYTES: 0})
    sidecar: Optional[str] = None
    reasons: int = 0                                                # packets with a reason from the sidecar
    flows: Dict[FlowId, List[Packet]] = field(default_factory=dict)
    flow_ids: List[FlowId] = field(default_factory=list)            # by index of first appearance
    order: array = field(default_factory=lambda: array("I"))        # flow index of each record

    def at(self, k: int) -> Tuple[FlowId, int]:
        """(flow, ordinal within the flow) of record k."""
        fi = self.order[k]
        return self.flow_ids[fi], self.order[:k].count(fi)

    @property
    def has_segs(self) -> bool:
        return self.sidecar is not None

    def to_json(self) -> dict:
        return {"path": self.path, "format": self.format, "linktype": self.linktype, "packets": self.packets,
                "tcp_packets": self.counts[KIND_TCP], "udp_packets": self.counts[KIND_UDP],
                "other_packets": self.counts[KIND_BYTES], "sidecar": self.sidecar}


def read_side(path: str, sidecar: Optional[str], auto_sidecar: bool, notes: List[str], label: str) -> Side:
    side = Side(path)
    entries = None
    if sidecar is not None:
        entries = load_sidecar(sidecar)
        side.sidecar = sidecar
    elif auto_sidecar:
        cand, entries, ignored = find_sidecar(path)
        notes.extend(f"{label}: {note}" for note in ignored)
        if cand is not None:
            side.sidecar = cand
            notes.append(f"{label}: segments from sidecar {cand}")
    with CaptureReader(path) as reader:
        side.format = reader.format
        linktype = side.linktype = reader.linktype
        fcs = reader.fcs_len
        flows = side.flows
        order = side.order
        index_of: Dict[FlowId, int] = {}
        counts = side.counts
        for index, (_ts, data, wirelen) in enumerate(reader):
            if fcs and len(data) >= fcs:
                data = data[:-fcs]
                wirelen -= fcs
            frame = index + 1
            kind, tup, seq, flags, length, l4_csums, payload_at = _classify(linktype, data, max(wirelen, len(data)))
            flow: FlowId = (kind, tup)
            if kind == KIND_BYTES:
                # from the network header: the link header is not compared (grotool kernel's
                # output is Ethernet whatever the input's link type, replay's keeps it)
                l2 = min(_LINK_HEADER.get(linktype, 0), len(data))
                pkt = Packet(frame, KIND_BYTES, length, wirelen=wirelen, digest=hashlib.sha256(data[l2:]).digest(),
                             head=data[:HEAD_BYTES], l2=l2)
            else:
                pkt = Packet(frame, kind, length, seq=seq, flags=flags, wirelen=wirelen,
                             hdr=_header_digest(linktype, data, l4_csums, payload_at))
            if entries is not None:
                if index >= len(entries):
                    raise InputError(f"{side.sidecar}: has {len(entries)} packets, "
                                     f"but {path} has more")
                entry = entries[index]
                if kind != KIND_BYTES:
                    pkt.segs = _sidecar_segs(entry, pkt.length, f"{side.sidecar}: packet {index}")
                if isinstance(entry, dict) and isinstance(entry.get("reason"), str):
                    pkt.reason = entry["reason"]
                    side.reasons += 1
            counts[pkt.kind] += 1
            lst = flows.get(flow)
            if lst is None:
                lst = flows[flow] = []
                index_of[flow] = len(side.flow_ids)
                side.flow_ids.append(flow)
            order.append(index_of[flow])
            lst.append(pkt)
        side.packets = len(order)
    if entries is not None and len(entries) != side.packets:
        raise InputError(f"{side.sidecar}: has {len(entries)} packets, but {path} has {side.packets}")
    return side


# ----------------------------------------------------------------------------
# Differences
# ----------------------------------------------------------------------------
def _before(a: int, b: int) -> bool:
    """TCP sequence-space a < b (mod 2^32)."""
    return ((a - b) % SEQ_MOD) >= (1 << 31)


@dataclass
class Region:
    """Packets [a0, a1) of A and [b0, b1) of B that differ (ordinals in the flow)."""
    a0: int
    a1: int
    b0: int
    b1: int
    kind: str               # "split" (same bytes, packed differently), "segs", "mismatch", "extra", "diverged"


def _realign(pa: Sequence[Packet], pb: Sequence[Packet], i: int, j: int) -> Optional[Region]:
    """Smallest region from (i, j) after which both flows are at the same sequence number.

    Works when both sides deliver the same bytes, contiguously, packed into
    packets differently (the typical GRO disagreement).
    """
    a, b = pa[i], pb[j]
    if a.seq != b.seq:
        return None
    ea, eb, i2, j2 = a.seq_end, b.seq_end, i + 1, j + 1
    steps = 0
    while ea != eb:
        steps += 1
        if steps > REALIGN_LIMIT:
            return None
        if _before(ea, eb):
            if i2 >= len(pa) or pa[i2].seq != ea:
                return None
            ea, i2 = pa[i2].seq_end, i2 + 1
        else:
            if j2 >= len(pb) or pb[j2].seq != eb:
                return None
            eb, j2 = pb[j2].seq_end, j2 + 1
    kind = "split"
    if i2 - i == 1 and j2 - j == 1 and a.length == b.length:
        kind = _same_packet_kind(a, b)
    return Region(i, i2, j, j2, kind)


def _same_packet_kind(a: Packet, b: Packet) -> str:
    """What differs between two packets with the same payload."""
    if a.segs is not None and b.segs is not None and a.segs != b.segs:
        return "segs"
    if a.hdr != b.hdr:
        return "header"
    if a.reason != b.reason:
        return "reason"
    return "segs"


def _diff_flow(pa: Sequence[Packet], pb: Sequence[Packet], kind: str, with_segs: bool) -> List[Region]:
    regions: List[Region] = []
    i = j = 0
    la, lb = len(pa), len(pb)
    while i < la and j < lb:
        if pa[i].key(with_segs) == pb[j].key(with_segs):
            i += 1
            j += 1
            continue
        region = _realign(pa, pb, i, j) if kind == KIND_TCP else None
        if region is None:
            if kind == KIND_TCP:
                # Could not tell where the two flows agree again: one region to the end.
                regions.append(Region(i, la, j, lb, "diverged"))
                return regions
            region = Region(i, i + 1, j, j + 1, "mismatch")
        regions.append(region)
        i, j = region.a1, region.b1
    if i < la or j < lb:
        regions.append(Region(i, la, j, lb, "extra"))
    return regions


@dataclass
class FlowResult:
    flow: FlowTuple
    kind: str
    status: str
    packets_a: List[Packet]
    packets_b: List[Packet]
    regions: List[Region]
    with_segs: bool

    @property
    def identical(self) -> bool:
        return self.status == "identical"

    @property
    def seq_base(self) -> Optional[int]:
        if self.kind != KIND_TCP:
            return None
        first = self.packets_a[0] if self.packets_a else self.packets_b[0] if self.packets_b else None
        return first.seq if first is not None else None

    def row(self, pkt: Packet, ordinal: int, in_diff: bool) -> dict:
        row = {"frame": pkt.frame, "ordinal": ordinal, "len": pkt.length, "segs": pkt.segs,
               "in_difference": in_diff}
        if pkt.reason is not None:
            row["reason"] = pkt.reason
        if self.kind == KIND_TCP:
            row["seq"] = pkt.seq
            row["rel_seq"] = (pkt.seq - self.seq_base) % SEQ_MOD
            row["flags"] = tcp_flags_text(pkt.flags)
        elif self.kind == KIND_BYTES:
            row["wirelen"] = pkt.wirelen
            row["sha256"] = pkt.digest.hex()
            row["head"] = pkt.head[:64].hex()
        return row

    def _rows(self, pkts: List[Packet], lo: int, hi: int, d0: int, d1: int) -> List[dict]:
        return [self.row(pkts[k], k, d0 <= k < d1) for k in range(lo, hi)]

    def difference_json(self, region: Region) -> dict:
        pa, pb = self.packets_a, self.packets_b
        a1 = min(region.a1, region.a0 + MAX_REGION_ROWS)
        b1 = min(region.b1, region.b0 + MAX_REGION_ROWS)
        first = pa[region.a0] if region.a0 < len(pa) else pb[region.b0] if region.b0 < len(pb) else None
        seq = first.seq if first is not None and self.kind == KIND_TCP else None
        base = self.seq_base
        return {
            "ordinal_a": region.a0,
            "ordinal_b": region.b0,
            "seq": seq,
            "rel_seq": (seq - base) % SEQ_MOD if seq is not None else None,
            "kind": region.kind,
            "summary": self.summary(region),
            "a": self._rows(pa, region.a0, a1, region.a0, region.a1),
            "b": self._rows(pb, region.b0, b1, region.b0, region.b1),
            "context": {
                "a": self._rows(pa, max(0, region.a0 - CONTEXT_BEFORE), min(len(pa), a1 + CONTEXT_AFTER),
                                region.a0, region.a1),
                "b": self._rows(pb, max(0, region.b0 - CONTEXT_BEFORE), min(len(pb), b1 + CONTEXT_AFTER),
                                region.b0, region.b1),
                "seq_base": base,
            },
        }

    # -- human summaries --------------------------------------------------------
    def _describe_pkts(self, pkts: List[Packet], lo: int, hi: int) -> str:
        n = hi - lo
        if n <= 0:
            return "nothing"
        sizes = [p.length for p in pkts[lo:min(hi, lo + 6)]]
        text = " + ".join(map(str, sizes)) + (" + ..." if n > 6 else "")
        frames = f"frame {pkts[lo].frame}" if n == 1 else f"frames {pkts[lo].frame}-{pkts[hi - 1].frame}"
        segs = ""
        if self.with_segs:
            segs = " (" + ", ".join(str(p.segs) for p in pkts[lo:min(hi, lo + 6)]) + " segs)"
        total = sum(p.length for p in pkts[lo:hi])
        body = f"{n} packet{'s' if n != 1 else ''} ({text}" + (f" = {total}" if n > 1 else "") + " bytes)"
        return f"{body}{segs} at {frames}"

    def summary(self, r: Region) -> str:
        pa, pb = self.packets_a, self.packets_b
        if self.status == "only_in_a":
            return f"flow only in A ({len(pa)} packets)"
        if self.status == "only_in_b":
            return f"flow only in B ({len(pb)} packets)"
        if self.kind == KIND_TCP:
            base = self.seq_base
            if r.kind in ("header", "reason"):
                return (f"rel seq {(pa[r.a0].seq - base) % SEQ_MOD}: same packet ({pa[r.a0].length} bytes), "
                        + _header_or_reason(pa[r.a0], pb[r.b0]))
            if r.kind in ("split", "segs"):
                start = (pa[r.a0].seq - base) % SEQ_MOD
                end = (pa[r.a1 - 1].seq_end - base) % SEQ_MOD
                if r.kind == "segs":
                    return (f"rel seq {start}: same packet ({pa[r.a0].length} bytes) built from "
                            f"{pa[r.a0].segs} segments in A, {pb[r.b0].segs} in B")

                return (f"rel seq {start}-{end}: A has {self._describe_pkts(pa, r.a0, r.a1)}, "
                        f"B has {self._describe_pkts(pb, r.b0, r.b1)}")
            if r.kind == "extra":
                if r.a0 < r.a1:
                    return (f"A has {r.a1 - r.a0} more packet(s) from rel seq "
                            f"{(pa[r.a0].seq - base) % SEQ_MOD}: {self._describe_pkts(pa, r.a0, r.a1)}")
                return (f"B has {r.b1 - r.b0} more packet(s) from rel seq "
                        f"{(pb[r.b0].seq - base) % SEQ_MOD}: {self._describe_pkts(pb, r.b0, r.b1)}")
            a, b = pa[r.a0], pb[r.b0]
            return (f"packet #{r.a0 + 1} of the flow: A rel seq {(a.seq - base) % SEQ_MOD} len {a.length} "
                    f"(frame {a.frame}), B rel seq {(b.seq - base) % SEQ_MOD} len {b.length} (frame {b.frame}); "
                    "the flows do not realign after this")
        if r.kind == "extra":
            if r.a0 < r.a1:
                return f"A has {r.a1 - r.a0} more packet(s) from frame {pa[r.a0].frame}"
            return f"B has {r.b1 - r.b0} more packet(s) from frame {pb[r.b0].frame}"
        a, b = pa[r.a0], pb[r.b0]
        if self.kind == KIND_UDP:
            segs = f" ({a.segs} vs {b.segs} segs)" if self.with_segs else ""
            same = f"; {_header_or_reason(a, b)}" if a.length == b.length and a.segs == b.segs else ""
            return (f"packet #{r.a0 + 1} of the flow: A {a.length} bytes (frame {a.frame}), "
                    f"B {b.length} bytes (frame {b.frame}){segs}{same}")
        where = _first_byte_difference(a, b)
        return (f"packet #{r.a0 + 1} of the flow differs (A frame {a.frame}, {a.length} bytes; "
                f"B frame {b.frame}, {b.length} bytes): {where}")


def _header_or_reason(a: Packet, b: Packet) -> str:
    if a.hdr != b.hdr:
        flags = (f"; TCP flags {tcp_flags_text(a.flags)} vs {tcp_flags_text(b.flags)}"
                 if a.kind == KIND_TCP and a.flags != b.flags else "")
        return (f"but its headers differ (frames {a.frame} and {b.frame}: TTL/hop limit, TOS, IP ID, "
                f"TCP flags, window, ACK or options){flags}")
    return f"but flushed for {a.reason} in A (frame {a.frame}), {b.reason} in B (frame {b.frame})"


def _first_byte_difference(a: Packet, b: Packet) -> str:
    ha, hb = a.head, b.head
    for k in range(min(len(ha), len(hb))):
        if ha[k] != hb[k]:
            return f"first differing byte at offset {k} (0x{ha[k]:02x} vs 0x{hb[k]:02x})"
    if len(ha) != len(hb) and (len(ha) < HEAD_BYTES or len(hb) < HEAD_BYTES):
        return f"one is a prefix of the other (lengths {a.length} and {b.length})"
    if a.wirelen - a.l2 != b.wirelen - b.l2 and a.digest == b.digest:
        return f"same captured bytes, wire lengths {a.wirelen} and {b.wirelen}"
    return f"first difference beyond byte {HEAD_BYTES}"


@dataclass
class CompareResult:
    identical: bool
    a: Side
    b: Side
    flows: List[FlowResult]
    require_order: bool
    order_identical: bool
    order_position: Optional[int]
    segments_compared: bool
    notes: List[str]

    @property
    def different_flows(self) -> List[FlowResult]:
        return [f for f in self.flows if not f.identical]

    def counts(self) -> dict:
        status = [f.status for f in self.flows]
        return {
            "flows": len(self.flows),
            "flows_identical": status.count("identical"),
            "flows_different": status.count("different"),
            "flows_only_in_a": status.count("only_in_a"),
            "flows_only_in_b": status.count("only_in_b"),
            "packets_a": self.a.packets,
            "packets_b": self.b.packets,
            "differing_regions": sum(len(f.regions) for f in self.flows),
        }

    def _order_json(self) -> dict:
        doc = {"required": self.require_order, "identical": self.order_identical, "first_difference": None}
        if self.order_position is None:
            return doc
        pos = self.order_position
        labels: Dict[FlowId, str] = {}

        def orow(side: Side, k: int) -> dict:
            flow, ordinal = side.at(k)
            pkt = side.flows[flow][ordinal]
            label = labels.get(flow)
            if label is None:
                label = labels[flow] = flow_label(flow[1])
            return {"position": k, "frame": pkt.frame, "flow": label, "kind": flow[0],
                    "entry": _entry_text(pkt, self.segments_compared), "in_difference": k == pos}

        def rows(side: Side) -> List[dict]:
            return [orow(side, k) for k in range(max(0, pos - CONTEXT_BEFORE),
                                                  min(side.packets, pos + CONTEXT_AFTER + 1))]

        ra, rb = rows(self.a), rows(self.b)
        at = lambda rs: next((r for r in rs if r["in_difference"]), None)  # noqa: E731
        xa, xb = at(ra), at(rb)
        if xa is None:
            summary = f"A ends after {self.a.packets} packets; B goes on with {xb['flow']} (frame {xb['frame']})"
        elif xb is None:
            summary = f"B ends after {self.b.packets} packets; A goes on with {xa['flow']} (frame {xa['frame']})"
        else:
            summary = (f"global packet #{pos + 1}: A delivers {xa['flow']} {xa['entry']} (frame {xa['frame']}), "
                       f"B delivers {xb['flow']} {xb['entry']} (frame {xb['frame']})")
        doc["first_difference"] = {"position": pos, "summary": summary, "context": {"a": ra, "b": rb}}
        return doc

    def to_json(self) -> dict:
        tcp_fields = ["seq", "payload_len"] + (["segs"] if self.segments_compared else [])
        udp_fields = ["payload_len", "ordinal"] + (["segs"] if self.segments_compared else [])
        flows = []
        for f in self.flows:
            flows.append({
                "flow": flow_json(f.flow),
                "label": flow_label(f.flow),
                "kind": f.kind,
                "status": f.status,
                "packets_a": len(f.packets_a),
                "packets_b": len(f.packets_b),
                "payload_bytes_a": sum(p.length for p in f.packets_a),
                "payload_bytes_b": sum(p.length for p in f.packets_b),
                "differing_regions": len(f.regions),
                "first_difference": f.difference_json(f.regions[0]) if f.regions else None,
            })
        return {
            "schema": SCHEMA,
            "identical": self.identical,
            "compared": {"tcp": tcp_fields, "udp": udp_fields, "other": "bytes",
                         "segments": self.segments_compared, "require_order": self.require_order},
            "inputs": {"a": self.a.to_json(), "b": self.b.to_json()},
            "counts": self.counts(),
            "order": self._order_json(),
            "flows": flows,
            "notes": list(self.notes),
        }


def _entry_text(pkt: Packet, with_segs: bool) -> str:
    if pkt.kind == KIND_TCP:
        text = f"seq {pkt.seq} len {pkt.length}"
    elif pkt.kind == KIND_UDP:
        text = f"len {pkt.length}"
    else:
        return f"{pkt.length} bytes sha256 {pkt.digest.hex()[:12]}"
    return text + (f" segs {pkt.segs}" if with_segs else "")


def compare_captures(path_a: str, path_b: str, *, require_order: bool = False,
                     sidecar_a: Optional[str] = None, sidecar_b: Optional[str] = None,
                     auto_sidecar: bool = True) -> CompareResult:
    """Compare two captures as GRO results; InputError when one is unreadable."""
    notes: List[str] = []
    a = read_side(path_a, sidecar_a, auto_sidecar, notes, "A")
    b = read_side(path_b, sidecar_b, auto_sidecar, notes, "B")
    with_segs = a.has_segs and b.has_segs
    if not with_segs:
        missing = [x for x, s in (("A", a), ("B", b)) if not s.has_segs]
        notes.append(f"segments not compared (no per-packet sidecar for {' and '.join(missing)}): "
                     "TCP packets compared by (seq, payload length), UDP by payload length")
    if a.reasons and b.reasons:
        notes.append("flush reasons compared (both sidecars have them)")
    else:
        for side in (a, b):
            for pkts in side.flows.values():
                for p in pkts:
                    p.reason = None
    notes.append("TCP/UDP headers compared as bytes from the network header to the payload; "
                 "timestamps, link headers (MAC addresses), TCP/UDP checksums and Ethernet padding "
                 "are not compared")
    flow_ids: List[FlowId] = list(a.flows)
    flow_ids += [f for f in b.flows if f not in a.flows]
    results: List[FlowResult] = []
    for fid in flow_ids:
        pa, pb = a.flows.get(fid, []), b.flows.get(fid, [])
        kind = fid[0]
        if not pb:
            status, regions = "only_in_a", [Region(0, len(pa), 0, 0, "extra")]
        elif not pa:
            status, regions = "only_in_b", [Region(0, 0, 0, len(pb), "extra")]
        else:
            regions = _diff_flow(pa, pb, kind, with_segs)
            status = "different" if regions else "identical"
        results.append(FlowResult(fid[1], kind, status, pa, pb, regions, with_segs))
    order_pos = _order_difference(a, b, with_segs)
    order_identical = order_pos is None
    identical = all(f.identical for f in results) and (order_identical or not require_order)
    if not require_order and not order_identical and all(f.identical for f in results):
        notes.append("the global order of packets differs (not required; use --order to require it)")
    return CompareResult(identical, a, b, results, require_order, order_identical, order_pos, with_segs, notes)


def _order_difference(a: Side, b: Side, with_segs: bool) -> Optional[int]:
    """First global position where the two captures deliver a different packet."""
    oa, ob = a.order, b.order
    la = [a.flows[f] for f in a.flow_ids]
    lb = [b.flows[f] for f in b.flow_ids]
    b_index = {f: k for k, f in enumerate(b.flow_ids)}
    same = [b_index.get(f, -1) for f in a.flow_ids]
    ca, cb = [0] * len(la), [0] * len(lb)
    for pos in range(min(len(oa), len(ob))):
        ia, ib = oa[pos], ob[pos]
        if same[ia] != ib or la[ia][ca[ia]].key(with_segs) != lb[ib][cb[ib]].key(with_segs):
            return pos
        ca[ia] += 1
        cb[ib] += 1
    if len(oa) != len(ob):
        return min(len(oa), len(ob))
    return None
