"""The L3 consistency checks that TCP and UDP segment GRO make against the
matched held packet (include/net/gro.h): inet_gro_flush and ipv6_gro_flush,
and gro_receive_network_flush, which runs them on the outer header and, for an
encapsulated packet, the inner one too.  They live here, as in the kernel's
header, not in ipv4.py/ipv6.py: the IP layers call TCP directly (their
INDIRECT_CALL), and TCP calls these checks."""

from __future__ import annotations


def inet_gro_flush(p, skb, offset, inner, gro):
    """inet_gro_flush: TTL, TOS, DF must match; the IP ID must stay fixed or
    increment by one per segment, the mode chosen by the second packet.
    Returns the reason or None.  Sets p's fixed-ID bit as a side effect.

    The ID rule has three eras (gro.ipid_rule): before 6.10 (row L1) the
    flush_id/is_atomic bookkeeping of inet_gro_receive and tcp_gro_receive,
    with a fixed-ID bit per header; 6.10 to 6.17 one fixed-ID bit shared by
    the outer and inner header; from 6.18 (row L2) a fixed ID needs no DF and
    an outer ID is checked even with DF."""
    d1 = skb.data
    d2 = p.data
    at2 = offset - skb.start + p.start       # the same header in p's frame
    if d1[offset + 8] != d2[at2 + 8]:
        return "ip_ttl_changed"
    if d1[offset + 1] != d2[at2 + 1]:
        return "ip_tos_changed"
    if (d1[offset + 6] ^ d2[at2 + 6]) & 0x40:
        return "ip_df_changed"
    ipid_offset = (((d1[offset + 4] << 8) | d1[offset + 5]) - ((d2[at2 + 4] << 8) | d2[at2 + 5])) & 0xFFFF
    count = p.count & 0xFFFF
    rule = gro.ipid_rule
    if rule == 2:
        bit = 1 << inner
        if count == 1 and ipid_offset == 0:
            p.ip_fixedid |= bit
    else:
        df = d1[offset + 6] & 0x40
        if df and p.encap_mark and not inner:
            return None                      # an outer header with DF: its ID is not checked
        bit = 1 if rule == 1 else 1 << inner
        if count == 1 and df and ipid_offset == 0:
            p.ip_fixedid |= bit
    if p.ip_fixedid & bit:
        return "ip_id_not_fixed" if ipid_offset else None
    return "ip_id_not_incrementing" if ipid_offset != count else None


def ipv6_gro_flush(p, skb, offset, inner, gro):
    """ipv6_gro_flush: hop limit and traffic class (ECN included) must match."""
    d1 = skb.data
    d2 = p.data
    at2 = offset - skb.start + p.start       # the same header in p's frame
    if d1[offset + 7] != d2[at2 + 7]:
        return "ipv6_hoplimit_changed"
    if ((d1[offset] ^ d2[at2]) & 0x0F) or ((d1[offset + 1] ^ d2[at2 + 1]) & 0xF0):
        return "ipv6_tclass_changed"
    return None


def network_flush(p, skb, offset, inner, gro):
    """__gro_receive_network_flush: a version nibble of 6 selects ipv6_gro_flush
    (from 6.10, row L1; before, the IP layer that parsed the header checked it)."""
    if (skb.data[offset] >> 4 == 6) if gro.ipid_rule else (skb.inner_family if inner else skb.outer_family) == 6:
        return ipv6_gro_flush(p, skb, offset, inner, gro)
    return inet_gro_flush(p, skb, offset, inner, gro)


def gro_receive_network_flush(p, skb, gro):
    """The first failing check's reason, or None; p.flush_layer names the header
    ("outer"/"inner") when the packet is encapsulated."""
    offsets = skb.network_offsets
    reason = network_flush(p, skb, offsets[0], 0, gro)
    if reason is not None:
        if p.encap_mark:
            p.flush_layer = "outer"
        return reason
    if p.encap_mark:
        reason = network_flush(p, skb, offsets[1], 1, gro)
        if reason is not None:
            p.flush_layer = "inner"
    return reason
