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
  IPv4/IPv6, BSD loopback (NULL, LOOP: the address family) (grotool/linktypes.py);
* IPv4 (options, fragments), IPv6 with Hop-by-Hop, Routing, Fragment and
  Destination Options headers (a Jumbo Payload option gives the length);
* tunnels: IP-in-IP (ipip, sit, ip4ip6, ip6ip6), GRE over IPv4/IPv6 (C/K/S
  flags, key, IP or transparent Ethernet bridging payload), VXLAN (with or
  without its I flag, as GRO) and GENEVE on configurable UDP destination
  ports (4789 and 6081 by default);
* TCP (ports, seq, ack, flags, window, options) and UDP (ports, length,
  checksum).

GRO itself handles one tunnel level; the dissector follows nested tunnels up
to ``MAX_IP_HEADERS`` IP headers.  A fragment is never looked into.

It never raises on frame contents: a truncated or damaged frame gives what
was parsed up to the damage, with ``problem`` saying what stopped it.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, NamedTuple, Optional, Tuple

if TYPE_CHECKING:
    from .dissect_records import Checksum, Dissection, Layer  # noqa: F401  (made on first use: see below)
from .linktypes import (LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_LOOP, LOOPBACK_LINKTYPES,
                        RAW_LINKTYPES, loopback_ethertype, loopback_family)

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_TEB = 0x6558                      # transparent Ethernet bridging (GRE, GENEVE)
_TPID_8021Q = 0x8100
_TPID_8021AD = 0x88A8
_TPID_QINQ = 0x9100                     # the older QinQ tag
VLAN_TPIDS = (_TPID_8021Q, _TPID_8021AD, _TPID_QINQ)
IPPROTO_IPIP = 4
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPPROTO_GRE = 47
# C copies the walk compares with in the compiled build (dissect.pxd): the
# public names above stay Python integers for the modules that import them
_C_ETH_P_IP, _C_ETH_P_IPV6, _C_ETH_P_TEB = ETH_P_IP, ETH_P_IPV6, ETH_P_TEB
_C_IPPROTO_IPIP, _C_IPPROTO_TCP, _C_IPPROTO_UDP, _C_IPPROTO_IPV6, _C_IPPROTO_GRE = \
    IPPROTO_IPIP, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_IPV6, IPPROTO_GRE
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


# dissect()'s record types (Layer, Checksum, Dissection) live in
# grotool.dissect_records and are made on first use: naming flows, a replay's
# only use of this module, needs none of them, and making their named tuples
# is 5.9 M instructions of a start-up.  From outside they are this module's
# attributes as ever (__getattr__); dissect() puts them among its globals.
_RECORD_TYPES = ("Layer", "Checksum", "Dissection")


def __getattr__(name: str):
    if name in _RECORD_TYPES:
        _load_record_types()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load_record_types() -> None:
    global Layer, Checksum, Dissection
    from .dissect_records import Checksum, Dissection, Layer


_ADDR_CACHE: Dict[bytes, str] = {}


def _ipv6_form(zero_words: int) -> tuple:
    """How to write an IPv6 address whose zero 16-bit words are the set bits of
    ``zero_words`` (bit i: word i), compressed as ipaddress writes it (the first
    of the longest runs of two or more zero words is "::"): (printf-style
    template of the words shown, first word of the run, run length)."""
    best_at = best_len = run_len = 0
    for i in range(8):
        run_len = run_len + 1 if zero_words >> i & 1 else 0
        if run_len > best_len:
            best_at, best_len = i - run_len + 1, run_len
    if best_len < 2:
        return ":".join(["%x"] * 8), 0, 0
    return ":".join(["%x"] * best_at) + "::" + ":".join(["%x"] * (8 - best_at - best_len)), best_at, best_len


# zero-word pattern -> _ipv6_form(pattern), made when first needed (256 at most)
_IPV6_FORMS: Dict[int, tuple] = {}


def addr_text(raw: bytes) -> str:
    """An IPv4 or IPv6 address as text (cached in the interpreted build:
    captures repeat few addresses)."""
    if TEXT_IN_PLACE:
        # compiled: the slots (_cached_addr_format) cost less than hashing the bytes to look them up
        raw = raw if type(raw) is bytes else bytes(raw)
        if len(raw) == 4 or len(raw) == 16:
            return _cached_addr_format(raw, 0, len(raw))
        return _addr_format(raw)
    text = _ADDR_CACHE.get(raw)
    if text is None:
        text = _addr_format(raw if type(raw) is bytes else bytes(raw))
        if len(_ADDR_CACHE) < 100_000:
            _ADDR_CACHE[raw] = text
    return text


def _running_compiled() -> bool:
    """True when this module runs compiled: its functions are then not Python functions."""
    return type(_running_compiled) is not types.FunctionType


# the compiled build writes address text with C stores into one buffer
# (_ADDR_TEXT, dissect.pxd) and makes one string of it; the interpreted build
# formats it (tests/test_naming.py compares both with ipaddress)
TEXT_IN_PLACE = _running_compiled()


def _put_decimal(out, value: int) -> int:
    """value (0-255) in decimal at out; the digits written (compiled build only)."""
    if value >= 100:
        out[0] = 48 + value // 100
        out[1] = 48 + value // 10 % 10
        out[2] = 48 + value % 10
        return 3
    if value >= 10:
        out[0] = 48 + value // 10
        out[1] = 48 + value % 10
        return 2
    out[0] = 48 + value
    return 1


def _put_hex(out, value: int) -> int:
    """value (0-0xffff) as "%x" writes it at out; the digits written (compiled build only)."""
    n = 4 if value >= 0x1000 else 3 if value >= 0x100 else 2 if value >= 0x10 else 1
    for i in range(n):
        digit = (value >> (4 * (n - 1 - i))) & 0xF
        out[i] = 48 + digit if digit < 10 else 87 + digit
    return n


# compiled build: the text last written for each of _TEXT_SLOTS address slots
# (a slot by the address's last three bytes), its address bytes beside it in
# _TEXT_KEYS (dissect.pxd): captures repeat few addresses, and a C compare
# finds one for a tenth of what writing its text costs
_TEXT_SLOTS = 4096
_SLOT_TEXTS = [None] * _TEXT_SLOTS


def _cached_addr_format(data: bytes, at: int, size: int) -> str:
    """_addr_format_at() (size 4 or 16) through the slots; compiled build only."""
    octets = data
    last = at + size
    slot = (((octets[last - 2] << 8) | octets[last - 1]) ^ (octets[last - 3] << 4)) & (_TEXT_SLOTS - 1)
    key = _TEXT_KEYS + slot * 16
    if _TEXT_KEY_SIZE[slot] == size and memcmp(key, octets + at, size) == 0:
        return _SLOT_TEXTS[slot]
    text = _addr_format_at(data, at, size)
    memcpy(key, octets + at, size)
    _TEXT_KEY_SIZE[slot] = size
    _SLOT_TEXTS[slot] = text
    return text


def _ascii_text(out, n: int) -> str:
    """The n ASCII characters at out as a str, copied straight into a new
    string (decoding them cost as much again as writing them; compiled build only)."""
    text = PyUnicode_New(n, 127)
    memcpy(PyUnicode_DATA(text), out, n)
    return text


def _addr_format(raw: bytes) -> str:
    """4 bytes as a dotted quad; 16 as str(ipaddress.IPv6Address(raw)) writes
    them, without building the address objects (they made up a third of naming
    a new flow)."""
    return _addr_format_at(raw, 0, len(raw))


def _addr_format_at(data: bytes, at: int, size: int) -> str:
    """_addr_format(data[at:at + size]) without the slice (at + size in range)."""
    octets = data
    if size == 4:
        a, b, c, d = octets[at], octets[at + 1], octets[at + 2], octets[at + 3]
        if TEXT_IN_PLACE:
            out = _ADDR_TEXT
            n = _put_decimal(out, a)
            out[n] = 46                             # "."
            n += 1 + _put_decimal(out + n + 1, b)
            out[n] = 46
            n += 1 + _put_decimal(out + n + 1, c)
            out[n] = 46
            n += 1 + _put_decimal(out + n + 1, d)
            return _ascii_text(out, n)
        return f"{a}.{b}.{c}.{d}"
    if size != 16:
        import ipaddress                            # only for the rare forms: a replay need not load it

        return str(ipaddress.IPv6Address(data[at:at + size]))      # raises as ipaddress does
    w0 = (octets[at] << 8) | octets[at + 1]
    w1 = (octets[at + 2] << 8) | octets[at + 3]
    w2 = (octets[at + 4] << 8) | octets[at + 5]
    w3 = (octets[at + 6] << 8) | octets[at + 7]
    w4 = (octets[at + 8] << 8) | octets[at + 9]
    w5 = (octets[at + 10] << 8) | octets[at + 11]
    w6 = (octets[at + 12] << 8) | octets[at + 13]
    w7 = (octets[at + 14] << 8) | octets[at + 15]
    zero_words = ((w0 == 0) | ((w1 == 0) << 1) | ((w2 == 0) << 2) | ((w3 == 0) << 3) | ((w4 == 0) << 4)
                  | ((w5 == 0) << 5) | ((w6 == 0) << 6) | ((w7 == 0) << 7))
    if (zero_words & 0x1F) == 0x1F and w5 == 0xFFFF:
        import ipaddress

        return str(ipaddress.IPv6Address(data[at:at + 16]))      # IPv4-mapped: Python 3.13 writes its IPv4 part dotted
    form = _IPV6_FORMS.get(zero_words)
    if form is None:
        form = _IPV6_FORMS[zero_words] = _ipv6_form(zero_words)
    template, run_at, run_len = form
    if TEXT_IN_PLACE:
        # the words as the template writes them: "%x" each, ":" between, "::" for the run
        out = _ADDR_TEXT
        n = 0
        i = 0
        while i < 8:
            if i == run_at and run_len:
                out[n] = 58                         # ":"
                out[n + 1] = 58
                n += 2
                i += run_len
                continue
            if n and out[n - 1] != 58:
                out[n] = 58
                n += 1
            n += _put_hex(out + n, (octets[at + 2 * i] << 8) | octets[at + 2 * i + 1])
            i += 1
        return _ascii_text(out, n)
    words = (w0, w1, w2, w3, w4, w5, w6, w7)
    if run_len:
        words = words[:run_at] + words[run_at + run_len:]
    return template % words


def _address_at(l3: int, family: int, dst: bool) -> int:
    """Where the IP header at l3 keeps its source (dst False) or destination address."""
    if family == 4:
        return l3 + 16 if dst else l3 + 12
    return l3 + 24 if dst else l3 + 8


def _ip_address(data: bytes, l3: int, family: int, dst: bool) -> bytes:
    """The source (dst False) or destination address bytes of the IP header at l3."""
    at = _address_at(l3, family, dst)
    return data[at:at + (4 if family == 4 else 16)]


def _ip_addresses(data: bytes, l3: int, family: int) -> Tuple[bytes, bytes]:
    """The source and destination address bytes of the IP header at l3."""
    return _ip_address(data, l3, family, False), _ip_address(data, l3, family, True)


def ip_address_text(data: bytes, l3: int, family: int, dst: bool) -> str:
    """addr_text() of _ip_address(): the compiled build writes it from the
    frame, without the address bytes (a walk without records keeps none)."""
    if TEXT_IN_PLACE:
        return _cached_addr_format(data, _address_at(l3, family, dst), 4 if family == 4 else 16)
    return addr_text(_ip_address(data, l3, family, dst))


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


# The named tuples are built with tuple.__new__: their own __new__ is a Python
# function, a frame per header, which cost more than reading the header.
_new = tuple.__new__


class _Walk:
    """One dissection under way: the Dissection's fields as they are found.

    ``records``: also keep each layer's fields, the checksum fields, the
    innermost addresses' bytes (src, dst) and the transport header's fields
    past its ports.  Naming a flow needs none of them (they were most of its
    work; it writes the address text from the frame, ip_address_text): without
    records, TCP is read as far as its ports, and UDP as far as it takes to
    see whether a tunnel follows."""

    __slots__ = ("data", "n", "frame_len", "records", "layers", "problem", "tunnels", "checksums", "vlans",
                 "ethertype", "family", "l3", "src", "dst", "ip_proto", "fragment", "frag_header", "l3_end",
                 "l3_ok", "l4", "l4_proto", "sport", "dport", "payload_off", "payload_len", "check_at", "seq", "ack",
                 "tcp_flags", "window")

    def __init__(self, data: bytes, frame_len: int, records: bool):
        self.restart(data, frame_len, records)

    def restart(self, data: bytes, frame_len: int, records: bool) -> None:
        """Start walking ``data``: every field set again (a walk can be reused)."""
        self.data = data
        self.n = len(data)
        self.frame_len = frame_len
        self.records = records
        # None: not kept (naming needs no records); the tunnels a tuple, most frames have none
        self.layers = [] if records else None
        self.problem: Optional[str] = None
        self.tunnels = ()
        self.checksums = [] if records else None
        self.vlans: Tuple[int, ...] = ()
        self.ethertype: Optional[int] = None
        self.no_inner()

    def no_inner(self) -> None:
        """No innermost IP packet (yet): its fields as Dissection defaults them."""
        self.family = self.l3 = self.src = self.dst = self.ip_proto = self.l3_end = self.l4 = None
        self.fragment = self.frag_header = self.l3_ok = False
        self.no_transport()

    def no_transport(self) -> None:
        self.l4_proto = self.sport = self.dport = self.payload_off = self.check_at = None
        self.seq = self.ack = self.window = None
        self.payload_len = self.tcp_flags = 0

    def found_ip(self, family: int, l3: int, proto: int, l4: int, end: int, src: bytes, dst: bytes,
                 fragment: bool, frag_header: bool, ok: bool) -> None:
        """An IP header parsed at l3: it is the innermost packet now.  Its
        transport fields are clear already (restart, or no_inner on entering a
        tunnel: no transport is parsed between two IP headers otherwise)."""
        self.family = family
        self.l3 = l3
        self.src = src
        self.dst = dst
        self.ip_proto = proto
        self.fragment = fragment
        self.frag_header = frag_header
        self.l3_end = end
        self.l3_ok = ok
        self.l4 = l4

    def fail(self, text: str) -> None:
        if self.problem is None:
            self.problem = text

    def need(self, off: int, size: int, what: str) -> bool:
        if self.n >= off + size:
            return True
        self.fail(f"truncated {what} header ({max(0, self.n - off)} of {size} bytes captured)")
        return False


def _word32(raw, at: int) -> int:
    """The big-endian 32-bit word at ``at`` (in range)."""
    top = raw[at]           # a C long in the compiled build: shifted by 24 it must not overflow an int
    return (top << 24) | (raw[at + 1] << 16) | (raw[at + 2] << 8) | raw[at + 3]


def dissect(data, linktype: int = LINKTYPE_ETHERNET, *, wirelen: Optional[int] = None,
            vxlan_ports: Iterable[int] = DEFAULT_VXLAN_PORTS,
            geneve_ports: Iterable[int] = DEFAULT_GENEVE_PORTS) -> Dissection:
    """Dissect one captured frame of ``linktype`` (a LINKTYPE_ value).

    ``wirelen``: the frame's length on the wire, when the capture was cut
    short by a snap length (IP lengths are checked against it).  UDP to a
    destination port in ``vxlan_ports`` / ``geneve_ports`` is looked into as
    VXLAN / GENEVE; pass empty sets to treat it as plain UDP.
    """
    if "Dissection" not in globals():
        _load_record_types()
    data = data if type(data) is bytes else bytes(data)
    frame_len = max(wirelen or 0, len(data))
    vxlan = vxlan_ports if isinstance(vxlan_ports, (set, frozenset)) else frozenset(vxlan_ports)
    geneve = geneve_ports if isinstance(geneve_ports, (set, frozenset)) else frozenset(geneve_ports)
    linktype = LINKTYPE_ETHERNET if linktype is None else linktype
    w = walk_frame(data, linktype, frame_len, vxlan, geneve, True)
    return Dissection(linktype, w.n, frame_len, tuple(w.layers), w.problem, vlans=w.vlans, ethertype=w.ethertype,
                      tunnels=tuple(w.tunnels), family=w.family, l3=w.l3, src=w.src, dst=w.dst,
                      ip_proto=w.ip_proto, fragment=w.fragment, frag_header=w.frag_header, l3_end=w.l3_end,
                      l3_ok=w.l3_ok, l4=w.l4, l4_proto=w.l4_proto, sport=w.sport, dport=w.dport,
                      payload_off=w.payload_off, payload_len=w.payload_len, check_at=w.check_at, seq=w.seq,
                      ack=w.ack, tcp_flags=w.tcp_flags, window=w.window, checksums=tuple(w.checksums))


def walk_frame(data: bytes, linktype: int, frame_len: int, vxlan, geneve, records: bool,
               walk: Optional[_Walk] = None) -> _Walk:
    """dissect() on arguments already in shape (bytes, a link type, sets of
    ports), left as the walk's state: a Dissection's fields, without the
    per-layer records and checksums (None), the innermost addresses' bytes
    (None: l3 says whether there is an IP header) and the transport's fields
    past its ports (nor the problems found there) unless ``records``.  ``walk``: a
    walk to reuse (restarted) instead of a new one."""
    if walk is None:
        w = _Walk(data, frame_len, records)
    else:
        w = walk
        w.restart(data, frame_len, records)
    off = _link(w, linktype)
    if off >= 0:
        _network(w, off, w.ethertype, frame_len, vxlan, geneve)
    return w


# -----------------------------------------------------------------------------
# link layer
# -----------------------------------------------------------------------------
def _link(walk: _Walk, linktype: int) -> int:
    """Sets the link VLAN IDs and the ethertype; the offset of the link payload,
    or -1 when there is none to parse."""
    data = walk.data
    if linktype == LINKTYPE_ETHERNET:
        if not walk.need(0, 14, "Ethernet"):
            return -1
        etype = (data[12] << 8) | data[13]
        if walk.records:
            walk.layers.append(_new(Layer, ("eth", 0, 14, (("dst", data[0:6]), ("src", data[6:12]),
                                                           ("ethertype", etype)))))
        return _vlan_tags(walk, 14, etype)
    if linktype == LINKTYPE_LINUX_SLL:
        if not walk.need(0, 16, "Linux SLL"):
            return -1
        etype = (data[14] << 8) | data[15]
        if walk.records:
            alen = (data[4] << 8) | data[5]
            walk.layers.append(_new(Layer, ("sll", 0, 16, (("pkttype", (data[0] << 8) | data[1]),
                                                           ("hatype", (data[2] << 8) | data[3]),
                                                           ("addr", data[6:6 + min(alen, 8)]),
                                                           ("protocol", etype)))))
        return _vlan_tags(walk, 16, etype)
    if linktype == LINKTYPE_LINUX_SLL2:
        if not walk.need(0, 20, "Linux SLL2"):
            return -1
        etype = (data[0] << 8) | data[1]
        if walk.records:
            alen = data[11]
            walk.layers.append(_new(Layer, ("sll2", 0, 20, (("protocol", etype), ("ifindex", _word32(data, 4)),
                                                            ("hatype", (data[8] << 8) | data[9]),
                                                            ("pkttype", data[10]),
                                                            ("addr", data[12:12 + min(alen, 8)])))))
        return _vlan_tags(walk, 20, etype)
    if linktype in RAW_LINKTYPES:
        if not walk.n:
            walk.fail("empty raw IP record")
            return -1
        version = data[0] >> 4
        if version == 4:
            walk.ethertype = _C_ETH_P_IP
            return 0
        if version == 6:
            walk.ethertype = _C_ETH_P_IPV6
            return 0
        walk.fail(f"raw IP record with IP version {version}")
        walk.ethertype = 0
        return -1
    if linktype in LOOPBACK_LINKTYPES:
        name = "loop" if linktype == LINKTYPE_LOOP else "null"
        if not walk.need(0, 4, "BSD loopback"):
            return -1
        header = walk.data[:4]
        family = loopback_family(linktype, header)
        if walk.records:
            walk.layers.append(_new(Layer, (name, 0, 4, (("family", family),))))
        walk.ethertype = loopback_ethertype(linktype, header)
        if not walk.ethertype:
            walk.fail(f"BSD loopback address family {family} is not IPv4 or IPv6")
            return -1
        return 4
    walk.fail(f"unsupported link type {linktype}")
    return -1


def _vlan_tags(walk: _Walk, off: int, etype: int) -> int:
    """Skip 802.1Q/802.1ad tags from off: the walk's ethertype and VLAN IDs set
    (no tuple to return and unpack); the payload offset."""
    data = walk.data
    if etype != _TPID_8021Q and etype != _TPID_8021AD and etype != _TPID_QINQ:    # not in VLAN_TPIDS: C compares
        # the two ethertypes nearly every frame has are stored as the module's
        # integers: the compiled build then makes (and frees) no integer object
        walk.ethertype = ETH_P_IP if etype == _C_ETH_P_IP else ETH_P_IPV6 if etype == _C_ETH_P_IPV6 else etype
        walk.vlans = ()
        return off
    vlans = []
    while etype in VLAN_TPIDS:
        if len(vlans) >= MAX_VLAN_TAGS:
            walk.fail(f"more than {MAX_VLAN_TAGS} VLAN tags")
            break
        if not walk.need(off, 4, "VLAN tag"):
            break
        tci = (data[off] << 8) | data[off + 1]
        inner = (data[off + 2] << 8) | data[off + 3]
        if walk.records:
            walk.layers.append(_new(Layer, ("vlan", off, 4, (("tpid", etype), ("pcp", tci >> 13),
                                                             ("dei", (tci >> 12) & 1), ("vid", tci & 0x0FFF),
                                                             ("ethertype", inner)))))
        vlans.append(tci & 0x0FFF)
        etype = inner
        off += 4
    walk.ethertype = etype
    walk.vlans = tuple(vlans)
    return off


# -----------------------------------------------------------------------------
# network layer and tunnels
# -----------------------------------------------------------------------------
def _ip_header(walk: _Walk, off: int, etype: int, limit: int) -> bool:
    """Parse the IP header at off; when it is usable, it becomes the walk's
    innermost packet (True)."""
    data = walk.data
    records = walk.records
    if etype == _C_ETH_P_IP:
        if not walk.need(off, 20, "IPv4"):
            return False
        version = data[off] >> 4
        if version != 4:
            walk.fail(f"IPv4 ethertype but IP version {version}")
            return False
        ihl = (data[off] & 0x0F) * 4
        tot = (data[off + 2] << 8) | data[off + 3]
        frag = (data[off + 6] << 8) | data[off + 7]
        proto = data[off + 9]
        src = dst = None                            # a walk without records keeps no address bytes
        if records:
            src, dst = _ip_addresses(walk.data, off, 4)
            fields = (("ihl", ihl), ("tos", data[off + 1]), ("total_length", tot),
                      ("id", (data[off + 4] << 8) | data[off + 5]), ("df", bool(frag & 0x4000)),
                      ("mf", bool(frag & 0x2000)), ("frag_offset", (frag & 0x1FFF) * 8), ("ttl", data[off + 8]),
                      ("proto", proto), ("checksum", (data[off + 10] << 8) | data[off + 11]), ("src", src),
                      ("dst", dst), ("options", walk.data[off + 20:off + max(20, ihl)]))
            walk.layers.append(_new(Layer, ("ipv4", off, ihl, fields)))
        if ihl < 20:
            walk.fail(f"IPv4 header length {ihl} < 20")
            return False
        if not walk.need(off, ihl, "IPv4 (with options)"):
            return False
        if records:
            walk.checksums.append(_new(Checksum, ("ipv4", off + 10, off, off + ihl, ihl, 0, b"", b"", 0)))
        if tot == 0:
            end, ok = limit, True                   # IPv4 BIG TCP: the length is the frame's
        else:
            end = off + tot
            ok = tot >= ihl and end <= limit
            if not ok:
                walk.fail(f"IPv4 total length {tot} does not fit " +
                          ("its header" if tot < ihl else f"the {limit - off} bytes available"))
        walk.found_ip(4, off, proto, off + ihl, end, src, dst, bool(frag & 0x3FFF), False, ok)
        return True
    if etype == _C_ETH_P_IPV6:
        if not walk.need(off, 40, "IPv6"):
            return False
        version = data[off] >> 4
        if version != 6:
            walk.fail(f"IPv6 ethertype but IP version {version}")
            return False
        plen = (data[off + 4] << 8) | data[off + 5]
        proto = data[off + 6]
        src = dst = None
        if records:
            src, dst = _ip_addresses(walk.data, off, 6)
            walk.layers.append(_new(Layer, ("ipv6", off, 40, (
                ("tc", ((data[off] & 0x0F) << 4) | (data[off + 1] >> 4)),
                ("flow_label", ((data[off + 1] & 0x0F) << 16) | (data[off + 2] << 8) | data[off + 3]),
                ("payload_length", plen), ("next_header", proto), ("hop_limit", data[off + 7]),
                ("src", src), ("dst", dst)))))
        end = off + 40 + plen if plen else -1       # -1: not known yet
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
            fields = ()
            if proto == 44:
                word = (data[l4 + 2] << 8) | data[l4 + 3]
                hlen = 8
                if records:
                    fields = (("next_header", nxt), ("frag_offset", word & 0xFFF8), ("mf", bool(word & 1)),
                              ("id", _word32(data, l4 + 4)))
                fragment = fragment or bool(word & 0xFFF9)
                frag_header = True
            else:
                hlen = (data[l4 + 1] + 1) * 8
                if records:
                    fields = (("next_header", nxt), ("length", hlen))
                    if proto == 43:
                        fields += (("routing_type", data[l4 + 2]), ("segments_left", data[l4 + 3]))
                if proto == 0 and plen == 0:
                    jumbo = _jumbo_length(data, walk.n, l4, hlen)
                    if jumbo >= 0:
                        end = off + 40 + jumbo
                        if records:
                            fields += (("jumbo_length", jumbo),)
            if records:
                walk.layers.append(_new(Layer, (name, l4, hlen, fields)))
            proto, l4 = nxt, l4 + hlen
            if fragment:
                break
        if end < 0:
            end = limit                             # no payload length and no jumbo option: the frame's
        ok = complete and l4 <= end <= limit
        if complete and not ok:
            walk.fail(f"IPv6 payload length {end - off - 40} does not fit "
                      + ("its extension headers" if l4 > end else f"the {limit - off - 40} bytes available"))
        walk.found_ip(6, off, proto, l4, end, src, dst, fragment, frag_header, ok and complete)
        return True
    return False


def _jumbo_length(data, n: int, start: int, hlen: int) -> int:
    """The Jumbo Payload option's length in the Hop-by-Hop header at start, or -1."""
    pos, stop = start + 2, min(start + hlen, n)
    while pos + 2 <= stop:
        otype = data[pos]
        if otype == 0:                              # Pad1
            pos += 1
            continue
        olen = data[pos + 1]
        if otype == 0xC2 and olen == 4 and pos + 6 <= n:
            return _word32(data, pos + 2)
        pos += 2 + olen
    return -1


def _network(walk: _Walk, off: int, etype: int, limit: int, vxlan, geneve) -> None:
    """IP headers, tunnels and the transport from off (a link payload of etype)."""
    for _depth in range(MAX_IP_HEADERS):
        if etype != _C_ETH_P_IP and etype != _C_ETH_P_IPV6:
            return                                  # not IP: named by its ethertype
        if not _ip_header(walk, off, etype, min(limit, walk.frame_len)):
            return
        if walk.fragment:
            return                                  # no transport header to speak of
        family, proto, l4, end, src, dst = walk.family, walk.ip_proto, walk.l4, walk.l3_end, walk.src, walk.dst
        if proto == _C_IPPROTO_IPIP or proto == _C_IPPROTO_IPV6:
            inner_etype = _C_ETH_P_IP if proto == _C_IPPROTO_IPIP else _C_ETH_P_IPV6
            if not _inner_ip_present(walk, l4, inner_etype, "inner IP"):
                return
            if src is None:                         # a tunnel's identity has its outer addresses
                src, dst = _ip_addresses(walk.data, off, family)
            walk.tunnels += (_new(Tunnel, (_IPIP_KIND[(family, proto)], family, src, dst, proto, None, None, None, (), off,
                                        l4)),)
            walk.ethertype = inner_etype
            off, etype, limit = l4, inner_etype, end
            continue
        if proto == _C_IPPROTO_GRE:
            off = _gre(walk, off, family, src, dst, l4, end)
        elif proto == _C_IPPROTO_TCP:
            _tcp(walk, l4, end, family, src, dst)
            return
        elif proto == _C_IPPROTO_UDP:
            if not _udp(walk, l4, end, family, src, dst):
                return
            dport = walk.dport
            if dport in vxlan:
                off = _vxlan(walk, off, family, src, dst, l4, end)
            elif dport in geneve:
                off = _geneve(walk, off, family, src, dst, l4, end)
            else:
                return
        else:
            return
        if off < 0:
            return
        etype, limit = walk.ethertype, end          # into the encapsulated packet
    walk.fail(f"more than {MAX_IP_HEADERS} nested IP headers")


def _inner_ip_present(walk: _Walk, off: int, etype: int, what: str) -> bool:
    """Whether a complete IP header of the right version starts at off (else a problem)."""
    data = walk.data
    need = 20 if etype == _C_ETH_P_IP else 40
    if not walk.need(off, need, what):
        return False
    version = data[off] >> 4
    if version != (4 if etype == _C_ETH_P_IP else 6):
        walk.fail(f"{what} header with IP version {version}")
        return False
    return True


def _enter(walk: _Walk, kind: str, family: int, src: bytes, dst: bytes, ip_proto: int, key, sport, dport,
           outer_l3: int, inner: int, etype_inner: int, ethernet: bool) -> int:
    """Step into an encapsulated packet at ``inner``: its (IP) offset, its
    ethertype set as the walk's; -1 when it cannot be entered."""
    vlans: Tuple[int, ...] = ()
    off, etype = inner, etype_inner
    if ethernet:
        data = walk.data
        if not walk.need(inner, 14, "inner Ethernet"):
            return -1
        etype = (data[inner + 12] << 8) | data[inner + 13]
        if walk.records:
            walk.layers.append(_new(Layer, ("eth", inner, 14, (("dst", data[inner:inner + 6]),
                                                               ("src", data[inner + 6:inner + 12]),
                                                               ("ethertype", etype)))))
        link_vlans = walk.vlans                     # _vlan_tags sets the walk's: these are the tunnel's
        off = _vlan_tags(walk, inner + 14, etype)
        etype, vlans = walk.ethertype, walk.vlans
        walk.vlans = link_vlans
    elif not _inner_ip_present(walk, inner, etype_inner, f"{kind} inner IP"):
        return -1
    if src is None:                                 # a tunnel's identity has its outer addresses
        src, dst = _ip_addresses(walk.data, outer_l3, family)
    walk.tunnels += (_new(Tunnel, (kind, family, src, dst, ip_proto, key, sport, dport, vlans, outer_l3, inner)),)
    walk.no_inner()                                 # the innermost packet is now the encapsulated one
    walk.ethertype = etype
    return off


def _gre(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, off: int, end: int) -> int:
    """The GRE header at off (RFC 2784/2890; version 1 of RFC 2637 for its length)."""
    data = walk.data
    records = walk.records
    if not walk.need(off, 4, "GRE"):
        return -1
    flags = (data[off] << 8) | data[off + 1]
    proto = (data[off + 2] << 8) | data[off + 3]
    version = flags & 0x7
    csum_flag, routing, key_flag, seq_flag = flags & 0x8000, flags & 0x4000, flags & 0x2000, flags & 0x1000
    if version == 0:
        hlen = 4 + 4 * bool(csum_flag or routing) + 4 * bool(key_flag) + 4 * bool(seq_flag)
    elif version == 1:                              # PPTP's enhanced GRE: key is length + call ID
        hlen = 8 + 4 * bool(seq_flag) + 4 * bool(flags & 0x0080)
    else:
        if records:
            walk.layers.append(_new(Layer, ("gre", off, 4, (("flags", flags), ("version", version),
                                                            ("protocol", proto)))))
        walk.fail(f"GRE version {version}")
        return -1
    fields = []
    if records:
        fields = [("flags", flags), ("version", version), ("protocol", proto),
                  ("checksum_present", bool(csum_flag)), ("key_present", bool(key_flag)),
                  ("seq_present", bool(seq_flag)), ("routing_present", bool(routing))]
    key = None
    if walk.n >= off + hlen:
        pos = off + 4
        if (csum_flag or routing) and version == 0:
            if records:
                fields.append(("checksum", (data[pos] << 8) | data[pos + 1]))
            pos += 4
        if key_flag or version == 1:
            key = _word32(data, pos)
            if version == 1:
                key &= 0xFFFF                       # the call ID
            if records:
                fields.append(("key", key))
            pos += 4
        if seq_flag and records:
            fields.append(("seq", _word32(data, pos)))
    if records:
        walk.layers.append(_new(Layer, ("gre", off, hlen, tuple(fields))))
    if not walk.need(off, hlen, "GRE"):
        return -1
    if csum_flag and not routing and version == 0 and records:
        walk.checksums.append(_new(Checksum, ("gre", off + 4, off, end, hlen, 0, b"", b"", 0)))
    if routing or version != 0:
        return -1                                   # source routing / PPP payloads are not looked into
    if proto == _C_ETH_P_TEB:
        kind = "gretap" if family == 4 else "ip6gretap"
        return _enter(walk, kind, family, src, dst, _C_IPPROTO_GRE, key, None, None, outer_l3, off + hlen, 0, True)
    if proto == _C_ETH_P_IP or proto == _C_ETH_P_IPV6:
        kind = "gre" if family == 4 else "ip6gre"
        return _enter(walk, kind, family, src, dst, _C_IPPROTO_GRE, key, None, None, outer_l3, off + hlen, proto, False)
    return -1


def _vxlan(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, l4: int, end: int) -> int:
    """VXLAN (RFC 7348) after the UDP header at l4: an Ethernet frame follows,
    whatever the flags say.  GRO does not look at the I flag either
    (vxlan_gro_prepare_receive only compares the flags and VNI words between
    packets, then vxlan_gro_receive hands the inner frame to eth_gro_receive),
    so a frame without it is merged on its inner flow and named by it."""
    data = walk.data
    off = l4 + 8
    if not walk.need(off, 8, "VXLAN"):
        return -1
    flags = data[off]
    vni = (data[off + 4] << 16) | (data[off + 5] << 8) | data[off + 6]
    if walk.records:
        walk.layers.append(_new(Layer, ("vxlan", off, 8, (("flags", flags), ("vni", vni)))))
    return _enter(walk, "vxlan", family, src, dst, _C_IPPROTO_UDP, vni, walk.sport, walk.dport, outer_l3, off + 8, 0,
                  True)


def _geneve(walk: _Walk, outer_l3: int, family: int, src: bytes, dst: bytes, l4: int, end: int) -> int:
    """GENEVE (RFC 8926) after the UDP header at l4, options included."""
    data = walk.data
    off = l4 + 8
    if not walk.need(off, 8, "GENEVE"):
        return -1
    version, optlen = data[off] >> 6, (data[off] & 0x3F) * 4
    proto = (data[off + 2] << 8) | data[off + 3]
    vni = (data[off + 4] << 16) | (data[off + 5] << 8) | data[off + 6]
    hlen = 8 + optlen
    if walk.records:
        options = _geneve_options(data, off + 8, min(off + hlen, walk.n))
        walk.layers.append(_new(Layer, ("geneve", off, hlen, (
            ("version", version), ("opt_len", optlen), ("oam", bool(data[off + 1] & 0x80)),
            ("critical", bool(data[off + 1] & 0x40)), ("protocol", proto), ("vni", vni), ("options", options)))))
    if version != 0:
        return -1
    if not walk.need(off, hlen, "GENEVE (with options)"):
        return -1
    if proto == _C_ETH_P_TEB:
        return _enter(walk, "geneve", family, src, dst, _C_IPPROTO_UDP, vni, walk.sport, walk.dport, outer_l3,
                      off + hlen, 0, True)
    if proto == _C_ETH_P_IP or proto == _C_ETH_P_IPV6:
        return _enter(walk, "geneve", family, src, dst, _C_IPPROTO_UDP, vni, walk.sport, walk.dport, outer_l3,
                      off + hlen, proto, False)
    return -1


def _geneve_options(data, pos: int, stop: int) -> Tuple[Tuple[int, int, bytes], ...]:
    """(class, type, data) of each GENEVE option between pos and stop (in range)."""
    out = []
    while pos + 4 <= stop and len(out) < 64:
        cls = (data[pos] << 8) | data[pos + 1]
        typ = data[pos + 2]
        olen = (data[pos + 3] & 0x1F) * 4
        out.append((cls, typ, data[pos + 4:min(pos + 4 + olen, stop)]))
        pos += 4 + olen
    return tuple(out)


# -----------------------------------------------------------------------------
# transport
# -----------------------------------------------------------------------------
def _tcp(walk: _Walk, l4: int, end: int, family: int, src: bytes, dst: bytes) -> None:
    data = walk.data
    n = walk.n
    if n >= l4 + 4:
        walk.sport = (data[l4] << 8) | data[l4 + 1]
        walk.dport = (data[l4 + 2] << 8) | data[l4 + 3]
    if not walk.records:
        return                                      # naming a flow needs its ports only
    if not walk.need(l4, 20, "TCP"):
        return
    doff_byte = data[l4 + 12]
    doff = (doff_byte >> 4) * 4
    walk.layers.append(_new(Layer, ("tcp", l4, doff, (
        ("sport", walk.sport), ("dport", walk.dport), ("seq", _word32(data, l4 + 4)),
        ("ack", _word32(data, l4 + 8)), ("doff", doff), ("flags", data[l4 + 13]), ("ae", bool(doff_byte & 1)),
        ("window", (data[l4 + 14] << 8) | data[l4 + 15]), ("checksum", (data[l4 + 16] << 8) | data[l4 + 17]),
        ("urgent", (data[l4 + 18] << 8) | data[l4 + 19]), ("options", walk.data[l4 + 20:l4 + max(20, doff)])))))
    if doff < 20:
        walk.fail(f"TCP data offset {doff} < 20")
        return
    walk.l4_proto = _C_IPPROTO_TCP
    walk.seq = _word32(data, l4 + 4)
    walk.ack = _word32(data, l4 + 8)
    walk.tcp_flags = data[l4 + 13]
    walk.window = (data[l4 + 14] << 8) | data[l4 + 15]
    walk.payload_off = l4 + doff
    walk.payload_len = max(0, end - l4 - doff)
    walk.check_at = l4 + 16
    walk.checksums.append(_new(Checksum, ("tcp", l4 + 16, l4, end, doff, family, src, dst, _C_IPPROTO_TCP)))
    if l4 + doff > end:
        walk.fail(f"TCP data offset {doff} runs past the IP payload")
    elif n < l4 + doff:
        walk.fail(f"truncated TCP options ({n - l4} of {doff} header bytes captured)")


def _udp(walk: _Walk, l4: int, end: int, family: int, src: bytes, dst: bytes) -> bool:
    """Parse the UDP header; True when it is complete."""
    data = walk.data
    if walk.n >= l4 + 4:
        walk.sport = (data[l4] << 8) | data[l4 + 1]
        walk.dport = (data[l4 + 2] << 8) | data[l4 + 3]
    if not walk.need(l4, 8, "UDP"):
        return False
    if walk.records:                                # naming a flow needs the ports only
        walk.layers.append(_new(Layer, ("udp", l4, 8, (("sport", walk.sport), ("dport", walk.dport),
                                                       ("length", (data[l4 + 4] << 8) | data[l4 + 5]),
                                                       ("checksum", (data[l4 + 6] << 8) | data[l4 + 7])))))
        walk.l4_proto = _C_IPPROTO_UDP
        walk.payload_off = l4 + 8
        walk.payload_len = max(0, end - l4 - 8)
        walk.check_at = l4 + 6
        walk.checksums.append(_new(Checksum, ("udp", l4 + 6, l4, end, 8, family, src, dst, _C_IPPROTO_UDP)))
    if l4 + 8 > end:
        walk.fail("UDP header runs past the IP payload")
    return True
