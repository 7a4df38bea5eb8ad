"""`grotool replay --verify`: split every delivered packet again (grotool.gso)
and check that the segments reproduce the input frames it covers.

Sans-IO: feed the input frames (``add_input``, in capture order, after any FCS
is stripped) and the deliveries (``check``), then ``finish``.  Input frames are
kept only until the delivery covering them arrives.

A delivered packet covering n frames must split into exactly n segments, the
k-th equal byte for byte to the k-th covered frame, except for the fields GRO
legitimately rewrites (docs/split.md):

- TCP and UDP checksums, the outer UDP checksum of a UDP tunnel and the GRE
  checksum: GRO leaves the pseudo-header seed (or, with ``--l4-csum full``, a
  recomputed sum) where a sender may have left a seed, and GSO writes the full
  checksum;
- the IPv4 ID (and so the header checksum) of a header whose segments all
  carried the first one's ID, where the gso_type cannot say the ID was fixed:
  GSO then numbers the segments from the first ID (inet_gso_segment).  Only
  TCP over IPv4 records fixed IDs (tcp_fixedid, tcp_fixedid_inner); a UDP GSO
  packet, a fraglist packet, and the outer IPv4 header of IPv6 TCP in a sit
  tunnel cannot.

Timestamps are not compared (GRO stamps a super-packet with its first frame's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .gso import NotSegmentable, parse, segment
from .gso.layers import GRE_CSUM, Chain

_FIELDS = {
    "ipv4": ((0, "version/ihl"), (1, "tos"), (2, "tot_len"), (4, "id"), (6, "frag_off"), (8, "ttl"),
             (9, "protocol"), (10, "check"), (12, "saddr"), (16, "daddr"), (20, "options")),
    "ipv6": ((0, "version/tclass/flow_label"), (4, "payload_len"), (6, "nexthdr"), (7, "hop_limit"),
             (8, "saddr"), (24, "daddr"), (40, "extension headers")),
    "tcp": ((0, "source"), (2, "dest"), (4, "seq"), (8, "ack_seq"), (12, "doff"), (13, "flags"),
            (14, "window"), (16, "check"), (18, "urg_ptr"), (20, "options")),
    "udp": ((0, "source"), (2, "dest"), (4, "len"), (6, "check")),
    "udp_tunnel": ((0, "source"), (2, "dest"), (4, "len"), (6, "check")),
    "gre": ((0, "flags"), (2, "protocol"), (4, "checksum/key/seq")),
}


def rewritten_fields(data: bytes, chain: Chain, loose_ids: Sequence[int] = ()) -> List[Tuple[int, int]]:
    """(start, end) byte ranges of the fields GRO may legitimately change;
    loose_ids: offsets of IPv4 headers whose ID GSO may renumber."""
    ranges = []
    for layer in chain.layers:
        o = layer.off
        if layer.kind == "tcp":
            ranges.append((o + 16, o + 18))
        elif layer.kind in ("udp", "udp_tunnel"):
            ranges.append((o + 6, o + 8))
        elif layer.kind == "gre" and (data[o] << 8 | data[o + 1]) & GRE_CSUM:
            ranges.append((o + 4, o + 6))
        elif layer.kind == "ipv4" and o in loose_ids:
            ranges.append((o + 4, o + 6))
            ranges.append((o + 10, o + 12))
    return ranges


def unrecorded_fixed_ids(chain: Chain, gso_type: Sequence[str]) -> List[int]:
    """Offsets of the IPv4 headers whose fixed ID the gso_type cannot record:
    tcp4_gro_complete alone sets SKB_GSO_TCP_FIXEDID(_INNER), and a fraglist
    packet's segments are renumbered whatever the gso_type says."""
    if "tcpv4" in gso_type and "fraglist" not in gso_type:
        return []
    return [layer.off for layer in chain.layers if layer.kind == "ipv4"]


def field_name(chain: Optional[Chain], offset: int) -> str:
    """Which header field byte ``offset`` of a frame falls in."""
    if chain is None:
        return f"byte {offset}"
    for layer in reversed(chain.layers):
        if layer.off <= offset < layer.off + layer.hlen:
            name = layer.kind
            for start, fname in reversed(_FIELDS.get(layer.kind, ())):
                if offset - layer.off >= start:
                    return f"{name}.{fname}"
            return name
    if offset >= chain.payload_off:
        return "payload"
    return f"byte {offset}"


def compare_frames(expected: bytes, got: bytes, linktype: int, loose_ids: Sequence[int] = ()) -> Optional[str]:
    """None when ``got`` reproduces ``expected`` up to the legitimately
    rewritten fields; else a short description of the first difference.
    loose_ids: offsets of IPv4 headers whose ID (and header checksum) may differ."""
    if expected == got:
        return None
    try:
        chain = parse(expected, linktype)
    except NotSegmentable:
        chain = None
    if len(expected) != len(got):
        return f"length {len(got)} after split, {len(expected)} in the input"
    a = bytearray(expected)
    b = bytearray(got)
    if chain is not None:
        for start, end in rewritten_fields(expected, chain, loose_ids):
            a[start:end] = b[start:end] = bytes(end - start)
    if a == b:
        return None
    at = next(i for i in range(len(a)) if a[i] != b[i])
    return (f"{field_name(chain, at)} differs (byte {at}: 0x{expected[at]:02x} in the input, "
            f"0x{got[at]:02x} after split)")


@dataclass
class VerifyResult:
    ok: bool
    frames: int                  # input frames seen
    packets: int                 # deliveries checked
    super_packets: int           # of which split (2+ segments)
    first_bad_frame: Optional[int] = None   # 1-based input frame number
    message: str = ""

    def as_dict(self) -> dict:
        return {"ok": self.ok, "frames": self.frames, "packets": self.packets,
                "super_packets": self.super_packets, "first_bad_frame": self.first_bad_frame,
                "message": self.message}


class Verifier:
    def __init__(self, linktype: int):
        self.linktype = linktype
        self._pending: Dict[int, bytes] = {}
        self._next = 0
        self.packets = 0
        self.super_packets = 0
        self._bad: Optional[Tuple[int, str]] = None

    def add_input(self, data: bytes) -> None:
        """The next input frame, as the engine was fed it."""
        self._pending[self._next] = data
        self._next += 1

    def _fail(self, index: int, message: str) -> None:
        if self._bad is None or index < self._bad[0]:
            self._bad = (index, message)

    def check(self, delivery) -> None:
        """Split one delivered packet and compare it with the frames it covers."""
        self.packets += 1
        indices = delivery.indices
        expected = []
        for index in indices:
            frame = self._pending.pop(index, None)
            if frame is None:
                self._fail(index, "covered by more than one delivered packet, or never read")
                return
            expected.append(frame)
        if len(indices) > 1:
            self.super_packets += 1
            types = tuple(delivery.gso_type)
            try:
                segments = segment(delivery.data, self.linktype, delivery.gso_size, types)
            except NotSegmentable as exc:
                self._fail(indices[0], f"its super-packet cannot be split: {exc}")
                return
        else:
            types = ()
            segments = [delivery.data]
        if len(segments) != len(expected):
            self._fail(indices[0], f"its super-packet splits into {len(segments)} segments, "
                                   f"but covers {len(expected)} input frames")
            return
        loose: List[int] = []
        if len(expected) > 1:
            try:
                loose = unrecorded_fixed_ids(parse(expected[0], self.linktype), types)
            except NotSegmentable:
                pass
        first = expected[0]
        for index, want, got in zip(indices, expected, segments):
            # an unrecordable ID may differ only where the input kept the first one's
            fixed = [o for o in loose if want[o + 4:o + 6] == first[o + 4:o + 6]]
            problem = compare_frames(want, got, self.linktype, fixed)
            if problem is not None:
                self._fail(index, problem)
                return

    def finish(self) -> VerifyResult:
        if self._pending:
            self._fail(min(self._pending), "not covered by any delivered packet")
        result = VerifyResult(self._bad is None, self._next, self.packets, self.super_packets)
        if self._bad is not None:
            index, message = self._bad
            result.first_bad_frame = index + 1
            result.message = f"input frame {index + 1}: {message}"
        return result
