"""Frame handling for the kernel oracle: parsing, checksums, link types and
the mapping of delivered packets back to the input frames they are made of.

Pure functions on bytes, no privileges needed.  Deliberately independent of
grotool.engine: the oracle judges the simulation, so it does its own (small)
arithmetic; headers are read with grotool.dissect, outside the engine.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..dissect import (ETH_P_IP, ETH_P_IPV6, ETH_P_TEB, IPPROTO_GRE, IPPROTO_IPIP, IPPROTO_IPV6,  # noqa: F401
                       IPPROTO_TCP, IPPROTO_UDP, Checksum, Dissection, addr_text, dissect)
from ..linktypes import LOOPBACK_LINKTYPES, loopback_ethertype

ETH_HLEN = 14
VLAN_TPIDS = (0x8100, 0x88A8)
NO_PORTS: frozenset = frozenset()

# Fixed addresses of the Ethernet header given to raw-IP, loopback and cooked (SLL) frames.
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
# parsing (grotool.dissect does the walking)
# -----------------------------------------------------------------------------
@dataclass
class Parsed:
    """Ethernet (+tags) / IP [/ IP-in-IP, GRE, VXLAN or GENEVE ...] / TCP or UDP.

    The offsets are those of the innermost IP and L4 headers (GRO merges on
    the inner transport of a tunnel); ``outer`` holds the addresses of the
    enclosing IP headers, which are part of the flow, and ``tunnels`` the
    rest of each tunnel's identity (kind, key or VNI, outer UDP ports).
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
    tunnels: Tuple[tuple, ...] = ()     # per tunnel: (kind, key, outer sport, outer dport, inner VLANs)
    dissection: Optional[Dissection] = field(default=None, repr=False, compare=False)

    @property
    def flow(self) -> tuple:
        return (self.proto, self.src, self.dst, self.sport, self.dport, self.vlans, self.outer, self.tunnels)


def dissect_frame(frame: bytes, *, vxlan_ports: Iterable[int] = NO_PORTS,
                  geneve_ports: Iterable[int] = NO_PORTS) -> Dissection:
    """The dissection of an Ethernet frame as GRO reads its headers (gro_dissect).
    UDP is looked into as VXLAN/GENEVE only on the ports given: by default none,
    as on a host without such a device."""
    return gro_dissect(frame, LINKTYPE_ETHERNET, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)


_MAX_IPV6_NIBBLES = 8      # more than the IP headers dissect() walks through


def gro_dissect(frame: bytes, linktype: int = LINKTYPE_ETHERNET, *, vxlan_ports: Iterable[int] = NO_PORTS,
                geneve_ports: Iterable[int] = NO_PORTS) -> Dissection:
    """dissect(), except that an IPv6 header is taken whatever its version nibble.

    grotool.dissect reports an IPv6 ethertype (or IPv6 in IPv4/IPv6 protocol
    41, GRE or GENEVE protocol 0x86DD) in front of a header whose version
    nibble is not 6 as a problem and stops there; GRO does not look at that
    nibble (ipv6_gro_receive takes the header on the ethertype or protocol that
    led to it; only inet_gro_receive checks IPv4's 0x45), and neither does the
    simulation.  The oracle must see such a frame as GRO does, so it dissects a
    copy with each such nibble set to 6: the offsets, addresses and checksum
    fields found are those of the frame itself (the nibble is no part of an
    L4 pseudo-header), and callers compute every checksum over the frame's own
    bytes, so the nibble the kernel sees is kept wherever an enclosing UDP or
    GRE checksum covers it.  ``dissect`` itself is unchanged for users."""
    d = dissect(frame, linktype, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)
    if d.problem is None or d.l4_proto is not None:
        return d
    data = frame if type(frame) is bytes else bytes(frame)
    for _ in range(_MAX_IPV6_NIBBLES):
        at = _ipv6_nibble_at(data, d)
        if at is None:
            break
        patched = data[:at] + bytes([0x60 | (data[at] & 0x0F)]) + data[at + 1:]
        again = dissect(patched, linktype, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)
        if len(again.layers) <= len(d.layers):
            break                                   # the nibble was not what stopped it
        data, d = patched, again
    return d


def _ipv6_nibble_at(data: bytes, d: Dissection) -> Optional[int]:
    """Where dissect() stopped at an IPv6 header for its version nibble: the
    offset of that header when the last header read announces IPv6 next and
    the 40 bytes are there but the nibble is not 6, else None.  (gro_dissect
    keeps a patch only when the walk then gets further.)"""
    if d.l4_proto is not None or not d.layers:
        return None
    last = d.layers[-1]
    if last.name in ("eth", "vlan"):
        ipv6 = last.get("ethertype") == ETH_P_IPV6
    elif last.name in ("sll", "sll2"):
        ipv6 = last.get("protocol") == ETH_P_IPV6
    elif last.name == "ipv4":
        ipv6 = last.get("proto") == IPPROTO_IPV6 and not (last.get("mf") or last.get("frag_offset"))
    elif last.name.startswith("ipv6"):
        ipv6 = last.get("next_header") == IPPROTO_IPV6
    elif last.name in ("gre", "geneve"):
        ipv6 = last.get("protocol") == ETH_P_IPV6
    else:
        return None
    at = last.offset + last.length
    if not ipv6 or len(data) < at + 40 or data[at] >> 4 == 6:
        return None
    return at


def _parsed(frame: bytes, d: Dissection) -> Optional[Parsed]:
    if d.l4_proto is None or d.fragment or d.frag_header:
        return None                                 # GRO never looks past an IPv6 Fragment header either
    end = min(d.l3_end, len(frame))
    return Parsed(d.l3, d.l4, d.family, d.l4_proto, d.src, d.dst, d.sport, d.dport, d.vlans,
                  tuple((t.src, t.dst, t.ip_proto) for t in d.tunnels), end, d.payload_off,
                  max(0, end - d.payload_off), d.seq, d.tcp_flags if d.l4_proto == IPPROTO_TCP else 0, d.check_at,
                  tuple((t.kind, t.key, t.sport, t.dport, t.vlans) for t in d.tunnels), d)


def parse(frame: bytes, *, vxlan_ports: Iterable[int] = NO_PORTS,
          geneve_ports: Iterable[int] = NO_PORTS) -> Optional[Parsed]:
    """The innermost TCP/UDP flow of an Ethernet frame, or None for anything else
    (not TCP/UDP, a fragment or IPv6 Fragment header, a header cut short)."""
    return _parsed(frame, dissect_frame(frame, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports))


def tcp_flag_string(flags: int) -> str:
    return "".join(ch for i, ch in enumerate(_TCP_FLAG_LETTERS) if flags & (1 << i))


def _addr(raw: bytes) -> str:
    return addr_text(raw)


def flow_json(p: Optional[Parsed]) -> Optional[dict]:
    if p is None:
        return None
    doc = {"proto": "tcp" if p.proto == IPPROTO_TCP else "udp", "family": p.family, "src": _addr(p.src),
           "dst": _addr(p.dst), "sport": p.sport, "dport": p.dport, "vlan": list(p.vlans)}
    if p.outer:
        doc["outer"] = [{"src": _addr(s), "dst": _addr(d), "proto": proto, "kind": t[0], "key": t[1],
                         "sport": t[2], "dport": t[3]}
                        for (s, d, proto), t in zip(p.outer, p.tunnels)]
    return doc


# -----------------------------------------------------------------------------
# checksums of injected frames
# -----------------------------------------------------------------------------
def _pseudo_sum(frame: bytes, p: Parsed) -> int:
    return _pseudo_header_sum(p, p.l4_end - p.l4)


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


def _pseudo_header_sum(c, length: int) -> int:
    """The pseudo-header's sum of a Checksum or a Parsed (src, dst, proto, family)."""
    total = ones_sum(c.src) + ones_sum(c.dst) + c.proto
    return total + (length if c.family == 4 else (length >> 16) + (length & 0xFFFF))


def _covered_sum(buf, c: Checksum, end: int) -> int:
    """Ones'-complement sum over what checksum c covers (its field included)."""
    total = ones_sum(bytes(buf[c.start:end]))
    if c.kind in ("tcp", "udp"):
        total += _pseudo_header_sum(c, end - c.start)
    return total


def _checksum_end(buf, c: Checksum) -> Optional[int]:
    """End of c's coverage clipped to the frame, or None when c cannot be computed."""
    end = min(c.end, len(buf))
    if end < c.start + c.hlen or len(buf) < c.at + 2:
        return None
    return end


def _checksum_ok(buf, c: Checksum) -> bool:
    end = _checksum_end(buf, c)
    if end is None:
        return False
    if c.kind == "udp" and buf[c.at:c.at + 2] == b"\0\0":
        return True
    return _covered_sum(buf, c, end) % 0xFFFF == 0


def _checksum_holds_seed(buf, c: Checksum) -> bool:
    """A TCP/UDP checksum field holding exactly the folded pseudo-header sum of
    its datagram (what a sender with checksum offload leaves): holds_seed for
    any level of the encapsulation."""
    if c.kind not in ("tcp", "udp"):
        return False
    end = _checksum_end(buf, c)
    if end is None:
        return False
    return ((buf[c.at] << 8) | buf[c.at + 1]) == fold16(_pseudo_header_sum(c, end - c.start))


def _fix_checksum(buf: bytearray, c: Checksum) -> None:
    end = _checksum_end(buf, c)
    if end is None:
        return
    if c.kind == "udp" and buf[c.at:c.at + 2] == b"\0\0":
        return                                      # a UDP datagram without checksum stays so
    buf[c.at:c.at + 2] = b"\0\0"
    buf[c.at:c.at + 2] = struct.pack("!H", finish(_covered_sum(buf, c, end)))


def fix_checksums(frame: bytes, *, ip_header: bool = True, vxlan_ports: Iterable[int] = NO_PORTS,
                  geneve_ports: Iterable[int] = NO_PORTS, linktype: int = LINKTYPE_ETHERNET,
                  any_ipv6_version: bool = False) -> bytes:
    """Recompute the IPv4 header checksum(s), the innermost TCP/UDP checksum
    (when parse() finds one), and then, inside out, those of the enclosing GRE
    (C flag) and UDP tunnel headers (a zero UDP checksum stays zero).  A frame
    of another ``linktype`` (SLL, SLL2, raw IP) is dissected as such; with
    ``any_ipv6_version`` as GRO reads it (gro_dissect: the oracle's injection),
    else as grotool.dissect reports it (replay's --l4-csum full)."""
    ports = {"vxlan_ports": vxlan_ports, "geneve_ports": geneve_ports}
    d = gro_dissect(frame, linktype, **ports) if any_ipv6_version else dissect(frame, linktype, **ports)
    buf = bytearray(frame)
    if ip_header:
        for c in d.checksums:
            if c.kind == "ipv4":
                _fix_checksum(buf, c)
    innermost_ok = _parsed(frame, d) is not None
    for c in reversed(d.checksums):
        if c.kind == "ipv4" or (c.at == d.check_at and not innermost_ok):
            continue
        _fix_checksum(buf, c)
    return bytes(buf)


def fix_seed_checksum(frame: bytes, *, vxlan_ports: Iterable[int] = NO_PORTS,
                      geneve_ports: Iterable[int] = NO_PORTS) -> Tuple[bytes, bool]:
    """(frame, changed): every TCP/UDP checksum of the encapsulation chain
    whose field holds its pseudo-header seed is recomputed, innermost first
    (the innermost only when parse() finds it), so that each enclosing one is
    computed over the filled-in inner ones.  A tunnel checksum (GRE, UDP) that
    was right before and covers a recomputed field is recomputed too, to stay
    right; any other checksum is left as it is: a bad one stays bad, and one
    filled by local checksum offload over an inner seed (lco_csum) becomes
    right once that seed is filled in.  IP header checksums are left alone.
    ``changed``: some seed was recomputed."""
    d = dissect_frame(frame, vxlan_ports=vxlan_ports, geneve_ports=geneve_ports)
    innermost_ok = _parsed(frame, d) is not None
    chain = [c for c in d.checksums if c.kind != "ipv4"]
    seeds = {c.at for c in chain if (c.at != d.check_at or innermost_ok) and _checksum_holds_seed(frame, c)}
    if not seeds:
        return frame, False
    right = {c.at for c in chain if c.at not in seeds and _checksum_ok(frame, c)}
    buf = bytearray(frame)
    fixed: List[int] = []
    for c in reversed(chain):                       # dissect() lists them outermost first
        if c.at in seeds or (c.at in right and any(c.start <= at < c.end for at in fixed)):
            _fix_checksum(buf, c)
            fixed.append(c.at)
    return bytes(buf), True


# -----------------------------------------------------------------------------
# link types
# -----------------------------------------------------------------------------
def to_ethernet(linktype: int, data: bytes) -> bytes:
    """The frame as veth takes it.

    Ethernet is used as it is.  The other link types get an Ethernet header
    with the fixed destination 02:00:00:00:00:02 (a cooked capture does not
    record the destination; docs/captures.md): raw IP (101, 228, 229, 12, 14)
    and BSD loopback (NULL 0, LOOP 108) get the fixed source
    02:00:00:00:00:01 and the ethertype of the IP version nibble (raw: 4 or 6)
    or of the address family (loopback: 2 IPv4; 24, 28, 30 IPv6); any other
    gets ethertype 0, not IP, as in the simulation's link layer.  Linux cooked
    captures (SLL 113, SLL2 276) keep their protocol field and, when the
    address is 6 bytes (sll_halen), their source address (the fixed one
    otherwise).  The oracle's output is Ethernet in every case.
    Raises ValueError when the record is too short for its link header.
    """
    if linktype == LINKTYPE_ETHERNET:
        if len(data) < ETH_HLEN:
            raise ValueError(f"{len(data)} bytes is shorter than an Ethernet header")
        return data
    if linktype in LINKTYPE_RAW_TYPES:
        if not data:
            raise ValueError("empty raw IP record")
        version = data[0] >> 4
        # another version is not IP to the simulation's link layer (ethertype 0,
        # no GRO handler), so the kernel gets no IP ethertype for it either
        etype = ETH_P_IP if version == 4 else ETH_P_IPV6 if version == 6 else 0
        return FAKE_DST_MAC + FAKE_SRC_MAC + struct.pack("!H", etype) + data
    if linktype in LOOPBACK_LINKTYPES:
        if len(data) < 4:
            raise ValueError(f"{len(data)} bytes is shorter than a BSD loopback header")
        return FAKE_DST_MAC + FAKE_SRC_MAC + struct.pack("!H", loopback_ethertype(linktype, data)) + data[4:]
    if linktype == LINKTYPE_LINUX_SLL:
        if len(data) < 16:
            raise ValueError(f"{len(data)} bytes is shorter than a Linux cooked (SLL) header")
        src = data[6:12] if data[4:6] == b"\x00\x06" else FAKE_SRC_MAC
        return FAKE_DST_MAC + src + data[14:16] + data[16:]
    if linktype == LINKTYPE_LINUX_SLL2:
        if len(data) < 20:
            raise ValueError(f"{len(data)} bytes is shorter than a Linux cooked v2 (SLL2) header")
        src = data[12:18] if data[11] == 6 else FAKE_SRC_MAC
        return FAKE_DST_MAC + src + data[0:2] + data[20:]
    raise ValueError(f"unsupported link type {linktype}")


# -----------------------------------------------------------------------------
# mapping delivered packets to input frames
# -----------------------------------------------------------------------------
def _payload(frame: bytes, p: Parsed) -> bytes:
    return frame[p.payload_off:p.payload_off + p.payload]


def map_batch(inputs: Sequence[bytes], delivered: Sequence[Tuple[bytes, int, bool]], *,
              vxlan_ports: Iterable[int] = NO_PORTS, geneve_ports: Iterable[int] = NO_PORTS) -> List[List[int]]:
    """For each delivered packet (bytes, gso_segs, is_gso) of one batch, the
    indices (into ``inputs``: the frames as injected) of the frames it covers.

    TCP: same flow and Ethernet addresses, consecutive sequence numbers starting at the packet's, and
    payload bytes equal to the slice they would occupy.  UDP aggregates: same
    flow, payloads concatenating to the packet's.  A non-GSO packet first
    looks for an input with exactly its bytes.  Inputs are taken in input
    order and each is used once, except that a packet that went up alone gets
    the input with exactly its bytes back from an aggregate that took it for a
    look-alike.  An empty list means no match was found.
    Through VXLAN (``vxlan_ports``) the inner flow and payload are followed.
    A GRE level is one flow by what GRO compares (see _gro_flow), not by its key.
    """
    ports = {"vxlan_ports": vxlan_ports, "geneve_ports": geneve_ports}
    parsed = [parse(f, **ports) for f in inputs]
    flows = [None if q is None else _gro_flow(f, q) for f, q in zip(inputs, parsed)]
    used = [False] * len(inputs)
    by_flow: Dict[tuple, List[int]] = {}
    for i, q in enumerate(parsed):
        if q is not None:
            by_flow.setdefault(flows[i], []).append(i)
    result: List[List[int]] = []
    for data, segs, is_gso in delivered:
        covers: List[int] = []
        p = parse(data, **ports)
        if not is_gso:
            for i, f in enumerate(inputs):
                if not used[i] and f == data:
                    covers = [i]
                    break
        if not covers and p is not None:
            body = _payload(data, p)
            # GRO merges only frames with equal Ethernet addresses (gro_list_prepare,
            # compare_ether_header): a retransmission from another MAC is another packet
            # nor frames whose VXLAN header differs (vxlan_gro_prepare_receive compares
            # the flags and VNI words: a frame without the I flag is another flow)
            vxlan = _vxlan_headers(data, p)
            cands = [i for i in by_flow.get(_gro_flow(data, p), ()) if not used[i] and inputs[i][:12] == data[:12]
                     and (not vxlan or _vxlan_headers(inputs[i], parsed[i]) == vxlan)]
            if p.proto == IPPROTO_TCP:
                covers = _map_tcp(inputs, parsed, cands, p, body, segs)
            else:
                covers = _map_udp(inputs, parsed, cands, body, segs)
        for i in covers:
            used[i] = True
        result.append(covers)
    _swap_look_alikes(inputs, parsed, flows, delivered, result)
    return result


def _gro_flow(frame: bytes, p: Parsed) -> tuple:
    """The flow as GRO tells flows apart: ``p.flow`` with each GRE level named
    by the bytes gre_gro_receive compares instead of by its key.  That function
    holds two packets for the same tunnel when their GRE flags and protocol
    words are equal and, when the K flag is set, the 32-bit word right after
    that 4-byte base header.  With the C flag also set that word is the
    checksum (and reserved) field, not the key, which comes after it: packets
    with different keys but the same checksum word are one flow (and packets
    with one key and different checksum words are not).  The GRE checksum
    covers the key, so two keys with the same ones' complement sum
    (0x00010000 and 0x00000001) give equal checksums over equal inner bytes."""
    d = p.dissection
    if d is None or not any(o[2] == IPPROTO_GRE for o in p.outer):
        return p.flow
    gre = iter(layer.offset for layer in d.layers if layer.name == "gre")
    tunnels = []
    for t, outer in zip(p.tunnels, p.outer):
        if outer[2] == IPPROTO_GRE:
            off = next(gre)
            base = bytes(frame[off:off + 4])
            word = bytes(frame[off + 4:off + 8]) if base[0] & 0x20 else b""     # GRE_KEY
            t = (t[0], (base, word)) + tuple(t[2:])
        tunnels.append(t)
    return (p.proto, p.src, p.dst, p.sport, p.dport, p.vlans, p.outer, tuple(tunnels))


def _vxlan_headers(frame: bytes, p: Parsed) -> Tuple[bytes, ...]:
    """The 8-byte VXLAN header of each VXLAN level of the frame, outermost first."""
    if p.dissection is None:
        return ()
    return tuple(frame[t.inner - 8:t.inner] for t in p.dissection.tunnels if t.kind == "vxlan")


def _swap_look_alikes(inputs, parsed, flows, delivered, result: List[List[int]]) -> None:
    """A packet that went up alone is the input with exactly its bytes.  When
    another packet was given that input and this packet a look-alike (same
    flow, sequence and payload, another IP header: a flow label, an extension
    header), the kernel merged the look-alike: swap the two."""
    for n, (data, _segs, is_gso) in enumerate(delivered):
        cov = result[n]
        if is_gso or len(cov) != 1 or inputs[cov[0]] == data or parsed[cov[0]] is None:
            continue
        mine = parsed[cov[0]]
        for m, other in enumerate(result):
            if m == n:
                continue
            hit = next((k for k, i in enumerate(other) if inputs[i] == data), None)
            if hit is None:
                continue
            q = parsed[other[hit]]
            if q is not None and (flows[other[hit]], q.seq) == (flows[cov[0]], mine.seq) and \
                    _payload(inputs[other[hit]], q) == _payload(inputs[cov[0]], mine):
                other[hit], cov[0] = cov[0], other[hit]
            break


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
