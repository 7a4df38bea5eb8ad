"""802.1Q / 802.1ad tags carried in the frame: net/8021q/vlan_core.c."""

from __future__ import annotations

from . import offloads
from .skb import extend_key


def vlan_gro_receive(bucket, skb, gro):
    """vlan_gro_receive: the tag (TCI, PCP/DEI included, and the inner type) is
    part of the flow identity (compare_vlan_header); QinQ recurses."""
    data = skb.data
    off = skb.off
    if skb.end < off + 4:
        skb.flush = skb.flush or "vlan_hdr_unreadable"
        return None
    inner = (data[off + 2] << 8) | data[off + 3]
    entry = offloads.packet_offload(gro.packet_offloads, inner)
    if entry is None:
        skb.flush = skb.flush or "vlan_no_inner_handler"
        return None
    extend_key(skb, data, off, 4)
    skb.off = off + 4
    if not offloads.enter_layer(skb):        # call_gro_receive
        return None
    return entry.gro_receive(bucket, skb, gro)


def vlan_gro_complete(gro, p, header, gso_type, nhoff):
    """vlan_gro_complete: complete the encapsulated protocol after the tag."""
    inner = (header[nhoff + 2] << 8) | header[nhoff + 3]
    offloads.packet_offload(gro.packet_offloads, inner).gro_complete(gro, p, header, gso_type, nhoff + 4)
