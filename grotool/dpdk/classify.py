"""The application's packet classification DPDK's GRO reads: each mbuf's
packet_type and l2/l3/l4 header lengths (a NIC or the application sets them;
lib/gro never parses headers itself).  One classifier serves the model and the
oracle harness, so both see the same mbufs.

What it sets, per frame: Ethernet with up to any number of 802.1Q/802.1ad tags
(l2_len covers them), then an IPv4 header whose version is 4 and whose IHL
bytes are present (L3_IPV4, or L3_IPV4_EXT with options), then L4_TCP with
l4_len = the data offset (0 when the TCP header is not all there or the packet
is a non-first fragment) or L4_UDP (l4_len 8).  Anything else carries only its
L2 type: no GRO type matches it.
"""

from __future__ import annotations

from typing import NamedTuple

from .params import VXLAN_PORT

# rte_mbuf_ptype.h (DPDK 22.11)
PTYPE_L2_ETHER = 0x00000001
PTYPE_L3_IPV4 = 0x00000010
PTYPE_L3_IPV4_EXT = 0x00000030
PTYPE_L4_TCP = 0x00000100
PTYPE_L4_UDP = 0x00000200
PTYPE_TUNNEL_MASK = 0x0000f000
PTYPE_TUNNEL_VXLAN = 0x00003000
PTYPE_INNER_L2_ETHER = 0x00010000
PTYPE_INNER_L3_IPV4 = 0x00100000
PTYPE_INNER_L3_IPV4_EXT = 0x00200000
PTYPE_INNER_L3_MASK = 0x00f00000
PTYPE_INNER_L4_TCP = 0x01000000
PTYPE_INNER_L4_UDP = 0x02000000

_VLAN_TPIDS = (0x8100, 0x88A8)


class Mbuf(NamedTuple):
    packet_type: int
    l2_len: int
    l3_len: int
    l4_len: int
    outer_l2_len: int = 0
    outer_l3_len: int = 0


NOT_IP = Mbuf(0, 0, 0, 0)


def _ipv4(frame, start: int):
    """(L2 length, IPv4 header length or 0) of the Ethernet frame at start."""
    n = len(frame)
    if n < start + 14:
        return 0, 0
    l2 = 14
    ethertype = (frame[start + 12] << 8) | frame[start + 13]
    while ethertype in _VLAN_TPIDS and n >= start + l2 + 4:
        ethertype = (frame[start + l2 + 2] << 8) | frame[start + l2 + 3]
        l2 += 4
    ip = start + l2
    if ethertype != 0x0800 or n < ip + 20 or frame[ip] >> 4 != 4:
        return l2, 0
    l3 = (frame[ip] & 15) * 4
    if l3 < 20 or n < ip + l3:
        return l2, 0
    return l2, l3


def _l4(frame, ip: int, l3: int):
    """(TCP or UDP ptype bits, l4_len, first fragment) of the IPv4 packet at ip."""
    proto = frame[ip + 9]
    first_fragment = ((frame[ip + 6] & 0x1F) | frame[ip + 7]) == 0
    if proto == 6:
        l4 = 0
        if first_fragment and len(frame) >= ip + l3 + 20:
            l4 = (frame[ip + l3 + 12] >> 4) * 4
            if len(frame) < ip + l3 + l4:
                l4 = 0
        return PTYPE_L4_TCP, l4, first_fragment
    if proto == 17:
        return PTYPE_L4_UDP, 8, first_fragment
    return 0, 0, first_fragment


def classify(frame: bytes, vxlan_ports=(VXLAN_PORT,)) -> Mbuf:
    """The packet_type and header lengths an application would give this Ethernet frame.

    An unfragmented IPv4/UDP datagram to one of ``vxlan_ports`` with a VXLAN header
    and an inner Ethernet header is a tunnel packet, set as DPDK's tunnel offloads
    expect: outer_l2_len/outer_l3_len the outer headers, l2_len = UDP + VXLAN + inner
    Ethernet (what gro_vxlan_tcp4_reassemble adds to the UDP header to find the inner
    IPv4 header), l3_len/l4_len the inner ones, and the INNER_* type bits."""
    l2, l3 = _ipv4(frame, 0)
    if not l3:
        return Mbuf(PTYPE_L2_ETHER, l2, 0, 0) if l2 else NOT_IP
    ptype = PTYPE_L2_ETHER | (PTYPE_L3_IPV4 if l3 == 20 else PTYPE_L3_IPV4_EXT)
    l4_type, l4, first_fragment = _l4(frame, l2, l3)
    udp = l2 + l3
    if (l4_type == PTYPE_L4_UDP and first_fragment and not frame[l2 + 6] & 0x20 and len(frame) >= udp + 16
            and ((frame[udp + 2] << 8) | frame[udp + 3]) in vxlan_ports):
        in_l2, in_l3 = _ipv4(frame, udp + 16)
        if in_l2:
            ptype |= l4_type | PTYPE_TUNNEL_VXLAN | PTYPE_INNER_L2_ETHER
            if not in_l3:
                return Mbuf(ptype, 16 + in_l2, 0, 0, l2, l3)
            ptype |= PTYPE_INNER_L3_IPV4 if in_l3 == 20 else PTYPE_INNER_L3_IPV4_EXT
            in_type, in_l4, _ = _l4(frame, udp + 16 + in_l2, in_l3)
            ptype |= in_type << 16          # L4_TCP/L4_UDP -> INNER_L4_TCP/INNER_L4_UDP
            return Mbuf(ptype, 16 + in_l2, in_l3, in_l4, l2, l3)
    return Mbuf(ptype | l4_type, l2, l3, l4)


def is_ipv4_tcp(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_TCP_PKT: IPv4, L4 TCP bits, no tunnel."""
    return bool(ptype & PTYPE_L3_IPV4) and (ptype & PTYPE_L4_TCP) == PTYPE_L4_TCP and not ptype & PTYPE_TUNNEL_MASK


def is_vxlan_tcp4(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_VXLAN_TCP4_PKT: outer IPv4/UDP, VXLAN, inner IPv4 and TCP."""
    return (bool(ptype & PTYPE_L3_IPV4) and ptype & PTYPE_L4_UDP == PTYPE_L4_UDP
            and ptype & PTYPE_TUNNEL_VXLAN == PTYPE_TUNNEL_VXLAN and ptype & PTYPE_INNER_L4_TCP == PTYPE_INNER_L4_TCP
            and ptype & PTYPE_INNER_L3_MASK in (0x00100000, 0x00200000, 0x00400000))


def is_vxlan_udp4(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_VXLAN_UDP4_PKT: outer IPv4/UDP, VXLAN, inner IPv4 and UDP."""
    return (bool(ptype & PTYPE_L3_IPV4) and ptype & PTYPE_L4_UDP == PTYPE_L4_UDP
            and ptype & PTYPE_TUNNEL_VXLAN == PTYPE_TUNNEL_VXLAN and ptype & PTYPE_INNER_L4_UDP == PTYPE_INNER_L4_UDP
            and ptype & PTYPE_INNER_L3_MASK in (0x00100000, 0x00200000, 0x00400000))


def is_ipv4_udp(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_UDP_PKT: IPv4, L4 UDP bits, no tunnel."""
    return bool(ptype & PTYPE_L3_IPV4) and (ptype & PTYPE_L4_UDP) == PTYPE_L4_UDP and not ptype & PTYPE_TUNNEL_MASK
