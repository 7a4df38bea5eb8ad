"""Header chain of one frame, as GSO walks it: link, IP (IP-in-IP), GRE,
UDP tunnels (VXLAN, GENEVE), and the TCP or UDP layer that is segmented.

``parse`` returns the layers outermost first; each is a small record with the
kind, its offset in the frame and its header length.  The per-segment rules
for each kind live in segment.py (one table entry per kind).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ..linktypes import (LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LOOPBACK_LINKTYPES, RAW_LINKTYPES,
                         loopback_ethertype)

ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_TEB = 0x6558                      # transparent Ethernet bridging (GRE, GENEVE)
VLAN_TPIDS = (0x8100, 0x88A8)
IPV6_EXTHDRS = (0, 43, 60)              # hop-by-hop, routing, destination options
VXLAN_PORTS = (4789, 8472)              # IANA port, and the Linux driver's historic default
GENEVE_PORTS = (6081,)
GRE_CSUM, GRE_ROUTING, GRE_KEY, GRE_SEQ = 0x8000, 0x4000, 0x2000, 0x1000
MAX_TUNNEL_DEPTH = 2                    # outer + one encapsulated network header, as GRO allows

# link type -> (header length, offset of the 2-byte protocol field)
_LINK_HEADERS = {
    LINKTYPE_ETHERNET: (14, 12),
    LINKTYPE_LINUX_SLL: (16, 14),
    LINKTYPE_LINUX_SLL2: (20, 0),
}


class NotSegmentable(ValueError):
    """The frame has no header chain GSO could segment; the message says why."""


@dataclass
class Layer:
    kind: str       # link, vlan, eth (inner), ipv4, ipv6, gre, udp_tunnel, vxlan, geneve, tcp, udp
    off: int        # offset of the header in the frame
    hlen: int       # header length (IPv6: fixed header plus extension headers)
    level: int = 0  # IP layers: 0 outermost, 1 inside a tunnel (inet_gso_segment's encap)
    ip: int = -1    # L4 and tunnel layers: index of the IP layer carrying them (pseudo-header)


@dataclass
class Chain:
    layers: List[Layer]
    end: int        # end of the outermost IP datagram (frame bytes after it are a trailer)

    @property
    def l4(self) -> Layer:
        return self.layers[-1]

    @property
    def payload_off(self) -> int:
        last = self.layers[-1]
        return last.off + last.hlen

    def ip_layers(self) -> List[Layer]:
        return [layer for layer in self.layers if layer.kind in ("ipv4", "ipv6")]


def _u16(data, at: int) -> int:
    return (data[at] << 8) | data[at + 1]


def _need(data, end: int, what: str) -> None:
    if len(data) < end:
        raise NotSegmentable(f"{what} header cut short")


def parse(data: bytes, linktype: int, tunnel: Optional[bool] = None) -> Chain:
    """The header chain of ``data``.

    tunnel: for a UDP layer on a VXLAN/GENEVE port, True takes it as a tunnel
    (gso_type udp_tunnel*), False as the segmented UDP layer (udp_l4), None
    decides by whether the encapsulated headers parse.
    """
    layers: List[Layer] = []
    if linktype in _LINK_HEADERS:
        hlen, proto_at = _LINK_HEADERS[linktype]
        _need(data, hlen, "link")
        layers.append(Layer("link", 0, hlen))
        proto = _u16(data, proto_at)
        off = hlen
    elif linktype in LOOPBACK_LINKTYPES:
        _need(data, 4, "link")
        layers.append(Layer("link", 0, 4))
        proto = loopback_ethertype(linktype, data)      # the address family; 0 when not IP
        off = 4
    elif linktype in RAW_LINKTYPES:
        _need(data, 1, "IP")
        version = data[0] >> 4
        proto = ETH_P_IP if version == 4 else ETH_P_IPV6 if version == 6 else 0
        off = 0
    else:
        raise NotSegmentable(f"link type {linktype} is not supported")
    chain = Chain(layers, len(data))
    _network(data, off, proto, chain, 0, tunnel)
    return chain


def _ethertype_layers(data, off: int, proto: int, chain: Chain):
    """VLAN tags: their ethertype chain; returns (offset, protocol) after them."""
    while proto in VLAN_TPIDS:
        _need(data, off + 4, "VLAN")
        chain.layers.append(Layer("vlan", off, 4))
        proto = _u16(data, off + 2)
        off += 4
    return off, proto


def _network(data, off: int, proto: int, chain: Chain, level: int, tunnel) -> None:
    off, proto = _ethertype_layers(data, off, proto, chain)
    if level >= MAX_TUNNEL_DEPTH:
        raise NotSegmentable("more than one level of encapsulation")
    if proto == ETH_P_IP:
        _ipv4(data, off, chain, level, tunnel)
    elif proto == ETH_P_IPV6:
        _ipv6(data, off, chain, level, tunnel)
    else:
        raise NotSegmentable(f"ethertype 0x{proto:04x} is not IP")


def _ipv4(data, off: int, chain: Chain, level: int, tunnel) -> None:
    _need(data, off + 20, "IPv4")
    if data[off] >> 4 != 4:
        raise NotSegmentable("IP version is not 4")
    ihl = (data[off] & 0x0F) * 4
    if ihl < 20:
        raise NotSegmentable("IPv4 header length below 20")
    _need(data, off + ihl, "IPv4")
    if _u16(data, off + 6) & 0x3FFF:
        raise NotSegmentable("IPv4 fragment")
    tot_len = _u16(data, off + 2)
    if level == 0 and tot_len:
        # tot_len 0 is an IPv4 BIG TCP aggregate: the frame's length counts
        if tot_len < ihl or off + tot_len > len(data):
            raise NotSegmentable("IPv4 total length disagrees with the frame")
        chain.end = off + tot_len
    index = len(chain.layers)
    chain.layers.append(Layer("ipv4", off, ihl, level))
    _transport(data, off + ihl, data[off + 9], chain, index, level, tunnel)


def _ipv6(data, off: int, chain: Chain, level: int, tunnel) -> None:
    _need(data, off + 40, "IPv6")
    if data[off] >> 4 != 6:
        raise NotSegmentable("IP version is not 6")
    plen = _u16(data, off + 4)
    nexthdr = data[off + 6]
    pos = off + 40
    while nexthdr in IPV6_EXTHDRS:
        _need(data, pos + 8, "IPv6 extension")
        hlen = (data[pos + 1] + 1) * 8
        _need(data, pos + hlen, "IPv6 extension")
        nexthdr = data[pos]
        pos += hlen
    if level == 0 and plen:
        # payload length 0 with a jumbo option is an IPv6 BIG TCP aggregate
        if off + 40 + plen > len(data):
            raise NotSegmentable("IPv6 payload length disagrees with the frame")
        chain.end = off + 40 + plen
    index = len(chain.layers)
    chain.layers.append(Layer("ipv6", off, pos - off, level))
    _transport(data, pos, nexthdr, chain, index, level, tunnel)


def _transport(data, off: int, proto: int, chain: Chain, ip_index: int, level: int, tunnel) -> None:
    if proto == 6:
        _need(data, off + 20, "TCP")
        doff = (data[off + 12] >> 4) * 4
        if doff < 20:
            raise NotSegmentable("TCP data offset below 20")
        _need(data, off + doff, "TCP")
        chain.layers.append(Layer("tcp", off, doff, ip=ip_index))
    elif proto == 17:
        _need(data, off + 8, "UDP")
        dport = _u16(data, off + 2)
        if level == 0 and tunnel is not False and dport in VXLAN_PORTS + GENEVE_PORTS:
            mark = len(chain.layers)
            try:
                _udp_tunnel(data, off, dport, chain, ip_index, level)
                return
            except NotSegmentable:
                if tunnel:
                    raise
                del chain.layers[mark:]          # not a tunnel after all: plain UDP
        elif tunnel and level == 0:
            raise NotSegmentable(f"UDP port {dport} is not a known tunnel port (VXLAN 4789/8472, GENEVE 6081)")
        chain.layers.append(Layer("udp", off, 8, ip=ip_index))
    elif proto in (4, 41):
        # ipip / sit / ip4ip6 / ip6ip6
        _network(data, off, ETH_P_IP if proto == 4 else ETH_P_IPV6, chain, level + 1, tunnel)
    elif proto == 47:
        _gre(data, off, chain, ip_index, level, tunnel)
    else:
        raise NotSegmentable(f"IP protocol {proto} is not TCP or UDP")


def _udp_tunnel(data, off: int, dport: int, chain: Chain, ip_index: int, level: int) -> None:
    chain.layers.append(Layer("udp_tunnel", off, 8, ip=ip_index))
    at = off + 8
    if dport in VXLAN_PORTS:
        _need(data, at + 8, "VXLAN")
        # whatever its flags: __skb_udp_tunnel_segment never reads them, and
        # vxlan_gro_receive merges frames without the I flag too
        chain.layers.append(Layer("vxlan", at, 8))
        _inner_ethernet(data, at + 8, chain, level)
        return
    _need(data, at + 8, "GENEVE")
    if data[at] >> 6:
        raise NotSegmentable("GENEVE version is not 0")
    hlen = 8 + (data[at] & 0x3F) * 4
    _need(data, at + hlen, "GENEVE")
    proto = _u16(data, at + 2)
    chain.layers.append(Layer("geneve", at, hlen))
    if proto == ETH_P_TEB:
        _inner_ethernet(data, at + hlen, chain, level)
    else:
        _network(data, at + hlen, proto, chain, level + 1, None)


def _inner_ethernet(data, off: int, chain: Chain, level: int) -> None:
    _need(data, off + 14, "inner Ethernet")
    chain.layers.append(Layer("eth", off, 14))
    _network(data, off + 14, _u16(data, off + 12), chain, level + 1, None)


def _gre(data, off: int, chain: Chain, ip_index: int, level: int, tunnel) -> None:
    _need(data, off + 4, "GRE")
    flags = _u16(data, off)
    if flags & 0x0007:
        raise NotSegmentable("GRE version is not 0")
    if flags & GRE_ROUTING:
        raise NotSegmentable("GRE with routing")
    hlen = 4 + 4 * sum(1 for bit in (GRE_CSUM, GRE_KEY, GRE_SEQ) if flags & bit)
    _need(data, off + hlen, "GRE")
    proto = _u16(data, off + 2)
    chain.layers.append(Layer("gre", off, hlen, ip=ip_index))
    if proto == ETH_P_TEB:
        _inner_ethernet(data, off + hlen, chain, level)
    else:
        _network(data, off + hlen, proto, chain, level + 1, None)


def flow_key(data: bytes, chain: Chain) -> bytes:
    """The bytes that name a flow: every IP layer's protocol and addresses, the
    tunnel identifiers, and the segmented layer's kind and ports."""
    parts = []
    for layer in chain.layers:
        o = layer.off
        if layer.kind == "ipv4":
            parts.append(data[o + 9:o + 10] + data[o + 12:o + 20])
        elif layer.kind == "ipv6":
            parts.append(data[o + 8:o + 40])
        elif layer.kind in ("vxlan", "udp_tunnel"):
            parts.append(data[o:o + 4] if layer.kind == "udp_tunnel" else data[o + 4:o + 7])
        elif layer.kind == "gre":
            parts.append(data[o:o + layer.hlen])
        elif layer.kind in ("tcp", "udp"):
            parts.append(layer.kind.encode() + data[o:o + 4])
    return b"|".join(parts)

