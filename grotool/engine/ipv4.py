"""IPv4: inet_gro_receive / inet_gro_complete (net/ipv4/af_inet.c).  The L3
checks TCP and UDP make against a held packet, inet_gro_flush, are in
network.py (include/net/gro.h)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from .csum import ip_header_ok, replace16
from .offloads import GRO_RECURSION_LIMIT, INET_OFFLOADS, PacketOffload
from .skb import defer_key
from .tcp import tcp4_gro_complete, tcp4_gro_receive

IP_DF = 0x4000
IP_MF = 0x2000
IP_OFFSET = 0x1FFF
IP_RESERVED = 0x8000
_MF_OR_OFFSET = IP_MF | IP_OFFSET


def inet_gro_receive(bucket, skb, gro):
    data = skb.data
    off = skb.off
    n = skb.end
    if n < off + 20:
        skb.flush = skb.flush or "ip_hdr_unreadable"
        return None
    raw = data     # the same bytes read in place (a C pointer in the compiled build): 20 are present
    proto = raw[off + 9]
    entry = INET_OFFLOADS[proto]
    if entry is None:
        # inet_gro_receive: no gro_receive for this protocol (ICMP, SCTP, ...)
        skb.flush = skb.flush or "ip_no_l4_handler"
        return None
    if raw[off] != 0x45:
        # inet_gro_receive: options (or not version 4) are never aggregated
        skb.flush = skb.flush or "ip_options_or_version"
        return None
    tot_len = (raw[off + 2] << 8) | raw[off + 3]
    frag_off = (raw[off + 6] << 8) | raw[off + 7]
    if frag_off & _MF_OR_OFFSET:
        skb.flush = skb.flush or "ip_fragment"
        return None
    if not ip_header_ok(data, off):
        # ip_fast_csum is checked in software whatever ip_summed says
        gro.stats.ip_csum_bad += 1
        skb.flush = skb.flush or "ip_bad_hdr_csum"
        return None
    skb.proto = proto
    if skb.flush is None:
        # the flag value: length differs from the bytes present, or a bit other than DF
        if tot_len != n - off:
            skb.flush = "ip_len_mismatch"
        elif frag_off & IP_RESERVED:
            skb.flush = "ip_reserved_flag"
    # same flow: saddr, daddr, protocol (copied into the key by the next layer's extend_key)
    defer_key(skb, off + 12, 8, off + 9, 1)
    mark = skb.encap_mark
    if not mark:
        skb.outer_family = 4
    else:
        skb.inner_family = 4
    skb.network_offsets[mark] = off
    skb.off = off + 20
    # indirect_call_gro_receive: gro_recursion_inc_test, inlined
    depth = skb.recursion + 1
    skb.recursion = depth
    if depth == GRO_RECURSION_LIMIT:
        skb.flush = skb.flush or "recursion_limit"
        return None
    receive = entry[0]
    if receive is tcp4_gro_receive:
        return tcp4_gro_receive(bucket, skb, gro)     # indirect_call_gro_receive: TCP called directly
    return receive(bucket, skb, gro)


def inet_gro_complete(gro, p, header, gso_type, nhoff):
    """inet_gro_complete: new total length (0 above 65535, BIG TCP) with the header
    checksum patched incrementally, then the L4 complete."""
    total = len(header) - nhoff + p.payload_len
    new_len = total if total <= 0xFFFF else 0
    old_len = (header[nhoff + 2] << 8) | header[nhoff + 3]
    check = (header[nhoff + 10] << 8) | header[nhoff + 11]
    check = replace16(check, old_len, new_len)
    header[nhoff + 2] = new_len >> 8
    header[nhoff + 3] = new_len & 0xFF
    header[nhoff + 10] = check >> 8
    header[nhoff + 11] = check & 0xFF
    complete = INET_OFFLOADS[header[nhoff + 9]][1]
    if complete is tcp4_gro_complete:
        tcp4_gro_complete(gro, p, header, gso_type, nhoff + 20)    # INDIRECT_CALL_2: TCP called directly
    else:
        complete(gro, p, header, gso_type, nhoff + 20)


@cython.cclass
class InetOffload(PacketOffload):
    """IPv4's packet_offload: its handlers called directly (INDIRECT_CALL_INET)."""

    __slots__ = ()

    def receive(self, bucket, skb, gro):
        if cython.compiled:
            # the GRO core's own Bucket and GroNode (GroNode.receive): passed on without a type test
            return inet_gro_receive(cython.cast(Bucket, bucket), skb, cython.cast(GroNode, gro))
        return inet_gro_receive(bucket, skb, gro)

    def complete(self, gro, p, header, gso_type, nhoff) -> None:
        inet_gro_complete(gro, p, header, gso_type, nhoff)
