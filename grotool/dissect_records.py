"""The records dissect() returns: a Dissection of the whole frame, a Layer per
header, a Checksum per checksum field (grotool.dissect makes them; they are
its attributes too).  A module of their own, imported on first use: naming
flows (a replay) needs none of them."""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Tuple

from .dissect import Tunnel, addr_text


class Layer(NamedTuple):
    """One header: its name, where it starts, how long it is, and its fields
    (``layer["ttl"]`` or ``layer.get("ttl")`` by name)."""

    name: str               # eth, vlan, sll, sll2, null, loop, ipv4, ipv6, ipv6-hbh, ..., gre, udp, vxlan, geneve, tcp
    offset: int
    length: int             # header bytes (as declared; may run past a truncated capture)
    fields: Tuple[Tuple[str, Any], ...] = ()

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.fields:
            if key == name:
                return value
        return default

    def __getitem__(self, name):
        if not isinstance(name, str):
            return tuple.__getitem__(self, name)    # positional access stays a tuple's
        for key, value in self.fields:
            if key == name:
                return value
        raise KeyError(name)

    def as_dict(self) -> Dict[str, Any]:
        return dict(self.fields)


class Checksum(NamedTuple):
    """A checksum field: ``kind`` ipv4 (header), tcp, udp or gre; the field is at
    ``at``; it covers [start, end) (end as the headers declare it) plus, for
    tcp/udp, the pseudo-header of ``family``/``src``/``dst``/``proto``."""

    kind: str
    at: int
    start: int
    end: int
    hlen: int               # header bytes the covered range must at least hold
    family: int = 0
    src: bytes = b""
    dst: bytes = b""
    proto: int = 0


class Dissection(NamedTuple):
    """What dissect() found (a named tuple: immutable and cheap to build)."""

    linktype: int
    caplen: int                              # captured bytes
    frame_len: int                           # max(wire length, captured bytes)
    layers: Tuple[Layer, ...]
    problem: Optional[str]                   # why parsing stopped early; None for a clean frame
    vlans: Tuple[int, ...] = ()              # link-layer VLAN IDs, outermost first
    ethertype: Optional[int] = None          # of the innermost link-level payload
    tunnels: Tuple[Tunnel, ...] = ()         # outermost first
    # innermost IP header
    family: Optional[int] = None             # 4 or 6
    l3: Optional[int] = None
    src: Optional[bytes] = None
    dst: Optional[bytes] = None
    ip_proto: Optional[int] = None           # after IPv6 extension headers
    fragment: bool = False                   # a fragment (offset or MF set): its transport is not parsed
    frag_header: bool = False                # an IPv6 Fragment header is present (even an atomic one)
    l3_end: Optional[int] = None             # end of the IP packet as its header says
    l3_ok: bool = False                      # header complete and its length consistent with the frame
    # innermost transport
    l4: Optional[int] = None
    l4_proto: Optional[int] = None           # 6 or 17 when the whole fixed header was captured
    sport: Optional[int] = None              # ports as soon as 4 bytes of TCP/UDP were captured
    dport: Optional[int] = None
    payload_off: Optional[int] = None        # first L4 payload byte
    payload_len: int = 0                     # L4 payload bytes as the IP header declares them
    check_at: Optional[int] = None           # the innermost TCP/UDP checksum field
    seq: Optional[int] = None                # TCP
    ack: Optional[int] = None
    tcp_flags: int = 0                       # TCP header byte 13 (CWR ECE URG ACK PSH RST SYN FIN)
    window: Optional[int] = None
    checksums: Tuple[Checksum, ...] = ()     # outermost first

    @property
    def five_tuple(self) -> Optional[tuple]:
        """(ip proto, src, dst, sport, dport) of the innermost packet, addresses as text."""
        if self.src is None:
            return None
        return (self.ip_proto, addr_text(self.src), addr_text(self.dst), self.sport, self.dport)

    @property
    def outer(self) -> Optional[Tunnel]:
        """The outermost tunnel (the one GRO looks through), or None."""
        return self.tunnels[0] if self.tunnels else None

    def layer(self, name: str) -> Optional[Layer]:
        """The innermost layer called ``name``."""
        for lay in reversed(self.layers):
            if lay.name == name:
                return lay
        return None
