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

# rte_mbuf_ptype.h (DPDK 22.11)
PTYPE_L2_ETHER = 0x00000001
PTYPE_L3_IPV4 = 0x00000010
PTYPE_L3_IPV4_EXT = 0x00000030
PTYPE_L4_TCP = 0x00000100
PTYPE_L4_UDP = 0x00000200
PTYPE_TUNNEL_MASK = 0x0000f000

_VLAN_TPIDS = (0x8100, 0x88A8)


class Mbuf(NamedTuple):
    packet_type: int
    l2_len: int
    l3_len: int
    l4_len: int


NOT_IP = Mbuf(0, 0, 0, 0)


def classify(frame: bytes) -> Mbuf:
    """The packet_type and header lengths an application would give this Ethernet frame."""
    n = len(frame)
    if n < 14:
        return NOT_IP
    l2 = 14
    ethertype = (frame[12] << 8) | frame[13]
    while ethertype in _VLAN_TPIDS and n >= l2 + 4:
        ethertype = (frame[l2 + 2] << 8) | frame[l2 + 3]
        l2 += 4
    if ethertype != 0x0800 or n < l2 + 20 or frame[l2] >> 4 != 4:
        return Mbuf(PTYPE_L2_ETHER, l2, 0, 0)
    l3 = (frame[l2] & 15) * 4
    if l3 < 20 or n < l2 + l3:
        return Mbuf(PTYPE_L2_ETHER, l2, 0, 0)
    ptype = PTYPE_L2_ETHER | (PTYPE_L3_IPV4 if l3 == 20 else PTYPE_L3_IPV4_EXT)
    proto = frame[l2 + 9]
    first_fragment = ((frame[l2 + 6] & 0x1F) | frame[l2 + 7]) == 0
    if proto == 6:
        l4 = 0
        if first_fragment and n >= l2 + l3 + 20:
            l4 = (frame[l2 + l3 + 12] >> 4) * 4
            if n < l2 + l3 + l4:
                l4 = 0
        return Mbuf(ptype | PTYPE_L4_TCP, l2, l3, l4)
    if proto == 17:
        return Mbuf(ptype | PTYPE_L4_UDP, l2, l3, 8)
    return Mbuf(ptype, l2, l3, 0)


def is_ipv4_tcp(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_TCP_PKT: IPv4, L4 TCP bits, no tunnel."""
    return bool(ptype & PTYPE_L3_IPV4) and (ptype & PTYPE_L4_TCP) == PTYPE_L4_TCP and not ptype & PTYPE_TUNNEL_MASK


def is_ipv4_udp(ptype: int) -> bool:
    """rte_gro.c IS_IPV4_UDP_PKT: IPv4, L4 UDP bits, no tunnel."""
    return bool(ptype & PTYPE_L3_IPV4) and (ptype & PTYPE_L4_UDP) == PTYPE_L4_UDP and not ptype & PTYPE_TUNNEL_MASK
