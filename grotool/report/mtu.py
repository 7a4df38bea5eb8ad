"""The link MTU a capture implies, and which of its frames are longer than it
(replay's warning and ``frames_over_mtu``, split's super-packets without a
sidecar).  The rule (docs/mtu.md):

* A frame is measured by its *packet*: the innermost IP packet, from its IP
  header to the end of the frame.  Tunnel headers (VXLAN, GENEVE, GRE,
  IP-in-IP, with their outer IP, UDP and inner Ethernet headers) and VLAN tags
  are counted off: an encapsulating host sizes the overlay so that the inner
  packet fits, and the underlay carries the extra bytes.  A 1,564-byte VXLAN
  frame on a jumbo underlay holds a 1,500-byte packet.
* The MTU the capture implies is the largest packet length L, above the
  floor (``--mtu``, default 1500) and at most MAX_LINK_MTU, that at least
  MIN_COMMON_FRAMES frames have exactly and that no fewer frames have than
  are longer than L, nor than are shorter (above the floor): full-size
  frames pile up at a link's MTU, while the super-packets of TSO or GRO
  spread over many lengths or exceed any MTU.
  Without such an L it is the floor.  ``--mtu`` given explicitly is the MTU,
  nothing is inferred.
* A frame whose packet is longer than that MTU is not what a NIC receives:
  it was captured on a host with TSO or GRO (replay warns; split re-segments).

Only frames longer than the floor are looked at (their headers walked once),
so a capture within the floor costs nothing more.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Tuple

from ..dissect import walk_frame

DEFAULT_MTU = 1500
# the largest link MTU a capture is taken to imply: the jumbo frames of common
# NICs and switches (9000 to 9216 bytes); a longer packet is a super-packet
MAX_LINK_MTU = 9216
MIN_COMMON_FRAMES = 2
# UDP ports whose tunnel headers are counted off when measuring a packet:
# VXLAN's IANA port and Linux's old default (flannel), GENEVE's
MEASURED_VXLAN_PORTS = frozenset({4789, 8472})
MEASURED_GENEVE_PORTS = frozenset({6081})
_DISTINCT_LENGTHS = 1 << 16              # bound on the lengths tallied (memory)


def packet_offset(linktype: int, data: bytes, vxlan, geneve) -> Optional[int]:
    """Offset of the innermost IP header of a frame, or None when it has none."""
    return walk_frame(data, linktype, len(data), vxlan, geneve, False).l3


class MtuCensus:
    """Tallies the packet lengths of frames longer than ``floor`` and gives the
    MTU they imply (``implied``) and the frames over it (``over``)."""

    def __init__(self, floor: int = DEFAULT_MTU, *, fixed: bool = False, vxlan_ports: Iterable[int] = (),
                 geneve_ports: Iterable[int] = ()):
        self.floor = floor
        self.fixed = fixed                   # --mtu given: it is the MTU
        geneve = MEASURED_GENEVE_PORTS | frozenset(geneve_ports)
        self.geneve = geneve
        self.vxlan = (MEASURED_VXLAN_PORTS | frozenset(vxlan_ports)) - geneve
        # packet length -> [frames, first record number, its wire length]
        self.lengths: Dict[int, List[int]] = {}

    def packet_length(self, linktype: int, data: bytes, wirelen: int, l3_length: int) -> int:
        """The frame's packet length: from its innermost IP header to the end of
        the frame on the wire; ``l3_length`` (after the link header and VLAN
        tags) when it has no IP header grotool can find."""
        at = packet_offset(linktype, data, self.vxlan, self.geneve)
        return l3_length if at is None else wirelen - at

    def add(self, linktype: int, data: bytes, wirelen: int, l3_length: int, record: int) -> int:
        """Count one frame whose L3 length (``l3_length``) exceeds the floor; its packet length."""
        length = self.packet_length(linktype, data, wirelen, l3_length)
        if length > self.floor:
            entry = self.lengths.get(length)
            if entry is not None:
                entry[0] += 1
            elif len(self.lengths) < _DISTINCT_LENGTHS:
                self.lengths[length] = [1, record, wirelen]
        return length

    @property
    def implied(self) -> int:
        """The link MTU (see the module docstring)."""
        if self.fixed:
            return self.floor
        total = sum(entry[0] for entry in self.lengths.values())
        longer = 0
        for length in sorted(self.lengths, reverse=True):
            count = self.lengths[length][0]
            shorter = total - longer - count
            if length <= MAX_LINK_MTU and count >= MIN_COMMON_FRAMES and count >= longer and count >= shorter:
                return length
            longer += count
        return self.floor

    def over(self, mtu: Optional[int] = None) -> Tuple[int, Optional[Tuple[int, int]]]:
        """(frames whose packet is longer than ``mtu`` (default: the implied
        MTU), (record number, wire length) of the first of them or None)."""
        limit = self.implied if mtu is None else mtu
        count = 0
        first: Optional[Tuple[int, int]] = None
        for length, (n, record, wirelen) in self.lengths.items():
            if length > limit:
                count += n
                if first is None or record < first[0]:
                    first = (record, wirelen)
        return count, first
