"""Tunnels: IP-in-IP (ipip, sit, ip6ip6, ip4ip6: net/ipv4/af_inet.c,
net/ipv6/ip6_offload.c), GRE (net/ipv4/gre_offload.c), and the UDP tunnels
VXLAN and GENEVE with the inner Ethernet header they carry.  One tunnel level
only: the first tunnel layer sets encap_mark and a second one flushes."""

from __future__ import annotations

from . import csum, ipv4, ipv6
from .offloads import enter_layer, packet_offload
from .skb import extend_key
from .tcp import checksum_verified, lco_valid


def _enter(skb) -> bool:
    if skb.encap_mark:
        skb.flush = skb.flush or "tunnel_nested"
        return False
    skb.encap_mark = 1
    return True


def ipip_gro_receive(bucket, skb, gro):
    """ipip_gro_receive / ip4ip6_gro_receive: an inner IPv4 header."""
    return ipv4.inet_gro_receive(bucket, skb, gro) if _enter(skb) else None


def sit_ip6ip6_gro_receive(bucket, skb, gro):
    """sit_ip6ip6_gro_receive: an inner IPv6 header."""
    return ipv6.ipv6_gro_receive(bucket, skb, gro) if _enter(skb) else None


def ipip_gro_complete(gro, p, header, gso_type, nhoff):
    """ipip_gro_complete (IPv4 outer) / ip4ip6_gro_complete (IPv6 outer)."""
    p.encapsulation = 1
    gso_type.append("ipxip4" if p.outer_family == 4 else "ipxip6")
    ipv4.inet_gro_complete(gro, p, header, gso_type, nhoff)


def sit_ip6ip6_gro_complete(gro, p, header, gso_type, nhoff):
    """sit_gro_complete (IPv4 outer) / ip6ip6_gro_complete (IPv6 outer)."""
    p.encapsulation = 1
    gso_type.append("ipxip4" if p.outer_family == 4 else "ipxip6")
    ipv6.ipv6_gro_complete(gro, p, header, gso_type, nhoff)


# -- GRE: net/ipv4/gre_offload.c (IPv4 and IPv6 protocol 47) --------------------
GRE_CSUM = 0x8000
GRE_KEY = 0x2000
ETH_P_TEB = 0x6558


def gre_gro_receive(bucket, skb, gro):
    """gre_gro_receive: version 0 with only the K and C flags; same tunnel =
    same flags, protocol and key; then the inner protocol's handler."""
    if not _enter(skb):
        return None
    data = skb.data
    off = skb.off
    if skb.end < off + 4:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    flags = (data[off] << 8) | data[off + 1]
    if flags & ~(GRE_KEY | GRE_CSUM) & 0xFFFF:
        # sequence numbers, routing, a nonzero version: GSO could not rebuild them
        skb.flush = skb.flush or "gre_unsupported"
        return None
    inner = (data[off + 2] << 8) | data[off + 3]
    entry = packet_offload(gro.packet_offloads, inner)
    if entry is None:
        skb.flush = skb.flush or "gre_unsupported"
        return None
    hlen = 4 + (4 if flags & GRE_KEY else 0) + (4 if flags & GRE_CSUM else 0)
    if skb.end < off + hlen:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    if flags & GRE_CSUM and skb.flush is None and gro.verify_l4:
        # skb_gro_checksum_simple_validate: GRE header and everything after it
        total = csum.sum16(memoryview(data)[off:skb.end])
        if total and not (gro.csum_auto and lco_valid(data, off, total, off + hlen,
                                                        None if inner == ETH_P_TEB else inner, skb.end)):
            gro.stats.csum_bad += 1
            skb.flush = "gre_csum_bad"
            return None
        if total:
            gro.stats.csum_offloaded += 1    # filled by local checksum offload over an inner seed
        else:
            gro.stats.csum_verified += 1
        checksum_verified(skb)
    # same tunnel: flags + protocol, and with the K flag the word after them: the key,
    # or, with the C flag too, the checksum field (gre_gro_receive reads greh + 1)
    extend_key(skb, data, off, 4, off + 4, 4 if flags & GRE_KEY else 0)
    skb.off = off + hlen
    if not enter_layer(skb):
        return None
    return entry.gro_receive(bucket, skb, gro)


def gre_gro_complete(gro, p, header, gso_type, nhoff):
    """gre_gro_complete: SKB_GSO_GRE (assigned), then the inner protocol's complete.
    The GRE checksum, if any, is left as the first segment had it."""
    p.encapsulation = 1
    gso_type[:] = ["gre"]
    flags = (header[nhoff] << 8) | header[nhoff + 1]
    hlen = 4 + (4 if flags & GRE_KEY else 0) + (4 if flags & GRE_CSUM else 0)
    inner = (header[nhoff + 2] << 8) | header[nhoff + 3]
    packet_offload(gro.packet_offloads, inner).gro_complete(gro, p, header, gso_type, nhoff + hlen)


# -- UDP tunnels: reached from udp_gro_receive through the socket's gro_receive --
def vxlan_gro_receive(bucket, skb, gro):
    """vxlan_gro_receive (drivers/net/vxlan/vxlan_core.c): the 8-byte header's
    flags and VNI must match (nothing else is checked: no remote checksum
    offload configured), then eth_gro_receive."""
    data = skb.data
    off = skb.off
    if skb.end < off + 8:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    extend_key(skb, data, off, 8)
    skb.off = off + 8
    if not enter_layer(skb):
        return None
    return eth_gro_receive(bucket, skb, gro)


def vxlan_gro_complete(gro, p, header, gso_type, nhoff):
    """vxlan_gro_complete: eth_gro_complete after the VXLAN header."""
    eth_gro_complete(gro, p, header, gso_type, nhoff + 8)


def _geneve_hlen(data, off):
    return 8 + (data[off] & 0x3F) * 4


def geneve_gro_receive(bucket, skb, gro):
    """geneve_gro_receive (drivers/net/geneve.c): version 0 and no OAM; same
    tunnel = same option length and identical header and option bytes; the
    inner protocol from proto_type (Ethernet for ETH_P_TEB)."""
    data = skb.data
    off = skb.off
    if skb.end < off + 8:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    if data[off] >> 6 != 0 or data[off + 1] & 0x80:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    hlen = _geneve_hlen(data, off)
    if skb.end < off + hlen:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    inner = (data[off + 2] << 8) | data[off + 3]
    extend_key(skb, data, off, hlen)
    skb.off = off + hlen
    if inner == ETH_P_TEB:
        if not enter_layer(skb):
            return None
        return eth_gro_receive(bucket, skb, gro)
    entry = packet_offload(gro.packet_offloads, inner)
    if entry is None:
        skb.flush = skb.flush or "no_l2_handler"
        return None
    if not enter_layer(skb):
        return None
    return entry.gro_receive(bucket, skb, gro)


def geneve_gro_complete(gro, p, header, gso_type, nhoff):
    hlen = _geneve_hlen(header, nhoff)
    inner = (header[nhoff + 2] << 8) | header[nhoff + 3]
    if inner == ETH_P_TEB:
        eth_gro_complete(gro, p, header, gso_type, nhoff + hlen)
    else:
        packet_offload(gro.packet_offloads, inner).gro_complete(gro, p, header, gso_type, nhoff + hlen)


# -- inner Ethernet: eth_gro_receive / eth_gro_complete (net/ethernet/eth.c) -----
# inner ethertypes a tunnel's inner Ethernet header plausibly carries
_INNER_ETHERTYPES = (0x0800, 0x86DD, 0x8100, 0x88A8, 0x0806)


def udp_tunnel_payload(data, at, n) -> str:
    """"vxlan" or "geneve" when the UDP payload at ``at`` starts with that
    tunnel's header (VXLAN: the I flag; GENEVE: version 0, protocol
    Transparent Ethernet Bridging) and an inner Ethernet header; "" otherwise.
    Not a GRO rule: it tells a datagram with no GRO path that a VXLAN or
    GENEVE device on its port would have taken (the replay's hint names it).
    The frame ends at data[n]."""
    if n < at + 8 + 14:
        return ""
    if data[at] & 0x08 and not (data[at + 1] | data[at + 2] | data[at + 3] | data[at + 7]):
        kind, inner = "vxlan", at + 8
    elif data[at] >> 6 == 0 and (data[at + 2] << 8 | data[at + 3]) == ETH_P_TEB:
        kind, inner = "geneve", at + _geneve_hlen(data, at)
    else:
        return ""
    if n < inner + 14 or (data[inner + 12] << 8 | data[inner + 13]) not in _INNER_ETHERTYPES:
        return ""
    return kind


def eth_gro_receive(bucket, skb, gro):
    """eth_gro_receive: the inner Ethernet header (addresses and type, as
    compare_ether_header) is part of the flow identity."""
    data = skb.data
    off = skb.off
    if skb.end < off + 14:
        skb.flush = skb.flush or "tunnel_hdr_bad"
        return None
    ethertype = (data[off + 12] << 8) | data[off + 13]
    extend_key(skb, data, off, 14)
    entry = packet_offload(gro.packet_offloads, ethertype)
    if entry is None:
        skb.flush = skb.flush or "no_l2_handler"
        return None
    skb.off = off + 14
    if not enter_layer(skb):
        return None
    return entry.gro_receive(bucket, skb, gro)


def eth_gro_complete(gro, p, header, gso_type, nhoff):
    ethertype = (header[nhoff + 12] << 8) | header[nhoff + 13]
    packet_offload(gro.packet_offloads, ethertype).gro_complete(gro, p, header, gso_type, nhoff + 14)
