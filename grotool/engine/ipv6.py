"""IPv6: ipv6_gro_receive / ipv6_gro_complete (net/ipv6/ip6_offload.c) and the
extension-header walk (exthdrs_offload.c).  ipv6_gro_flush, the L3 check TCP
and UDP make against a held packet, is in network.py (include/net/gro.h)."""

from __future__ import annotations

from struct import pack
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from .offloads import INET6_OFFLOADS, PacketOffload, enter_layer
from .skb import extend_key_masked
from .tcp import tcp6_gro_complete, tcp6_gro_receive

# Extension headers registered with INET6_PROTO_GSO_EXTHDR: Hop-by-Hop (v6.9+),
# Routing, Destination Options.  Fragment (44), AH (51), none (59) have no handler.
EXTHDRS = frozenset((0, 43, 60))
IPV6_MAXPLEN = 65535
# the same-flow bits of the header's first 7 bytes (extend_key_masked): version
# and flow label without the traffic class, not the payload length, next header
KEY_FIELDS = b"\xf0\x0f\xff\xff\x00\x00\xff"
# before 5.18 (row V1) the hop limit, the 8th byte, is compared as part of the flow too
KEY_FIELDS_WITH_HOPLIMIT = KEY_FIELDS + b"\xff"


def ipv6_gro_receive(bucket, skb, gro):
    data = skb.data
    off = skb.off
    if skb.end < off + 40:
        skb.flush = skb.flush or "ipv6_hdr_unreadable"
        return None
    if not skb.encap_mark:
        skb.outer_family = 6
    else:
        skb.inner_family = 6
    skb.network_offsets[skb.encap_mark] = off
    raw = data     # the same bytes read in place (a C pointer in the compiled build): 40 are present
    pending = ((raw[off + 4] << 8) | raw[off + 5]) != skb.end - off - 40
    nexthdr = raw[off + 6]
    pos = off + 40
    entry = INET6_OFFLOADS[nexthdr]
    if entry is None:
        # ipv6_gro_pull_exthdrs: follow HBH / Routing / DstOpts headers
        while nexthdr in EXTHDRS:
            if skb.end < pos + 8:
                skb.flush = skb.flush or "ipv6_hdr_unreadable"
                return None
            hlen = (data[pos + 1] + 1) * 8
            if skb.end < pos + hlen:
                skb.flush = skb.flush or "ipv6_hdr_unreadable"
                return None
            nexthdr = data[pos]
            pos += hlen
        entry = INET6_OFFLOADS[nexthdr]
        if entry is None:
            skb.flush = skb.flush or "ipv6_no_l4_handler"
            return None
    skb.proto = nexthdr
    # same flow: version + flow label (traffic class excluded), addresses,
    # next header, and the bytes of any extension headers
    extend_key_masked(skb, data, off, gro.ipv6_key_fields, off + 8, pos - off - 8)   # then addresses, extension headers
    if pending and skb.flush is None:
        skb.flush = "ipv6_payload_len_mismatch"
    skb.off = pos
    if not enter_layer(skb):        # indirect_call_gro_receive_l4
        return None
    receive = entry[0]
    if receive is tcp6_gro_receive:
        return tcp6_gro_receive(bucket, skb, gro)     # indirect_call_gro_receive_l4: TCP called directly
    return receive(bucket, skb, gro)


def _exthdrs_end(header, nhoff):
    """(offset after the extension headers, the protocol that follows them)"""
    nexthdr = header[nhoff + 6]
    pos = nhoff + 40
    while nexthdr in EXTHDRS:
        nexthdr = header[pos]
        pos += (header[pos + 1] + 1) * 8
    return pos, nexthdr


def ipv6_gro_complete(gro, p, header, gso_type, nhoff):
    """ipv6_gro_complete: payload length, or above 65535 (BIG TCP) a Hop-by-Hop
    Jumbo Payload header inserted after the fixed header with payload_len 0."""
    thoff, l4 = _exthdrs_end(header, nhoff)
    payload = len(header) - nhoff - 40 + p.payload_len
    if payload > IPV6_MAXPLEN:
        hbh = bytes((header[nhoff + 6], 0, 0xC2, 4)) + pack("!I", payload + 8)
        header[nhoff + 40:nhoff + 40] = hbh
        header[nhoff + 6] = 0
        header[nhoff + 4] = 0
        header[nhoff + 5] = 0
        thoff += 8
    else:
        header[nhoff + 4] = payload >> 8
        header[nhoff + 5] = payload & 0xFF
    complete = INET6_OFFLOADS[l4][1]
    if complete is tcp6_gro_complete:
        tcp6_gro_complete(gro, p, header, gso_type, thoff)      # INDIRECT_CALL_2: TCP called directly
    else:
        complete(gro, p, header, gso_type, thoff)


@cython.cclass
class Ipv6Offload(PacketOffload):
    """IPv6's packet_offload: its handlers called directly (INDIRECT_CALL_INET)."""

    __slots__ = ()

    def receive(self, bucket, skb, gro):
        if cython.compiled:
            # the GRO core's own Bucket and GroNode (GroNode.receive): passed on without a type test
            return ipv6_gro_receive(cython.cast(Bucket, bucket), skb, cython.cast(GroNode, gro))
        return ipv6_gro_receive(bucket, skb, gro)

    def complete(self, gro, p, header, gso_type, nhoff) -> None:
        ipv6_gro_complete(gro, p, header, gso_type, nhoff)
