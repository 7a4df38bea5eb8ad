"""One header dissector for everything outside the engine's hot path.

``dissect(data, linktype)`` walks a captured frame from the link layer to the
innermost transport header and returns a small immutable ``Dissection``:
every layer with its offset, header length and fields; the link-layer VLAN
tags; each tunnel crossed (outer addresses, kind, GRE key or VNI, outer UDP
ports); the innermost IP header and 5-tuple; the L4 payload offset and length;
and the offsets of every checksum field.  The statistics (report/flows.py),
``grotool compare`` and the kernel oracle (oracle/frames.py) all name and
measure packets with it.  The GRO engine (grotool/engine/) keeps its own
per-layer parsing, written for speed.

What it understands:

* link: Ethernet (802.1Q / 802.1ad / 0x9100 tags), Linux SLL and SLL2, raw
  IPv4/IPv6 (grotool/linktypes.py);
* IPv4 (options, fragments), IPv6 with Hop-by-Hop, Routing, Fragment and
  Destination Options headers (a Jumbo Payload option gives the length);
* tunnels: IP-in-IP (ipip, sit, ip4ip6, ip6ip6), GRE over IPv4/IPv6 (C/K/S
  flags, key, IP or transparent Ethernet bridging payload), VXLAN and GENEVE
  on configurable UDP destination ports (4789 and 6081 by default);
* TCP (ports, seq, ack, flags, window, options) and UDP (ports, length,
  checksum).

GRO itself handles one tunnel level; the dissector follows nested tunnels up
to ``MAX_IP_HEADERS`` IP headers.  A fragment is never looked into.

It never raises on frame contents: a truncated or damaged frame gives what
was parsed up to the damage, with ``problem`` saying what stopped it.
"""

from __future__ import annotations

import ipaddress
from struct import unpack_from
from typing import Any, Dict, FrozenSet, Iterable, NamedTuple, Optional, Tuple

from .linktypes import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, RAW_LINKTYPES

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_TEB = 0x6558                      # transparent Ethernet bridging (GRE, GENEVE)
VLAN_TPIDS = (0x8100, 0x88A8, 0x9100)   # 802.1Q, 802.1ad, the older QinQ tag
IPPROTO_IPIP = 4
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPPROTO_GRE = 47
IPV6_EXT_NAMES = {0: "ipv6-hbh", 43: "ipv6-route", 44: "ipv6-frag", 60: "ipv6-dstopts"}

DEFAULT_VXLAN_PORTS: FrozenSet[int] = frozenset({4789})
DEFAULT_GENEVE_PORTS: FrozenSet[int] = frozenset({6081})

MAX_VLAN_TAGS = 8
MAX_IPV6_EXT_HEADERS = 16
MAX_IP_HEADERS = 8                      # tunnels nest at most this deep before we stop
MAX_TCP_OPTIONS = 40

# IP-in-IP tunnel names by (outer family, inner protocol), as Linux names the devices
_IPIP_KIND = {(4, IPPROTO_IPIP): "ipip", (4, IPPROTO_IPV6): "sit",
              (6, IPPROTO_IPIP): "ip4ip6", (6, IPPROTO_IPV6): "ip6ip6"}


class Layer(NamedTuple):
    """One header: its name, where it starts, how long it is, and its fields
    (``layer["ttl"]`` or ``layer.get("ttl")`` by name)."""

    name: str               # eth, vlan, sll, sll2, ipv4, ipv6, ipv6-hbh, ..., gre, udp, vxlan, geneve, tcp
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


class Tunnel(NamedTuple):
    """One encapsulation level, named by its outer identity."""

    kind: str               # ipip sit ip4ip6 ip6ip6 gre gretap ip6gre ip6gretap vxlan geneve
    family: int             # of the outer IP header
    src: bytes              # outer addresses
    dst: bytes
    ip_proto: int           # the outer header's protocol: 4, 41, 47 or 17
    key: Optional[int]      # GRE key (K flag) or VXLAN/GENEVE VNI
    sport: Optional[int]    # outer UDP ports of a UDP tunnel
    dport: Optional[int]
    vlans: Tuple[int, ...]  # VLAN tags of the inner Ethernet header, outermost first
    outer_l3: int           # offset of the outer IP header
    inner: int              # offset of the encapsulated packet (Ethernet or IP header)

    def identity(self) -> tuple:
        """(kind, outer src, outer dst, key, sport, dport, inner vlans), addresses as text."""
        return (self.kind, addr_text(self.src), addr_text(self.dst), self.key, self.sport, self.dport, self.vlans)


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


_ADDR_CACHE: Dict[bytes, str] = {}


def addr_text(raw: bytes) -> str:
    """An IPv4 or IPv6 address as text (cached: captures repeat few addresses)."""
    text = _ADDR_CACHE.get(raw)
    if text is None:
        if len(raw) == 4:
            text = "%d.%d.%d.%d" % (raw[0], raw[1], raw[2], raw[3])
        else:
            text = str(ipaddress.IPv6Address(bytes(raw)))
        if len(_ADDR_CACHE) < 100_000:
            _ADDR_CACHE[raw] = text
    return text


def tcp_options(raw: bytes) -> Tuple[Tuple[int, bytes], ...]:
    """TCP options as (kind, value) pairs; stops at End of Option List or at a damaged option."""
    out = []
    pos = 0
    while pos < len(raw) and len(out) < MAX_TCP_OPTIONS:
        kind = raw[pos]
        if kind == 0:
            break
        if kind == 1:
            out.append((1, b""))
            pos += 1
            continue
        if pos + 1 >= len(raw) or raw[pos + 1] < 2 or pos + raw[pos + 1] > len(raw):
            break
        out.append((kind, bytes(raw[pos + 2:pos + raw[pos + 1]])))
        pos += raw[pos + 1]
    return tuple(out)


class _Walk:
    """Mutable state of one dissection, frozen into a Dissection at the end."""

    __slots__ = ("data", "n", "frame_len", "layers", "problem", "vals", "tunnels", "checksums")

    def __init__(self, data, frame_len: int):
        self.data = data
        self.n = len(data)
        self.frame_len = frame_len
        self.layers = []
        self.problem: Optional[str] = None
        self.vals: Dict[str, Any] = {}
        self.tunnels = []
        self.checksums = []

    def fail(self, text: str) -> None:
        if self.problem is None:
            self.problem = text

    def need(self, off: int, size: int, what: str) -> bool:
        if self.n >= off + size:
            return True
        self.fail(f"truncated {what} header ({max(0, self.n - off)} of {size} bytes captured)")
        return False


def dissect(data, linktype: int = LINKTYPE_ETHERNET, *, wirelen: Optional[int] = None,
            vxlan_ports: Iterable[int] = DEFAULT_VXLAN_PORTS,
            geneve_ports: Iterable[int] = DEFAULT_GENEVE_PORTS) -> Dissection:
    """Dissect one captured frame of ``linktype`` (a LINKTYPE_ value).

    ``wirelen``: the frame's length on the wire, when the capture was cut
    short by a snap length (IP lengths are checked against it).  UDP to a
    destination port in ``vxlan_ports`` / ``geneve_ports`` is looked into as
    VXLAN / GENEVE; pass empty sets to treat it as plain UDP.
    """
    data = bytes(data) if not isinstance(data, (bytes, bytearray, memoryview)) else data
    frame_len = max(wirelen or 0, len(data))
    walk = _Walk(data, frame_len)
    vxlan = vxlan_ports if isinstance(vxlan_ports, (set, frozenset)) else frozenset(vxlan_ports)
    geneve = geneve_ports if isinstance(geneve_ports, (set, frozenset)) else frozenset(geneve_ports)
    linktype = LINKTYPE_ETHERNET if linktype is None else linktype
    off, etype, vlans = _link(walk, linktype)
    walk.vals["vlans"] = vlans
    walk.vals["ethertype"] = etype
    if off is not None:
        _network(walk, off, etype, frame_len, vxlan, geneve)
    return Dissection(linktype, len(data), frame_len, tuple(walk.layers), walk.problem,
                      tunnels=tuple(walk.tunnels), checksums=tuple(walk.checksums), **walk.vals)


# -----------------------------------------------------------------------------
# link layer
# -----------------------------------------------------------------------------
def _link(walk: _Walk, linktype: int):
    """(offset of the link payload or None, its ethertype, link VLAN IDs)."""
    data, n = walk.data, walk.n
    if linktype == LINKTYPE_ETHERNET:
        if not walk.need(0, 14, "Ethernet"):
            return None, None, ()
        etype = (data[12] << 8) | data[13]
        walk.layers.append(Layer("eth", 0, 14, (("dst", bytes(data[0:6])), ("src", bytes(data[6:12])),
                                                ("ethertype", etype))))
        return _vlan_tags(walk, 14, etype)
    if linktype == LINKTYPE_LINUX_SLL:
        if not walk.need(0, 16, "Linux SLL"):
            return None, None, ()
        pkttype, hatype, alen = unpack_from("!HHH", data, 0)
        etype = (data[14] << 8) | data[15]
        walk.layers.append(Layer("sll", 0, 16, (("pkttype", pkttype), ("hatype", hatype),
                                                ("addr", bytes(data[6:6 + min(alen, 8)])), ("protocol", etype))))
        return _vlan_tags(walk, 16, etype)
    if linktype == LINKTYPE_LINUX_SLL2:
        if not walk.need(0, 20, "Linux SLL2"):
            return None, None, ()
        etype, _reserved, ifindex, hatype = unpack_from("!HHIH", data, 0)
        alen = data[11]
        walk.layers.append(Layer("sll2", 0, 20, (("protocol", etype), ("ifindex", ifindex), ("hatype", hatype),
                                                 ("pkttype", data[10]), ("addr", bytes(data[12:12 + min(alen, 8)])))))
        return _vlan_tags(walk, 20, etype)
    if linktype in RAW_LINKTYPES:
        if not n:
            walk.fail("empty raw IP record")
            return None, None, ()
        version = data[0] >> 4
        if version == 4:
            return 0, ETH_P_IP, ()
        if version == 6:
            return 0, ETH_P_IPV6, ()
        walk.fail(f"raw IP record with IP version {version}")
        return None, 0, ()
    walk.fail(f"unsupported link type {linktype}")
    return None, None, ()


def _vlan_tags(walk: _Walk, off: int, etype: int):
    """Skip 802.1Q/802.1ad tags: (payload offset, ethertype, VLAN IDs)."""
    data = walk.data
    vlans = []
    while etype in VLAN_TPIDS:
        if len(vlans) >= MAX_VLAN_TAGS:
            walk.fail(f"more than {MAX_VLAN_TAGS} VLAN tags")
            return off, etype, tuple(vlans)
        if not walk.need(off, 4, "VLAN tag"):
            return off, etype, tuple(vlans)
        tci = (data[off] << 8) | data[off + 1]
        inner = (data[off + 2] << 8) | data[off + 3]
        walk.layers.append(Layer("vlan", off, 4, (("tpid", etype), ("pcp", tci >> 13), ("dei", (tci >> 12) & 1),
                                                  ("vid", tci & 0x0FFF), ("ethertype", inner))))
        vlans.append(tci & 0x0FFF)
        etype = inner
        off += 4
    return off, etype, tuple(vlans)


# -----------------------------------------------------------------------------
# network layer and tunnels
# -----------------------------------------------------------------------------
def _ip_header(walk: _Walk, off: int, etype: int, limit: int):
    """Parse the IP header at off.  (family, proto, l4 offset, declared end,
    src, dst, fragment, IPv6 fragment header, consistent) or None when there is
    no usable header."""
    data, n = walk.data, walk.n
    if etype == ETH_P_IP:
        if not walk.need(off, 20, "IPv4"):
            return None
        if data[off] >> 4 != 4:
            walk.fail(f"IPv4 ethertype but IP version {data[off] >> 4}")
            return None
        ihl = (data[off] & 0x0F) * 4
        tos, tot, ident, frag, ttl, proto, check = unpack_from("!BHHHBBH", data, off + 1)
        src, dst = bytes(data[off + 12:off + 16]), bytes(data[off + 16:off + 20])
        fields = (("ihl", ihl), ("tos", tos), ("total_length", tot), ("id", ident), ("df", bool(frag & 0x4000)),
                  ("mf", bool(frag & 0x2000)), ("frag_offset", (frag & 0x1FFF) * 8), ("ttl", ttl),
                  ("proto", proto), ("checksum", check), ("src", src), ("dst", dst),
                  ("options", bytes(data[off + 20:off + max(20, ihl)])))
        walk.layers.append(Layer("ipv4", off, ihl, fields))
        if ihl < 20:
            walk.fail(f"IPv4 header length {ihl} < 20")
            return None
        if not walk.need(off, ihl, "IPv4 (with options)"):
            return None
        walk.checksums.append(Checksum("ipv4", off + 10, off, off + ihl, ihl))
        if tot == 0:
            end, ok = limit, True                   # IPv4 BIG TCP: the length is the frame's
        else:
            end = off + tot
            ok = tot >= ihl and end <= limit
            if not ok:
                walk.fail(f"IPv4 total length {tot} does not fit " +
                          ("its header" if tot < ihl else f"the {limit - off} bytes available"))
        return 4, proto, off + ihl, end, src, dst, bool(frag & 0x3FFF), False, ok
    if etype == ETH_P_IPV6:
        if not walk.need(off, 40, "IPv6"):
            return None
        if data[off] >> 4 != 6:
            walk.fail(f"IPv6 ethertype but IP version {data[off] >> 4}")
            return None
        first, plen, proto, hop = unpack_from("!IHBB", data, off)
        src, dst = bytes(data[off + 8:off + 24]), bytes(data[off + 24:off + 40])
        walk.layers.append(Layer("ipv6", off, 40, (("tc", (first >> 20) & 0xFF), ("flow_label", first & 0xFFFFF),
                                                   ("payload_length", plen), ("next_header", proto),
                                                   ("hop_limit", hop), ("src", src), ("dst", dst))))
        end = off + 40 + plen if plen else None
        l4 = off + 40
        fragment = frag_header = False
        complete = True
        count = 0
        while proto in IPV6_EXT_NAMES:
            count += 1
            if count > MAX_IPV6_EXT_HEADERS:
                walk.fail(f"more than {MAX_IPV6_EXT_HEADERS} IPv6 extension headers")
                complete = False
                break
            name = IPV6_EXT_NAMES[proto]
            if not walk.need(l4, 8, name):
                complete = False
                break
            nxt = data[l4]
            if proto == 44:
                word = (data[l4 + 2] << 8) | data[l4 + 3]
                ident = unpack_from("!I", data, l4 + 4)[0]
                hlen = 8
                fields = (("next_header", nxt), ("frag_offset", word & 0xFFF8), ("mf", bool(word & 1)), ("id", ident))
                fragment = fragment or bool(word & 0xFFF9)
                frag_header = True
            else:
                hlen = (data[l4 + 1] + 1) * 8
                fields = (("next_header", nxt), ("length", hlen))
                if proto == 43:
                    fields += (("routing_type", data[l4 + 2]), ("segments_left", data[l4 + 3]))
                elif proto == 0 and plen == 0:
                    jumbo = _jumbo_length(data, l4, hlen)
                    if jumbo is not None:
                        end = off + 40 + jumbo
                        fields += (("jumbo_length", jumbo),)
            walk.layers.append(Layer(name, l4, hlen, fields))
            proto, l4 = nxt, l4 + hlen
            if fragment:
                break
        if end is None:
            end = limit                             # no payload length and no jumbo option: the frame's
        ok = complete and l4 <= end <= limit
        if complete and not ok:
            walk.fail(f"IPv6 payload length {end - off - 40} does not fit "
                      + ("its extension headers" if l4 > end else f"the {limit - off - 40} bytes available"))
        return 6, proto, l4, end, src, dst, fragment, frag_header, ok and complete
    return None


def _jumbo_length(data, start: int, hlen: int) -> Optional[int]:
    """The Jumbo Payload option's length in the Hop-by-Hop header at start, if any."""
    pos, stop = start + 2, min(start + hlen, len(data))
    while pos + 2 <= stop:
        otype = data[pos]
        if otype == 0:                              # Pad1
            pos += 1
            continue
        olen = data[pos + 1]
        if otype == 0xC2 and olen == 4 and pos + 6 <= len(data):
            return unpack_from("!I", data, pos + 2)[0]
        pos += 2 + olen
    return None


def _network(walk: _Walk, off: int, etype: int, limit: int, vxlan, geneve) -> None:
    """IP headers, tunnels and the transport from off (a link payload of etype)."""
    vals = walk.vals
    for _depth in range(MAX_IP_HEADERS):
        if etype not in (ETH_P_IP, ETH_P_IPV6):
            return                                  # not IP: named by its ethertype
        ip = _ip_header(walk, off, etype, min(limit, walk.frame_len))
        if ip is None:
            return
        family, proto, l4, end, src, dst, fragment, frag_header, ok = ip
        vals.update(family=family, l3=off, src=src, dst=dst, ip_proto=proto, fragment=fragment,
                    frag_header=frag_header, l3_end=end,
                    l3_ok=ok, l4=l4, l4_proto=None, sport=None, dport=None, payload_off=None, payload_len=0,
                    check_at=None, seq=None, ack=None, tcp_flags=0, window=None)
        if fragment:
            return                                  # no transport header to speak of
        if proto in (IPPROTO_IPIP, IPPROTO_IPV6):
            inner_etype = ETH_P_IP if proto == IPPROTO_IPIP else ETH_P_IPV6
            if not _inner_ip_present(walk, l4, inner_etype, "inner IP"):
                return
            walk.tunnels.append(Tunnel(_IPIP_KIND[(family, proto)], family, src, dst, proto, None, None, None, (),
                                       off, l4))
            vals["ethertype"] = inner_etype
            off, etype, limit = l4, inner_etype, end
            continue
        if proto == IPPROTO_GRE:
            nxt = _gre(walk, off, family, src, dst, l4, end)
            if nxt is None:
                return
            off, etype, limit = nxt
            continue
        if proto == IPPROTO_TCP:
            _tcp(walk, l4, end, family, src, dst)
            return
        if proto == IPPROTO_UDP:
            if not _udp(walk, l4, end, family, src, dst):
                return
            dport = vals["dport"]
            if dport in vxlan:
                nxt = _vxlan(walk, off, family, src, dst, l4, end)
            elif dport in geneve:
                nxt = _geneve(walk, off, family, src, dst, l4, end)
            else:
                return
            if nxt is None:
                return
            off, etype, limit = nxt
            continue
        return
    walk.fail(f"more than {MAX_IP_HEADERS} nested IP headers")


_NO_INNER = dict(family=None, l3=None, src=None, dst=None, ip_proto=None, fragment=False, frag_header=False,
                 l3_end=None, l3_ok=False,
                 l4=None, l4_proto=None, sport=None, dport=None, payload_off=None, payload_len=0, check_at=None,
                 seq=None, ack=None, tcp_flags=0, window=None)


def _inner_ip_present(walk: _Walk, off: int, etype: int, what: str) -> bool:
    """Whether a complete IP header of the right version starts at off (else a problem)."""
    data = walk.data
    need = 20 if etype == ETH_P_IP else 40
    if not walk.need(off, need, what):
        return False
    version = data[off] >> 4
    if version != (4 if etype == ETH_P_IP else 6):
        walk.fail(f"{what} header with IP version {version}")
        return False
    return True


def _inner_ethernet(walk: _Walk, off: int):
    """(payload offset, ethertype, VLAN IDs) of an encapsulated Ethernet header, or None."""
    data = walk.data
    if not walk.need(off, 14, "inner Ethernet"):
        return None
    etype = (data[off + 12] << 8) | data[off + 13]
    walk.layers.append(Layer("eth", off, 14, (("dst", bytes(data[off:off + 6])), ("src", bytes(data[off + 6:off + 12])),
                                              ("ethertype", etype))))
    return _vlan_tags(walk, off + 14, etype)


def _enter(walk: _Walk, kind: str, family: int, src: bytes, dst: bytes, ip_proto: int, key, sport, dport,
           outer_l3: int, inner: int, etype_inner: int, ethernet: bool, end: int):
    """Step into an encapsulated packet at ``inner``: (offset, ethertype, limit) or None."""
    vlans: Tuple[int, ...] = ()
    off, etype = inner, etype_inner
    if ethernet:
        eth = _inner_ethernet(walk, inner)
        if eth is None:
            return None
        off, etype, vlans = eth
    elif not _inner_ip_present(walk, inner, etype_inner, f"{kind} inner IP"):
        return None
    walk.tunnels.append(Tunnel(kind, family, src, dst, ip_proto, key, sport, dport, vlans, outer_l3, inner))
    walk.vals.update(_NO_INNER, ethertype=etype)    # the innermost packet is now the encapsulated one
    return off, etype, end


def _gre(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, off: int, end: int):
    """The GRE header at off (RFC 2784/2890; version 1 of RFC 2637 for its length)."""
    data = walk.data
    if not walk.need(off, 4, "GRE"):
        return None
    flags, proto = unpack_from("!HH", data, off)
    version = flags & 0x7
    csum_flag, routing, key_flag, seq_flag = flags & 0x8000, flags & 0x4000, flags & 0x2000, flags & 0x1000
    if version == 0:
        hlen = 4 + 4 * bool(csum_flag or routing) + 4 * bool(key_flag) + 4 * bool(seq_flag)
    elif version == 1:                              # PPTP's enhanced GRE: key is length + call ID
        hlen = 8 + 4 * bool(seq_flag) + 4 * bool(flags & 0x0080)
    else:
        walk.layers.append(Layer("gre", off, 4, (("flags", flags), ("version", version), ("protocol", proto))))
        walk.fail(f"GRE version {version}")
        return None
    fields = [("flags", flags), ("version", version), ("protocol", proto), ("checksum_present", bool(csum_flag)),
              ("key_present", bool(key_flag)), ("seq_present", bool(seq_flag)), ("routing_present", bool(routing))]
    key = None
    if walk.n >= off + hlen:
        pos = off + 4
        if (csum_flag or routing) and version == 0:
            fields.append(("checksum", (data[pos] << 8) | data[pos + 1]))
            pos += 4
        if key_flag or version == 1:
            key = unpack_from("!I", data, pos)[0]
            if version == 1:
                key &= 0xFFFF                       # the call ID
            fields.append(("key", key))
            pos += 4
        if seq_flag:
            fields.append(("seq", unpack_from("!I", data, pos)[0]))
    walk.layers.append(Layer("gre", off, hlen, tuple(fields)))
    if not walk.need(off, hlen, "GRE"):
        return None
    if csum_flag and not routing and version == 0:
        walk.checksums.append(Checksum("gre", off + 4, off, end, hlen))
    if routing or version != 0:
        return None                                 # source routing / PPP payloads are not looked into
    if proto == ETH_P_TEB:
        kind = "gretap" if family == 4 else "ip6gretap"
        return _enter(walk, kind, family, src, dst, IPPROTO_GRE, key, None, None, outer_l3, off + hlen, 0, True, end)
    if proto in (ETH_P_IP, ETH_P_IPV6):
        kind = "gre" if family == 4 else "ip6gre"
        return _enter(walk, kind, family, src, dst, IPPROTO_GRE, key, None, None, outer_l3, off + hlen, proto,
                      False, end)
    return None


def _vxlan(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, l4: int, end: int):
    """VXLAN (RFC 7348) after the UDP header at l4: an Ethernet frame follows."""
    data = walk.data
    off = l4 + 8
    if not walk.need(off, 8, "VXLAN"):
        return None
    flags = data[off]
    vni = (data[off + 4] << 16) | (data[off + 5] << 8) | data[off + 6]
    walk.layers.append(Layer("vxlan", off, 8, (("flags", flags), ("vni", vni))))
    if not flags & 0x08:
        return None                                 # no I flag: not a VXLAN frame we can name
    return _enter(walk, "vxlan", family, src, dst, IPPROTO_UDP, vni, walk.vals["sport"], walk.vals["dport"],
                  outer_l3, off + 8, 0, True, end)


def _geneve(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, l4: int, end: int):
    """GENEVE (RFC 8926) after the UDP header at l4, options included."""
    data = walk.data
    off = l4 + 8
    if not walk.need(off, 8, "GENEVE"):
        return None
    version, optlen = data[off] >> 6, (data[off] & 0x3F) * 4
    oam, critical = bool(data[off + 1] & 0x80), bool(data[off + 1] & 0x40)
    proto = (data[off + 2] << 8) | data[off + 3]
    vni = (data[off + 4] << 16) | (data[off + 5] << 8) | data[off + 6]
    hlen = 8 + optlen
    options = _geneve_options(data, off + 8, min(off + hlen, walk.n))
    walk.layers.append(Layer("geneve", off, hlen, (("version", version), ("opt_len", optlen), ("oam", oam),
                                                   ("critical", critical), ("protocol", proto), ("vni", vni),
                                                   ("options", options))))
    if version != 0:
        return None
    if not walk.need(off, hlen, "GENEVE (with options)"):
        return None
    if proto == ETH_P_TEB:
        return _enter(walk, "geneve", family, src, dst, IPPROTO_UDP, vni, walk.vals["sport"], walk.vals["dport"],
                      outer_l3, off + hlen, 0, True, end)
    if proto in (ETH_P_IP, ETH_P_IPV6):
        return _enter(walk, "geneve", family, src, dst, IPPROTO_UDP, vni, walk.vals["sport"], walk.vals["dport"],
                      outer_l3, off + hlen, proto, False, end)
    return None


def _geneve_options(data, pos: int, stop: int) -> Tuple[Tuple[int, int, bytes], ...]:
    """(class, type, data) of each GENEVE option between pos and stop."""
    out = []
    while pos + 4 <= stop and len(out) < 64:
        cls = (data[pos] << 8) | data[pos + 1]
        typ = data[pos + 2]
        olen = (data[pos + 3] & 0x1F) * 4
        out.append((cls, typ, bytes(data[pos + 4:min(pos + 4 + olen, stop)])))
        pos += 4 + olen
    return tuple(out)


# -----------------------------------------------------------------------------
# transport
# -----------------------------------------------------------------------------
def _tcp(walk: _Walk, l4: int, end: int, family: int, src: bytes, dst: bytes) -> None:
    data, vals = walk.data, walk.vals
    if walk.n >= l4 + 4:
        vals.update(sport=(data[l4] << 8) | data[l4 + 1], dport=(data[l4 + 2] << 8) | data[l4 + 3])
    if not walk.need(l4, 20, "TCP"):
        return
    sport, dport, seq, ack, doff_byte, flags, window, check, urg = unpack_from("!HHIIBBHHH", data, l4)
    doff = (doff_byte >> 4) * 4
    walk.layers.append(Layer("tcp", l4, doff, (("sport", sport), ("dport", dport), ("seq", seq), ("ack", ack),
                                               ("doff", doff), ("flags", flags), ("ae", bool(doff_byte & 1)),
                                               ("window", window), ("checksum", check), ("urgent", urg),
                                               ("options", bytes(data[l4 + 20:l4 + max(20, doff)])))))
    if doff < 20:
        walk.fail(f"TCP data offset {doff} < 20")
        return
    vals.update(l4_proto=IPPROTO_TCP, seq=seq, ack=ack, tcp_flags=flags, window=window, payload_off=l4 + doff,
                payload_len=max(0, end - l4 - doff), check_at=l4 + 16)
    walk.checksums.append(Checksum("tcp", l4 + 16, l4, end, doff, family, src, dst, IPPROTO_TCP))
    if l4 + doff > end:
        walk.fail(f"TCP data offset {doff} runs past the IP payload")
    elif walk.n < l4 + doff:
        walk.fail(f"truncated TCP options ({walk.n - l4} of {doff} header bytes captured)")


def _udp(walk: _Walk, l4: int, end: int, family: int, src: bytes, dst: bytes) -> bool:
    """Parse the UDP header; True when it is complete."""
    data, vals = walk.data, walk.vals
    if walk.n >= l4 + 4:
        vals.update(sport=(data[l4] << 8) | data[l4 + 1], dport=(data[l4 + 2] << 8) | data[l4 + 3])
    if not walk.need(l4, 8, "UDP"):
        return False
    sport, dport, length, check = unpack_from("!HHHH", data, l4)
    walk.layers.append(Layer("udp", l4, 8, (("sport", sport), ("dport", dport), ("length", length),
                                            ("checksum", check))))
    vals.update(l4_proto=IPPROTO_UDP, payload_off=l4 + 8, payload_len=max(0, end - l4 - 8), check_at=l4 + 6)
    walk.checksums.append(Checksum("udp", l4 + 6, l4, end, 8, family, src, dst, IPPROTO_UDP))
    if l4 + 8 > end:
        walk.fail("UDP header runs past the IP payload")
    return True
