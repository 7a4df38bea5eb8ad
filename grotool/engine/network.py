"""gro_receive_network_flush (include/net/gro.h): the L3 consistency checks
that TCP and UDP segment GRO make against the matched held packet, on the
outer header and, for an encapsulated packet, the inner one too."""

from __future__ import annotations

from .ipv4 import inet_gro_flush
from .ipv6 import ipv6_gro_flush


def network_flush(p, skb, offset, inner):
    """__gro_receive_network_flush: a version nibble of 6 selects ipv6_gro_flush."""
    if skb.data[offset] >> 4 == 6:
        return ipv6_gro_flush(p, skb, offset, inner)
    return inet_gro_flush(p, skb, offset, inner)


def gro_receive_network_flush(p, skb):
    """The first failing check's reason, or None; p.flush_layer names the header
    ("outer"/"inner") when the packet is encapsulated."""
    offsets = skb.network_offsets
    reason = network_flush(p, skb, offsets[0], 0)
    if reason is not None:
        if p.encap_mark:
            p.flush_layer = "outer"
        return reason
    if p.encap_mark:
        reason = network_flush(p, skb, offsets[1], 1)
        if reason is not None:
            p.flush_layer = "inner"
    return reason
