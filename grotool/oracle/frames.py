"""Frame handling for the kernel oracle: parsing, checksums, link types and
the mapping of delivered packets back to the input frames they are made of.

Pure functions on bytes, no privileges needed.  Deliberately independent of
grotool.engine: the oracle judges the simulation, so it does its own (small)
arithmetic.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

ETH_HLEN = 14
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_TEB = 0x6558
VLAN_TPIDS = (0x8100, 0x88A8)
IPPROTO_IPIP = 4
IPPROTO_TCP = 6
IPPROTO_UDP = 17
IPPROTO_IPV6 = 41
IPPROTO_GRE = 47
IPV6_EXT_SIMPLE = (0, 43, 60)
VXLAN_HLEN = 8          # hop-by-hop, routing, destination options

# Fixed addresses of the Ethernet header given to raw-IP and cooked (SLL) frames.
FAKE_DST_MAC = bytes.fromhex("020000000002")
FAKE_SRC_MAC = bytes.fromhex("020000000001")

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW_TYPES = (101, 228, 229, 12, 14)
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276
_TCP_FLAG_LETTERS = "FSRPAUEC"


# -----------------------------------------------------------------------------
# checksum arithmetic (RFC 1071)
# -----------------------------------------------------------------------------
def ones_sum(data) -> int:
    """Ones'-complement sum of 16-bit big-endian words, unfolded modulo 0xFFFF."""
    n = int.from_bytes(data, "big")
    if len(data) & 1:
        n <<= 8
    return n % 0xFFFF


def fold16(value: int) -> int:
    while value >> 16:
        value = (value & 0xFFFF) + (value >> 16)
    return value


def finish(total: int) -> int:
    """Checksum field for a sum taken with the field zeroed."""
    value = total % 0xFFFF
    return (~value) & 0xFFFF if value else 0xFFFF


# -----------------------------------------------------------------------------
# parsing
# -----------------------------------------------------------------------------
@dataclass
class Parsed:
    """Ethernet (+tags) / IP [/ IP-in-IP or GRE ...] / TCP or UDP.

    The offsets are those of the innermost IP and L4 headers (GRO merges on
    the inner transport of a tunnel); ``outer`` holds the addresses of the
    enclosing IP headers, which are part of the flow.
    """

    l3: int                 # innermost IP header
    l4: int                 # innermost TCP/UDP header
    family: int             # 4 or 6 (of the innermost IP header)
    proto: int              # 6 or 17
    src: bytes
    dst: bytes
    sport: int
    dport: int
    vlans: Tuple[int, ...]
    outer: Tuple[Tuple[bytes, bytes, int], ...]
    l4_end: int             # end of the L4 datagram as the IP length says (clipped)
    payload_off: int
    payload: int            # L4 payload bytes
    seq: Optional[int] = None
    flags: int = 0          # TCP flags byte
    check_at: int = 0       # offset of the L4 checksum field

    @property
    def flow(self) -> tuple:
        return (self.proto, self.src, self.dst, self.sport, self.dport, self.vlans, self.outer)


def _ip_layer(frame: bytes, off: int, etype: int):
    """(family, proto, l4 offset, end, src, dst) of the IP header at off, or None."""
    n = len(frame)
    if etype == ETH_P_IP:
        if n < off + 20 or frame[off] >> 4 != 4:
            return None
        ihl = (frame[off] & 0x0F) * 4
        if ihl < 20 or n < off + ihl:
            return None
        if struct.unpack_from("!H", frame, off + 6)[0] & 0x3FFF:
            return None                             # a fragment: no transport header to speak of
        end = off + struct.unpack_from("!H", frame, off + 2)[0]
        return 4, frame[off + 9], off + ihl, end, frame[off + 12:off + 16], frame[off + 16:off + 20]
    if etype == ETH_P_IPV6:
        if n < off + 40 or frame[off] >> 4 != 6:
            return None
        proto = frame[off + 6]
        l4 = off + 40
        end = l4 + struct.unpack_from("!H", frame, off + 4)[0]
        for _ in range(8):
            if proto not in IPV6_EXT_SIMPLE or n < l4 + 8:
                break
            proto, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
        return 6, proto, l4, end, frame[off + 8:off + 24], frame[off + 24:off + 40]
    return None


def parse(frame: bytes, vxlan_ports=()) -> Optional[Parsed]:
    """The innermost TCP/UDP flow of an Ethernet frame, or None for anything else.
    UDP to one of ``vxlan_ports`` (where the host has a VXLAN device) is seen
    through: VXLAN header, inner Ethernet, inner IP."""
    if len(frame) < ETH_HLEN:
        return None
    etype = (frame[12] << 8) | frame[13]
    off = ETH_HLEN
    vlans: List[int] = []
    while etype in VLAN_TPIDS and len(frame) >= off + 4:
        vlans.append(((frame[off] << 8) | frame[off + 1]) & 0x0FFF)
        etype = (frame[off + 2] << 8) | frame[off + 3]
        off += 4
    outer: List[Tuple[bytes, bytes, int]] = []
    for _depth in range(4):
        ip = _ip_layer(frame, off, etype)
        if ip is None:
            return None
        family, proto, l4, end, src, dst = ip
        if proto in (IPPROTO_IPIP, IPPROTO_IPV6):
            outer.append((src, dst, proto))
            off, etype = l4, (ETH_P_IP if proto == IPPROTO_IPIP else ETH_P_IPV6)
            continue
        if proto == IPPROTO_GRE and len(frame) >= l4 + 4:
            gflags, gproto = struct.unpack_from("!HH", frame, l4)
            if gflags & 0x4FFF:                     # routing, version != 0, or unknown bits
                return None
            glen = 4 + 4 * bool(gflags & 0x8000) + 4 * bool(gflags & 0x2000) + 4 * bool(gflags & 0x1000)
            outer.append((src, dst, proto))
            off = l4 + glen
            if gproto == ETH_P_TEB:
                if len(frame) < off + ETH_HLEN:
                    return None
                gproto = (frame[off + 12] << 8) | frame[off + 13]
                off += ETH_HLEN
            etype = gproto
            continue
        if proto == IPPROTO_UDP and vxlan_ports and len(frame) >= l4 + 8 + VXLAN_HLEN + ETH_HLEN \
                and struct.unpack_from("!H", frame, l4 + 2)[0] in vxlan_ports:
            outer.append((src, dst, proto))
            off = l4 + 8 + VXLAN_HLEN + ETH_HLEN
            etype = (frame[off - 2] << 8) | frame[off - 1]
            continue
        break
    else:
        return None
    end = min(end, len(frame))
    if proto == IPPROTO_TCP and len(frame) >= l4 + 20:
        sport, dport, seq = struct.unpack_from("!HHI", frame, l4)
        thlen = (frame[l4 + 12] >> 4) * 4
        if thlen < 20:
            return None
        return Parsed(off, l4, family, proto, src, dst, sport, dport, tuple(vlans), tuple(outer), end,
                      l4 + thlen, max(0, end - l4 - thlen), seq, frame[l4 + 13], l4 + 16)
    if proto == IPPROTO_UDP and len(frame) >= l4 + 8:
        sport, dport = struct.unpack_from("!HH", frame, l4)
        return Parsed(off, l4, family, proto, src, dst, sport, dport, tuple(vlans), tuple(outer), end,
                      l4 + 8, max(0, end - l4 - 8), None, 0, l4 + 6)
    return None


def tcp_flag_string(flags: int) -> str:
    return "".join(ch for i, ch in enumerate(_TCP_FLAG_LETTERS) if flags & (1 << i))


def _addr(raw: bytes) -> str:
    return str(ipaddress.ip_address(raw))


def flow_json(p: Optional[Parsed]) -> Optional[dict]:
    if p is None:
        return None
    doc = {"proto": "tcp" if p.proto == IPPROTO_TCP else "udp", "family": p.family, "src": _addr(p.src),
           "dst": _addr(p.dst), "sport": p.sport, "dport": p.dport, "vlan": list(p.vlans)}
    if p.outer:
        doc["outer"] = [{"src": _addr(s), "dst": _addr(d), "proto": proto} for s, d, proto in p.outer]
    return doc


# -----------------------------------------------------------------------------
# checksums of injected frames
# -----------------------------------------------------------------------------
def _pseudo_sum(frame: bytes, p: Parsed) -> int:
    length = p.l4_end - p.l4
    if p.family == 4:
        return ones_sum(p.src) + ones_sum(p.dst) + p.proto + length
    return ones_sum(p.src) + ones_sum(p.dst) + (length >> 16) + (length & 0xFFFF) + p.proto


def l4_check_field(frame: bytes, p: Parsed) -> Optional[int]:
    if len(frame) < p.check_at + 2:
        return None
    return (frame[p.check_at] << 8) | frame[p.check_at + 1]


def holds_seed(frame: bytes, p: Optional[Parsed] = None) -> bool:
    """The TCP/UDP checksum field holds exactly the folded pseudo-header sum:
    what a sender with checksum offload leaves in a frame it captures
    (the same test as `grotool replay --csum auto`)."""
    p = parse(frame) if p is None else p
    if p is None or p.l4_end < p.payload_off:
        return False
    value = l4_check_field(frame, p)
    return value is not None and value == fold16(_pseudo_sum(frame, p))


def l4_checksum_ok(frame: bytes, p: Optional[Parsed] = None) -> bool:
    p = parse(frame) if p is None else p
    if p is None or p.l4_end < p.payload_off:
        return False
    if p.proto == IPPROTO_UDP and l4_check_field(frame, p) == 0:
        return True
    return (_pseudo_sum(frame, p) + ones_sum(frame[p.l4:p.l4_end])) % 0xFFFF == 0


def _fix_l4(buf: bytearray, p: Parsed) -> None:
    if p.l4_end < p.payload_off or len(buf) < p.check_at + 2:
        return
    if p.proto == IPPROTO_UDP and buf[p.check_at:p.check_at + 2] == b"\0\0":
        return                                      # a UDP datagram without checksum stays so
    buf[p.check_at:p.check_at + 2] = b"\0\0"
    total = _pseudo_sum(bytes(buf), p) + ones_sum(bytes(buf[p.l4:p.l4_end]))
    buf[p.check_at:p.check_at + 2] = struct.pack("!H", finish(total))


def _ipv4_headers(frame: bytes) -> List[int]:
    """Offsets of every IPv4 header along the way to the innermost transport."""
    out = []
    if len(frame) < ETH_HLEN:
        return out
    etype = (frame[12] << 8) | frame[13]
    off = ETH_HLEN
    while etype in VLAN_TPIDS and len(frame) >= off + 4:
        etype = (frame[off + 2] << 8) | frame[off + 3]
        off += 4
    for _depth in range(4):
        if etype == ETH_P_IP and len(frame) >= off + 20 and frame[off] >> 4 == 4:
            ihl = (frame[off] & 0x0F) * 4
            if ihl < 20 or len(frame) < off + ihl:
                break
            out.append(off)
            proto = frame[off + 9]
            if proto in (IPPROTO_IPIP, IPPROTO_IPV6) and not struct.unpack_from("!H", frame, off + 6)[0] & 0x3FFF:
                off, etype = off + ihl, (ETH_P_IP if proto == IPPROTO_IPIP else ETH_P_IPV6)
                continue
        elif etype == ETH_P_IPV6:
            ip = _ip_layer(frame, off, etype)
            if ip is not None and ip[1] in (IPPROTO_IPIP, IPPROTO_IPV6):
                off, etype = ip[2], (ETH_P_IP if ip[1] == IPPROTO_IPIP else ETH_P_IPV6)
                continue
        break
    return out


def fix_checksums(frame: bytes, *, ip_header: bool = True) -> bytes:
    """Recompute the IPv4 header checksum(s) and the TCP/UDP checksum."""
    buf = bytearray(frame)
    if ip_header:
        for off in _ipv4_headers(frame):
            ihl = (buf[off] & 0x0F) * 4
            buf[off + 10:off + 12] = b"\0\0"
            buf[off + 10:off + 12] = struct.pack("!H", finish(ones_sum(bytes(buf[off:off + ihl]))))
    p = parse(bytes(buf))
    if p is not None:
        _fix_l4(buf, p)
    return bytes(buf)


def fix_seed_checksum(frame: bytes) -> Tuple[bytes, bool]:
    """(frame, changed): the L4 checksum recomputed only if the field holds the
    pseudo-header seed; IP header checksums are left alone."""
    p = parse(frame)
    if p is None or not holds_seed(frame, p):
        return frame, False
    buf = bytearray(frame)
    _fix_l4(buf, p)
    return bytes(buf), True


# -----------------------------------------------------------------------------
# link types
# -----------------------------------------------------------------------------
def to_ethernet(linktype: int, data: bytes) -> bytes:
    """The frame as veth takes it.

    Ethernet is used as it is.  Raw IP (101, 228, 229, 12, 14) and Linux cooked
    captures (SLL 113, SLL2 276) get a fixed Ethernet header (02:00:00:00:00:01
    -> 02:00:00:00:00:02); the ethertype comes from the IP version nibble (raw)
    or the SLL protocol field.  The oracle's output is Ethernet in every case.
    Raises ValueError when the record is too short for its link header.
    """
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < ETH_HLEN:
            raise ValueError(f"{len(data)} bytes is shorter than an Ethernet header")
        return data
    if linktype in LINKTYPE_RAW_TYPES:
        if not data:
            raise ValueError("empty raw IP record")
        etype = ETH_P_IPV6 if data[0] >> 4 == 6 else ETH_P_IP
        return FAKE_DST_MAC + FAKE_SRC_MAC + struct.pack("!H", etype) + data
    if linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16:
            raise ValueError(f"{len(data)} bytes is shorter than a Linux cooked (SLL) header")
        return FAKE_DST_MAC + FAKE_SRC_MAC + data[14:16] + data[16:]
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(data) < 20:
            raise ValueError(f"{len(data)} bytes is shorter than a Linux cooked v2 (SLL2) header")
        return FAKE_DST_MAC + FAKE_SRC_MAC + data[0:2] + data[20:]
    raise ValueError(f"unsupported link type {linktype}")


# -----------------------------------------------------------------------------
# mapping delivered packets to input frames
# -----------------------------------------------------------------------------
def _payload(frame: bytes, p: Parsed) -> bytes:
    return frame[p.payload_off:p.payload_off + p.payload]


def map_batch(inputs: Sequence[bytes], delivered: Sequence[Tuple[bytes, int, bool]],
              vxlan_ports=()) -> List[List[int]]:
    """For each delivered packet (bytes, gso_segs, is_gso) of one batch, the
    indices (into ``inputs``: the frames as injected) of the frames it covers.

    TCP: same flow, consecutive sequence numbers starting at the packet's, and
    payload bytes equal to the slice they would occupy.  UDP aggregates: same
    flow, payloads concatenating to the packet's.  A non-GSO packet first
    looks for an input with exactly its bytes.  Inputs are taken in input
    order and each is used once.  An empty list means no match was found.
    Through VXLAN (``vxlan_ports``) the inner flow and payload are followed.
    """
    parsed = [parse(f, vxlan_ports) for f in inputs]
    used = [False] * len(inputs)
    by_flow: Dict[tuple, List[int]] = {}
    for i, q in enumerate(parsed):
        if q is not None:
            by_flow.setdefault(q.flow, []).append(i)
    result: List[List[int]] = []
    for data, segs, is_gso in delivered:
        covers: List[int] = []
        p = parse(data, vxlan_ports)
        if not is_gso:
            for i, f in enumerate(inputs):
                if not used[i] and f == data:
                    covers = [i]
                    break
        if not covers and p is not None:
            body = _payload(data, p)
            cands = [i for i in by_flow.get(p.flow, ()) if not used[i]]
            if p.proto == IPPROTO_TCP:
                covers = _map_tcp(inputs, parsed, cands, p, body, segs)
            else:
                covers = _map_udp(inputs, parsed, cands, body, segs)
        for i in covers:
            used[i] = True
        result.append(covers)
    return result


def _map_tcp(inputs, parsed, cands: List[int], p: Parsed, body: bytes, segs: int) -> List[int]:
    for k, first in enumerate(cands):
        q = parsed[first]
        if q.seq != p.seq or _payload(inputs[first], q) != body[:q.payload]:
            continue
        covers, pos = [first], q.payload
        for i in cands[k + 1:]:
            if len(covers) >= segs or pos >= len(body):
                break
            r = parsed[i]
            if r.seq == (p.seq + pos) & 0xFFFFFFFF and r.payload and \
                    _payload(inputs[i], r) == body[pos:pos + r.payload]:
                covers.append(i)
                pos += r.payload
        if pos == len(body) and (len(covers) == segs or segs <= 1):
            return covers
    return []


def _map_udp(inputs, parsed, cands: List[int], body: bytes, segs: int) -> List[int]:
    for k, first in enumerate(cands):
        covers, pos = [], 0
        for i in cands[k:]:
            r = parsed[i]
            chunk = _payload(inputs[i], r)
            if body[pos:pos + len(chunk)] == chunk and (chunk or not body):
                covers.append(i)
                pos += len(chunk)
                if pos >= len(body) or len(covers) >= segs:
                    break
            elif covers:
                continue
            else:
                break
        if covers and pos == len(body) and len(covers) == max(segs, 1):
            return covers
    return []
