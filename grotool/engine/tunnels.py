"""IP-in-IP tunnels: ipip (IPv4 in IPv4), sit (IPv6 in IPv4), ip6ip6 and
ip4ip6 (net/ipv4/af_inet.c, net/ipv6/ip6_offload.c).  One tunnel level only:
the first tunnel layer sets encap_mark and a second one flushes."""

from __future__ import annotations

from . import ipv4, ipv6


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
    gso_type.append("ipxip4" if p.outer_family == 4 else "ipxip6")
    ipv4.inet_gro_complete(gro, p, header, gso_type, nhoff)


def sit_ip6ip6_gro_complete(gro, p, header, gso_type, nhoff):
    """sit_gro_complete (IPv4 outer) / ip6ip6_gro_complete (IPv6 outer)."""
    gso_type.append("ipxip4" if p.outer_family == 4 else "ipxip6")
    ipv6.ipv6_gro_complete(gro, p, header, gso_type, nhoff)
