"""Segment one super-packet into the frames Linux GSO sends.

One rule per header kind (the RULES table), applied to every segment from the
innermost header outwards, so that a checksum covering inner headers (outer
UDP, GRE) sees them final.  The kernel functions each rule follows are cited
next to it.  Every TCP/UDP checksum written is the full, valid one a NIC or
software GSO puts on the wire.
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, Optional, Sequence

from .layers import GRE_CSUM, Chain, Layer, NotSegmentable, parse

TCP_FIN, TCP_PSH, TCP_CWR = 0x01, 0x08, 0x80
_from_bytes = int.from_bytes

# gso_type names (SKB_GSO_* in lower case, as the sidecars write them)
GSO_TCP = frozenset(("tcpv4", "tcpv6"))
GSO_TUNNEL = frozenset(("udp_tunnel", "udp_tunnel_csum"))
KNOWN_GSO_TYPES = frozenset((
    "tcpv4", "tcpv6", "udp_l4", "udp", "fraglist", "tcp_fixedid", "tcp_fixedid_inner", "tcp_ecn",
    "tcp_accecn", "ipxip4", "ipxip6", "gre", "gre_csum", "udp_tunnel", "udp_tunnel_csum", "dodgy",
    "partial", "esp", "sctp", "tunnel_remcsum",
))


def _ones(data) -> int:
    """Ones'-complement sum of data as 16-bit words, modulo 0xFFFF (odd length padded)."""
    if len(data) & 1:
        return (_from_bytes(data, "big") << 8) % 0xFFFF
    return _from_bytes(data, "big") % 0xFFFF


def _check(total: int) -> int:
    """csum_fold: the complement of the folded sum; a sum that folds to 0xFFFF gives 0."""
    rest = total % 0xFFFF
    return 0xFFFF - rest if rest else 0


def _pseudo(buf, ip: Layer, proto: int, length: int) -> int:
    o = ip.off
    addrs = buf[o + 12:o + 20] if ip.kind == "ipv4" else buf[o + 8:o + 40]
    return _from_bytes(addrs, "big") + proto + length


def _put16(buf: bytearray, at: int, value: int) -> None:
    buf[at] = value >> 8
    buf[at + 1] = value & 0xFF


class _Context:
    """What the rules need besides the segment: the gso_type, the chain, the
    first segment's counters, and where this segment is in the train."""

    __slots__ = ("types", "chain", "mss", "first_seq", "first_ids", "index", "count", "fraglist")

    def __init__(self, types: FrozenSet[str], chain: Chain, mss: int, data: bytes):
        self.types = types
        self.chain = chain
        self.mss = mss
        self.fraglist = "fraglist" in types
        l4 = chain.l4
        self.first_seq = _from_bytes(data[l4.off + 4:l4.off + 8], "big") if l4.kind == "tcp" else 0
        self.first_ids = {id(layer): _from_bytes(data[layer.off + 4:layer.off + 6], "big")
                          for layer in chain.layers if layer.kind == "ipv4"}
        self.index = 0
        self.count = 0


# -- the rules -----------------------------------------------------------------
def _no_change(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    """Link, VLAN, inner Ethernet, VXLAN and GENEVE headers are copied as they are."""


def _ipv4(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # inet_gso_segment: tot_len per segment; the ID increments unless the
    # gso_type has FIXEDID for this level (SKB_GSO_TCP_FIXEDID << encap);
    # ip_send_check recomputes the header checksum
    o = layer.off
    tot_len = len(buf) - o
    if tot_len > 0xFFFF:
        raise NotSegmentable(f"a segment of {tot_len} bytes does not fit an IPv4 header")
    _put16(buf, o + 2, tot_len)
    fixed = "tcp_fixedid_inner" if layer.level else "tcp_fixedid"
    if fixed not in ctx.types:
        _put16(buf, o + 4, (ctx.first_ids[id(layer)] + ctx.index) & 0xFFFF)
    _put16(buf, o + 10, 0)
    _put16(buf, o + 10, _check(_ones(buf[o:o + layer.hlen])))


def _ipv6(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # ipv6_gso_segment: payload_len per segment
    o = layer.off
    plen = len(buf) - o - 40
    if plen > 0xFFFF:
        raise NotSegmentable(f"a segment of {plen} payload bytes does not fit an IPv6 header")
    _put16(buf, o + 4, plen)


def _tcp(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # tcp_gso_segment: seq advances by mss; FIN and PSH stay on the last
    # segment only; CWR on the first only unless SKB_GSO_TCP_ACCECN.
    # skb_segment_list (fraglist): each segment keeps its own header, which
    # GRO required to equal the first one's apart from seq and checksum.
    o = layer.off
    seq = (ctx.first_seq + ctx.index * ctx.mss) & 0xFFFFFFFF
    buf[o + 4:o + 8] = seq.to_bytes(4, "big")
    if not ctx.fraglist:
        flags = buf[o + 13]
        if ctx.index < ctx.count - 1:
            flags &= ~(TCP_FIN | TCP_PSH)
        if ctx.index > 0 and "tcp_accecn" not in ctx.types:
            flags &= ~TCP_CWR
        buf[o + 13] = flags
    _l4_checksum(buf, layer, ctx, 6, o + 16, zero_is=0)


def _udp(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # __udp_gso_segment: each datagram gets its own length and a full checksum
    # (0 is sent as 0xFFFF, CSUM_MANGLED_0); the last datagram is the short one
    o = layer.off
    _put16(buf, o + 4, len(buf) - o)
    _l4_checksum(buf, layer, ctx, 17, o + 6, zero_is=0xFFFF)


def _udp_tunnel(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # __skb_udp_tunnel_segment: the outer UDP length per segment; the outer
    # checksum only with SKB_GSO_UDP_TUNNEL_CSUM (else the field stays as sent, 0)
    o = layer.off
    _put16(buf, o + 4, len(buf) - o)
    if "udp_tunnel_csum" in ctx.types:
        _l4_checksum(buf, layer, ctx, 17, o + 6, zero_is=0xFFFF)


def _gre(buf: bytearray, layer: Layer, ctx: _Context) -> None:
    # gre_gso_segment: with the checksum flag (SKB_GSO_GRE_CSUM) the GRE
    # checksum covers the GRE header and everything after it
    o = layer.off
    if (buf[o] << 8 | buf[o + 1]) & GRE_CSUM:
        _put16(buf, o + 4, 0)
        _put16(buf, o + 4, _check(_ones(memoryview(buf)[o:])))


def _l4_checksum(buf: bytearray, layer: Layer, ctx: _Context, proto: int, field: int, zero_is: int) -> None:
    o = layer.off
    _put16(buf, field, 0)
    length = len(buf) - o
    total = _pseudo(buf, ctx.chain.layers[layer.ip], proto, length) + _ones(memoryview(buf)[o:])
    _put16(buf, field, _check(total) or zero_is)


RULES: Dict[str, Callable[[bytearray, Layer, _Context], None]] = {
    "link": _no_change,
    "vlan": _no_change,
    "eth": _no_change,
    "vxlan": _no_change,
    "geneve": _no_change,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "gre": _gre,
    "udp_tunnel": _udp_tunnel,
    "tcp": _tcp,
    "udp": _udp,
}


# -- BIG TCP ---------------------------------------------------------------------
def _strip_jumbo(data: bytes, chain: Chain):
    """ipv6_hopopt_jumbo_remove: an IPv6 BIG TCP aggregate carries an 8-byte
    Hop-by-Hop header with only the Jumbo Payload option (and payload_len 0)
    in front of TCP; GSO removes it before segmenting.  Returns the frame
    without it, or None when there is none."""
    for layer in chain.layers:
        if layer.kind != "ipv6":
            continue
        o = layer.off
        if (layer.level == 0 and data[o + 4] == 0 and data[o + 5] == 0 and data[o + 6] == 0
                and len(data) >= o + 48 and data[o + 40] == 6 and data[o + 41] == 0
                and data[o + 42] == 0xC2 and data[o + 43] == 4):
            buf = bytearray(data[:o + 40] + data[o + 48:])
            buf[o + 6] = 6
            return bytes(buf)
        return None
    return None


# -- the entry point ---------------------------------------------------------------
def gso_types(gso_type: Sequence[str]) -> FrozenSet[str]:
    types = frozenset(gso_type or ())
    unknown = types - KNOWN_GSO_TYPES
    if unknown:
        raise NotSegmentable(f"unknown gso_type {', '.join(sorted(unknown))}")
    if "udp" in types:
        raise NotSegmentable("gso_type udp (UDP fragmentation offload) makes IP fragments; not supported")
    return types


def segment(data: bytes, linktype: int, gso_size: int, gso_type: Sequence[str] = (),
            tunnel: Optional[bool] = None) -> List[bytes]:
    """The frames Linux GSO makes of one super-packet ``data`` (link header
    included), in order.  A packet whose payload fits in one segment comes
    back unchanged, as the only element.

    gso_type: the SKB_GSO_* names of the packet (from a sidecar), e.g.
        ("tcpv4", "tcp_fixedid"); empty when unknown (then: IDs increment, a
        UDP tunnel is recognised by its port and carries an outer checksum when
        its checksum field is not zero).
    Raises NotSegmentable when the header chain is not one GSO segments.
    """
    if gso_size <= 0:
        raise NotSegmentable(f"gso_size {gso_size} is not positive")
    types = gso_types(gso_type)
    if tunnel is None and types:
        tunnel = bool(types & GSO_TUNNEL)
    data = bytes(data)
    chain = parse(data, linktype, tunnel)
    if not types:
        # unknown gso_type: what the headers say
        types = _types_from_headers(data, chain)
    stripped = _strip_jumbo(data, chain)
    source = data
    if stripped is not None:
        source = stripped
        chain = parse(source, linktype, tunnel)
    start = chain.payload_off
    end = chain.end
    if end < start:
        raise NotSegmentable("the IP length ends inside the headers")
    payload = memoryview(source)[start:end]
    count = -(-len(payload) // gso_size)
    if count <= 1:
        return [data]
    ctx = _Context(types, chain, gso_size, source)
    ctx.count = count
    template = source[:start]
    order = [(RULES[layer.kind], layer) for layer in reversed(chain.layers)]
    out = []
    for index in range(count):
        ctx.index = index
        buf = bytearray(template)
        buf += payload[index * gso_size:(index + 1) * gso_size]
        for rule, layer in order:
            rule(buf, layer, ctx)
        out.append(bytes(buf))
    return out


def _types_from_headers(data: bytes, chain: Chain) -> FrozenSet[str]:
    types = set()
    for layer in chain.layers:
        if layer.kind == "udp_tunnel" and (data[layer.off + 6] or data[layer.off + 7]):
            types.add("udp_tunnel_csum")
    return frozenset(types)
