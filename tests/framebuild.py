"""A minimal, struct-based frame builder and parser for the engine tests.

Independent of grotool (and of grotool/scenarios.py) on purpose: the tests
judge the engine with their own arithmetic.

Builds Ethernet (optionally 802.1Q / 802.1ad tagged) or raw-IP frames carrying
IPv4 (with options) or IPv6 (with extension headers) and TCP (with options).
Every checksum is correct unless a test asks for it to be corrupted; Ethernet
padding to 60 bytes is added only on request (a sender-side capture has none).
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
ETH_P_8021Q = 0x8100
ETH_P_8021AD = 0x88A8

IPPROTO_HOPOPTS = 0
IPPROTO_ICMP = 1
IPPROTO_TCP = 6
IPPROTO_ROUTING = 43
IPPROTO_FRAGMENT = 44
IPPROTO_DSTOPTS = 60

FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80
_FLAG_LETTERS = {"F": FIN, "S": SYN, "R": RST, "P": PSH, "A": ACK, "U": URG, "E": ECE, "C": CWR}

MAC_DST = "02:00:00:00:00:02"
MAC_SRC = "02:00:00:00:00:01"
V4_SRC, V4_DST = "192.168.1.200", "192.168.1.100"
V6_SRC, V6_DST = "fdaa::2", "fdaa::1"


# ---------------------------------------------------------------------------
# checksum arithmetic (RFC 1071), done the slow obvious way: 16-bit words
# ---------------------------------------------------------------------------
def ones_sum(data: bytes) -> int:
    """Ones'-complement sum of big-endian 16-bit words, folded to 16 bits."""
    if len(data) % 2:
        data = bytes(data) + b"\x00"
    n = len(data) // 2
    total = sum(struct.unpack("!%dH" % n, data)) if n else 0
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def checksum(data: bytes) -> int:
    """The value to put in a checksum field (complement of the sum)."""
    return (~ones_sum(data)) & 0xFFFF


def pseudo_header(family: int, src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    """IPv4 or IPv6 pseudo-header bytes.  The length is written as 32 bits for
    both families: for IPv4 that sums identically to the 16-bit form when it
    fits, and is how the kernel's csum_tcpudp_nofold treats a BIG TCP length."""
    if family == 4:
        return src + dst + struct.pack("!xBI", proto, length)
    return src + dst + struct.pack("!I3xB", length, proto)


def pseudo_seed(family: int, src: bytes, dst: bytes, proto: int, length: int) -> int:
    """What a CHECKSUM_PARTIAL packet carries in its L4 checksum field: the
    folded, not complemented, pseudo-header sum."""
    return ones_sum(pseudo_header(family, src, dst, proto, length))


# ---------------------------------------------------------------------------
# small field helpers
# ---------------------------------------------------------------------------
def mac(value: Union[str, bytes]) -> bytes:
    if isinstance(value, bytes):
        assert len(value) == 6
        return value
    return bytes(int(part, 16) for part in value.split(":"))


def ip_addr(value: Union[str, bytes]) -> bytes:
    if isinstance(value, bytes):
        return value
    return ipaddress.ip_address(value).packed


def tcp_flag_bits(flags: Union[str, int]) -> int:
    if isinstance(flags, int):
        return flags
    bits = 0
    for letter in flags:
        bits |= _FLAG_LETTERS[letter]
    return bits


def tcp_opt_ts(tsval: int, tsecr: int = 0, layout: str = "NNT") -> bytes:
    """A timestamp option padded with NOPs to 12 bytes; layout is the order of
    the two NOPs (N) and the option (T), e.g. "NNT", "NTN", "TNN"."""
    ts = struct.pack("!BBII", 8, 10, tsval, tsecr)
    return b"".join(ts if c == "T" else b"\x01" for c in layout)


def tcp_opt_sack(blocks: Sequence[Tuple[int, int]]) -> bytes:
    """NOP NOP SACK(blocks)."""
    body = b"".join(struct.pack("!II", a, b) for a, b in blocks)
    return b"\x01\x01" + struct.pack("!BB", 5, 2 + len(body)) + body


def vlan_tci(vid: int, pcp: int = 0, dei: int = 0) -> int:
    return (pcp << 13) | (dei << 12) | vid


@dataclass(frozen=True)
class ExtHdr:
    """An IPv6 extension header.  For Hop-by-Hop (0), Routing (43) and
    Destination Options (60) ``body`` is everything after the next-header and
    length bytes (padded with PadN to a multiple of 8 if needed); for Fragment
    (44) it is the 6 bytes after the next-header and reserved bytes."""

    kind: int
    body: bytes = b"\x01\x04\x00\x00\x00\x00"      # PadN(4) -> an 8-byte header


def ext_fragment(offset: int = 0, more: bool = False, ident: int = 1) -> ExtHdr:
    return ExtHdr(IPPROTO_FRAGMENT, struct.pack("!HI", (offset << 3) | int(more), ident))


def _ext_bytes(ext: ExtHdr, nexthdr: int) -> bytes:
    if ext.kind == IPPROTO_FRAGMENT:
        assert len(ext.body) == 6
        return struct.pack("!BB", nexthdr, 0) + ext.body
    body = ext.body
    rem = (len(body) + 2) % 8
    if rem:
        pad = 8 - rem
        body += b"\x00" if pad == 1 else struct.pack("!BB", 1, pad - 2) + b"\x00" * (pad - 2)
    return struct.pack("!BB", nexthdr, (len(body) + 2) // 8 - 1) + body


# ---------------------------------------------------------------------------
# the builder
# ---------------------------------------------------------------------------
def tcp_header(sport: int, dport: int, seq: int, ack: int, flags: int, window: int,
               options: bytes = b"", urg_ptr: int = 0, check: int = 0, doff: Optional[int] = None) -> bytes:
    assert len(options) % 4 == 0, "TCP options must be padded to 4 bytes"
    if doff is None:
        doff = 5 + len(options) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                       doff << 4, flags, window, check, urg_ptr) + options


def ipv4_header(src: bytes, dst: bytes, proto: int, total_len: int, *, ttl: int = 64, tos: int = 0,
                ip_id: int = 0, df: bool = True, mf: bool = False, frag_offset: int = 0,
                reserved_flag: bool = False, options: bytes = b"", check: Optional[int] = None) -> bytes:
    assert len(options) % 4 == 0, "IPv4 options must be padded to 4 bytes"
    ihl = 5 + len(options) // 4
    frag = (0x8000 if reserved_flag else 0) | (0x4000 if df else 0) | (0x2000 if mf else 0) | frag_offset
    hdr = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, tos, total_len, ip_id & 0xFFFF, frag,
                      ttl, proto, 0, src, dst) + options
    if check is None:
        check = checksum(hdr)
    return hdr[:10] + struct.pack("!H", check) + hdr[12:]


def ipv6_header(src: bytes, dst: bytes, nexthdr: int, payload_len: int, *, hop_limit: int = 64,
                tclass: int = 0, flow_label: int = 0) -> bytes:
    first = (6 << 28) | (tclass << 20) | flow_label
    return struct.pack("!IHBB16s16s", first, payload_len, nexthdr, hop_limit, src, dst)


def _corrupt(value: int, how: Union[bool, int, str, None]) -> int:
    if how is None or how is False:
        return value
    if how is True:
        return (value + 1) & 0xFFFF or 1          # off by one, as the selftest does
    return int(how) & 0xFFFF


def tcp_frame(payload: Union[bytes, int] = 0, *,
              family: int = 4, src: Optional[str] = None, dst: Optional[str] = None,
              sport: int = 1500, dport: int = 8000, seq: int = 100, ack: int = 100,
              flags: Union[str, int] = "A", window: int = 65535, tcp_options: bytes = b"",
              urg_ptr: int = 0, tcp_csum: Union[str, int, bool, None] = None,
              # IPv4
              ttl: int = 64, tos: int = 0, ip_id: int = 0, df: bool = True, mf: bool = False,
              frag_offset: int = 0, reserved_flag: bool = False, ip_options: bytes = b"",
              ip_csum: Union[bool, int, None] = None, ip_total_len: Optional[int] = None,
              # IPv6
              hop_limit: int = 64, tclass: int = 0, flow_label: int = 0,
              ext: Sequence[ExtHdr] = (), ipv6_payload_len: Optional[int] = None,
              # link
              link: str = "eth", eth_src: Union[str, bytes] = MAC_SRC, eth_dst: Union[str, bytes] = MAC_DST,
              vlans: Sequence[Tuple[int, int]] = (), pad: bool = False, trailer: bytes = b"") -> bytes:
    """One TCP frame.

    payload: bytes, or an int n for n bytes of a seq-dependent pattern (so that
        payload bytes differ between segments and a misplaced byte shows up).
    tcp_csum: None/False = correct; True = off by one; "seed" = the pseudo-header
        seed a sender with TX checksum offload leaves; an int = that value.
    ip_csum: None/False = correct; True = off by one; an int = that value.
    vlans: (tpid, tci) tags, outermost first.
    pad: Ethernet padding of the frame to 60 bytes (zeros).
    trailer: bytes appended after the IP datagram (not counted in its length).
    """
    if isinstance(payload, int):
        payload = bytes(((seq + i) * 7 + 3) & 0xFF for i in range(payload))
    fl = tcp_flag_bits(flags)
    if src is None:
        src = V4_SRC if family == 4 else V6_SRC
    if dst is None:
        dst = V4_DST if family == 4 else V6_DST
    s, d = ip_addr(src), ip_addr(dst)
    th = tcp_header(sport, dport, seq, ack, fl, window, tcp_options, urg_ptr)
    seg = th + payload
    if tcp_csum == "seed":
        check = pseudo_seed(family, s, d, IPPROTO_TCP, len(seg))
    else:
        check = checksum(pseudo_header(family, s, d, IPPROTO_TCP, len(seg)) + seg)
        check = _corrupt(check, tcp_csum)
    seg = seg[:16] + struct.pack("!H", check) + seg[18:]

    if family == 4:
        total = ip_total_len if ip_total_len is not None else 20 + len(ip_options) + len(seg)
        ip = ipv4_header(s, d, IPPROTO_TCP, total, ttl=ttl, tos=tos, ip_id=ip_id, df=df, mf=mf,
                         frag_offset=frag_offset, reserved_flag=reserved_flag, options=ip_options)
        if ip_csum not in (None, False):
            good = struct.unpack_from("!H", ip, 10)[0]
            ip = ip[:10] + struct.pack("!H", _corrupt(good, ip_csum)) + ip[12:]
        l3 = ip + seg
        ethertype = ETH_P_IP
    else:
        chain = b""
        kinds = [e.kind for e in ext] + [IPPROTO_TCP]
        for i, e in enumerate(ext):
            chain += _ext_bytes(e, kinds[i + 1])
        plen = ipv6_payload_len if ipv6_payload_len is not None else len(chain) + len(seg)
        l3 = ipv6_header(s, d, kinds[0], plen, hop_limit=hop_limit, tclass=tclass,
                         flow_label=flow_label) + chain + seg
        ethertype = ETH_P_IPV6
    l3 += trailer
    if link == "raw":
        return l3
    return ether(l3, ethertype, eth_src=eth_src, eth_dst=eth_dst, vlans=vlans, pad=pad)


def ether(l3: bytes, ethertype: int, *, eth_src: Union[str, bytes] = MAC_SRC,
          eth_dst: Union[str, bytes] = MAC_DST, vlans: Sequence[Tuple[int, int]] = (),
          pad: bool = False) -> bytes:
    """Ethernet header (+ tags) around l3; pad=True pads the frame to 60 bytes."""
    hdr = mac(eth_dst) + mac(eth_src)
    for tpid, tci in vlans:
        hdr += struct.pack("!HH", tpid, tci)
    frame = hdr + struct.pack("!H", ethertype) + l3
    if pad and len(frame) < 60:
        frame += b"\x00" * (60 - len(frame))
    return frame


def arp_frame(sender_ip: str = V4_SRC, target_ip: str = V4_DST) -> bytes:
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, 1, mac(MAC_SRC), ip_addr(sender_ip),
                       b"\x00" * 6, ip_addr(target_ip))
    return ether(body, ETH_P_ARP, eth_dst="ff:ff:ff:ff:ff:ff", pad=True)


def icmp_echo_frame(ident: int = 1, seqno: int = 1, data: bytes = b"x" * 56, ip_id: int = 0) -> bytes:
    icmp = struct.pack("!BBHHH", 8, 0, 0, ident, seqno) + data
    icmp = icmp[:2] + struct.pack("!H", checksum(icmp)) + icmp[4:]
    ip = ipv4_header(ip_addr(V4_SRC), ip_addr(V4_DST), IPPROTO_ICMP, 20 + len(icmp), ip_id=ip_id)
    return ether(ip + icmp, ETH_P_IP)


# ---------------------------------------------------------------------------
# a flow: consecutive segments with the seq and IPv4 ID advancing by themselves
# ---------------------------------------------------------------------------
class Flow:
    """Keeps seq (+payload) and the IPv4 ID (+1 per frame) of one direction.

    ``flow.seg(n, **overrides)`` builds the next segment with n payload bytes;
    overrides go to tcp_frame (seq=..., ip_id=... replace the running values
    for that frame only).  ``advance=False`` leaves the counters alone.
    """

    def __init__(self, seq: int = 1000, ip_id: int = 100, **defaults):
        self.seq = seq
        self.ip_id = ip_id
        self.defaults = defaults

    def seg(self, n: int = 1448, advance: bool = True, **overrides) -> bytes:
        kw = dict(self.defaults)
        kw.update(overrides)
        kw.setdefault("seq", self.seq)
        kw.setdefault("ip_id", self.ip_id)
        frame = tcp_frame(n, **kw)
        if advance:
            self.seq = (kw["seq"] + n) & 0xFFFFFFFF
            self.ip_id = (kw["ip_id"] + 1) & 0xFFFF
        return frame


# ---------------------------------------------------------------------------
# parser for delivered frames
# ---------------------------------------------------------------------------
@dataclass
class Parsed:
    l2: bytes = b""                   # link header bytes (Ethernet + tags)
    vlans: List[Tuple[int, int]] = field(default_factory=list)
    ethertype: int = 0
    l3_off: int = 0
    version: int = 0
    # IPv4
    ihl: int = 0
    tos: int = 0
    total_len: int = 0
    ip_id: int = 0
    frag: int = 0
    ttl: int = 0
    proto: int = 0
    ip_check: int = 0
    # IPv6
    tclass: int = 0
    flow_label: int = 0
    payload_len: int = 0
    nexthdr: int = 0
    hop_limit: int = 0
    exts: List[Tuple[int, bytes]] = field(default_factory=list)
    jumbo: Optional[int] = None
    src: bytes = b""
    dst: bytes = b""
    # TCP
    l4_off: int = 0
    sport: int = 0
    dport: int = 0
    seq: int = 0
    ack: int = 0
    doff: int = 0
    flags: int = 0
    window: int = 0
    tcp_check: int = 0
    tcp_options: bytes = b""
    payload: bytes = b""
    l3_end: int = 0                   # end of the IP datagram (padding/trailer excluded)

    @property
    def family(self) -> int:
        return self.version

    @property
    def tcp_len(self) -> int:
        return self.l3_end - self.l4_off

    def flow_id(self) -> tuple:
        return (self.l2, self.src, self.dst, self.sport, self.dport)


def parse(frame: bytes, link: str = "eth") -> Parsed:
    """Parse a frame as delivered; lengths come from the IP headers (0 or a
    jumbo option for BIG TCP), so Ethernet padding and trailers are excluded."""
    p = Parsed()
    off = 0
    if link == "eth":
        et = struct.unpack_from("!H", frame, 12)[0]
        off = 14
        while et in (ETH_P_8021Q, ETH_P_8021AD):
            tci, inner = struct.unpack_from("!HH", frame, off)
            p.vlans.append((et, tci))
            et = inner
            off += 4
        p.ethertype = et
        p.l2 = bytes(frame[:off])
    else:
        p.ethertype = ETH_P_IP if frame[0] >> 4 == 4 else ETH_P_IPV6
    p.l3_off = off
    if p.ethertype == ETH_P_IP:
        p.version = 4
        (vihl, p.tos, p.total_len, p.ip_id, p.frag, p.ttl, p.proto, p.ip_check,
         p.src, p.dst) = struct.unpack_from("!BBHHHBBH4s4s", frame, off)
        p.ihl = (vihl & 0xF) * 4
        p.l3_end = off + (p.total_len if p.total_len else len(frame) - off)
        l4 = off + p.ihl
    elif p.ethertype == ETH_P_IPV6:
        p.version = 6
        first, p.payload_len, p.nexthdr, p.hop_limit, p.src, p.dst = struct.unpack_from("!IHBB16s16s", frame, off)
        p.tclass = (first >> 20) & 0xFF
        p.flow_label = first & 0xFFFFF
        nh = p.nexthdr
        pos = off + 40
        while nh in (IPPROTO_HOPOPTS, IPPROTO_ROUTING, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT):
            if nh == IPPROTO_FRAGMENT:
                hlen = 8
            else:
                hlen = (frame[pos + 1] + 1) * 8
            body = bytes(frame[pos:pos + hlen])
            p.exts.append((nh, body))
            if nh == IPPROTO_HOPOPTS and p.payload_len == 0 and body[2] == 0xC2:
                p.jumbo = struct.unpack_from("!I", body, 4)[0]
            nh = frame[pos]
            pos += hlen
        p.proto = nh
        plen = p.jumbo if p.jumbo is not None else p.payload_len
        p.l3_end = off + 40 + plen
        l4 = pos
    else:
        p.l3_end = len(frame)
        return p
    p.l4_off = l4
    if p.proto == IPPROTO_TCP and not (p.version == 4 and p.frag & 0x1FFF):
        (p.sport, p.dport, p.seq, p.ack, doff, p.flags, p.window, p.tcp_check,
         _urg) = struct.unpack_from("!HHIIBBHHH", frame, l4)
        p.doff = (doff >> 4) * 4
        p.tcp_options = bytes(frame[l4 + 20:l4 + p.doff])
        p.payload = bytes(frame[l4 + p.doff:p.l3_end])
    return p


def ipv4_header_valid(frame: bytes, p: Optional[Parsed] = None) -> bool:
    p = p or parse(frame)
    return ones_sum(frame[p.l3_off:p.l3_off + p.ihl]) == 0xFFFF


def tcp_segment(frame: bytes, p: Optional[Parsed] = None) -> bytes:
    p = p or parse(frame)
    return bytes(frame[p.l4_off:p.l3_end])


def tcp_checksum_valid(frame: bytes, p: Optional[Parsed] = None) -> bool:
    p = p or parse(frame)
    seg = tcp_segment(frame, p)
    return ones_sum(pseudo_header(p.version, p.src, p.dst, IPPROTO_TCP, len(seg)) + seg) == 0xFFFF


def tcp_seed_of(frame: bytes, p: Optional[Parsed] = None) -> int:
    """The pseudo-header seed the kernel writes into a GRO super-packet."""
    p = p or parse(frame)
    return pseudo_seed(p.version, p.src, p.dst, IPPROTO_TCP, p.tcp_len)
