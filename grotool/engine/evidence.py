"""Evidence for a decision: the header field that differed, with both values.

Derived after the fact from the incoming packet, the held packet it was
compared with and the reason, by re-reading the two headers: nothing here
runs unless decision events are on (events.py).  The incoming packet's value
comes first, then the held packet's (``ttl 63 != 64``, ``seq 14481 !=
expected 13033``).  Sequence and acknowledgement numbers are the absolute
values in the headers.  An empty string when the reason needs no evidence.
"""

from __future__ import annotations

from struct import error as StructError, unpack_from
from typing import Callable, Dict, Optional

from .config import GRO_HASH_BUCKETS, MAX_GRO_SKBS
from .tcp import option_offsets

TCP_FLAG_NAMES = ((0x01, "FIN"), (0x02, "SYN"), (0x04, "RST"), (0x08, "PSH"), (0x10, "ACK"),
                  (0x20, "URG"), (0x40, "ECE"), (0x80, "CWR"))


def tcp_flags_text(data: bytes, th: int) -> str:
    """The flag bits of the TCP header at th, e.g. "ACK|PSH" ("none" when clear)."""
    bits = data[th + 13]
    names = [name for bit, name in TCP_FLAG_NAMES if bits & bit]
    if data[th + 12] & 0x01:
        names.append("AE")
    if data[th + 12] & 0x0E:
        names.append(f"reserved 0x{data[th + 12] & 0x0E:x}")
    return "|".join(names) or "none"


def _u16(data, at):
    return (data[at] << 8) | data[at + 1]


def _u32(data, at):
    return unpack_from("!I", data, at)[0]


def _l3(skb, layer: str) -> int:
    return skb.network_offsets[1 if layer == "inner" else 0]


def _held(p, skb, at: int) -> int:
    """The offset in p.data of the header at ``at`` in skb.data (each frame
    may lie anywhere in its string)."""
    return at - skb.start + p.start


def _prefix(layer: str) -> str:
    return f"{layer} " if layer else ""


# -- L3 differences against the held packet (inet_gro_flush, ipv6_gro_flush) ----
def _ttl(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    return f"{_prefix(layer)}ttl {skb.data[at + 8]} != {p.data[pat + 8]}"


def _tos(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    return f"{_prefix(layer)}tos 0x{skb.data[at + 1]:02x} != 0x{p.data[pat + 1]:02x}"


def _df(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    return f"{_prefix(layer)}df {(skb.data[at + 6] >> 6) & 1} != {(p.data[pat + 6] >> 6) & 1}"


def _ipid_incrementing(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    expected = (_u16(p.data, pat + 4) + p.count) & 0xFFFF
    return f"{_prefix(layer)}ip id 0x{_u16(skb.data, at + 4):04x} != expected 0x{expected:04x}"


def _ipid_fixed(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    return f"{_prefix(layer)}ip id 0x{_u16(skb.data, at + 4):04x} != fixed 0x{_u16(p.data, pat + 4):04x}"


def _hoplimit(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)
    return f"{_prefix(layer)}hop limit {skb.data[at + 7]} != {p.data[pat + 7]}"


def _tclass(p, skb, gro, layer):
    at = _l3(skb, layer)
    pat = _held(p, skb, at)

    def tclass(d, at):
        return ((d[at] & 0x0F) << 4) | (d[at + 1] >> 4)
    return f"{_prefix(layer)}traffic class 0x{tclass(skb.data, at):02x} != 0x{tclass(p.data, pat):02x}"


# -- L3 problems of the incoming packet alone -------------------------------------
def _network_headers(skb):
    """(offset, label) of the IP headers GRO parsed, outer first."""
    offsets = skb.network_offsets
    if skb.encap_mark and offsets[1] != offsets[0]:
        return ((offsets[0], "outer "), (offsets[1], "inner "))
    return ((offsets[0], ""),)


def _ip_len(p, skb, gro, layer):
    data = skb.data
    for at, label in _network_headers(skb):
        if data[at] >> 4 == 4 and _u16(data, at + 2) != len(data) - at:
            return f"{label}total length {_u16(data, at + 2)} != {len(data) - at} bytes present"
    return ""


def _ipv6_len(p, skb, gro, layer):
    data = skb.data
    for at, label in _network_headers(skb):
        if data[at] >> 4 == 6 and _u16(data, at + 4) != len(data) - at - 40:
            return f"{label}payload length {_u16(data, at + 4)} != {len(data) - at - 40} bytes present"
    return ""


def _ip_reserved(p, skb, gro, layer):
    data = skb.data
    for at, label in _network_headers(skb):
        if data[at] >> 4 == 4 and data[at + 6] & 0x80:
            return f"{label}frag_off 0x{_u16(data, at + 6):04x} has the reserved bit"
    return ""


def _ip_fragment(p, skb, gro, layer):
    frag = _u16(skb.data, skb.off + 6)
    return f"MF {(frag >> 13) & 1}, offset {(frag & 0x1FFF) * 8}"


def _ip_options(p, skb, gro, layer):
    return f"first byte 0x{skb.data[skb.off]:02x} != 0x45"


def _ip_no_l4(p, skb, gro, layer):
    return f"protocol {skb.data[skb.off + 9]}"


def _ip_csum(p, skb, gro, layer):
    return f"header checksum 0x{_u16(skb.data, skb.off + 10):04x} does not verify"


def _ipv6_no_l4(p, skb, gro, layer):
    return f"next header {skb.data[skb.off + 6]}" if skb.data[skb.off] >> 4 == 6 else ""


# -- TCP (tcp_gro_receive) ------------------------------------------------------------
def _tcp_flags(p, skb, gro, layer):
    return f"flags {tcp_flags_text(skb.data, skb.l4_off)}"


def _tcp_flags_changed(p, skb, gro, layer):
    return f"flags {tcp_flags_text(skb.data, skb.l4_off)} != {tcp_flags_text(p.data, p.l4_off)}"


def _tcp_window(p, skb, gro, layer):
    return f"window {_u16(skb.data, skb.l4_off + 14)} != {_u16(p.data, p.l4_off + 14)}"


def _tcp_hdrlen(p, skb, gro, layer):
    return f"header length {(skb.data[skb.l4_off + 12] >> 4) * 4} != {(p.data[p.l4_off + 12] >> 4) * 4}"


def _tcp_ack(p, skb, gro, layer):
    return f"ack 0x{_u32(skb.data, skb.l4_off + 8):08x} != 0x{_u32(p.data, p.l4_off + 8):08x}"


def _tcp_options_bytes(data, th):
    return data[th + 20:th + (data[th + 12] >> 4) * 4]


def _timestamps(opts) -> Optional[tuple]:
    for i, kind, olen in option_offsets(opts):
        if kind == 8 and olen == 10 and i + 10 <= len(opts):
            return _u32(opts, i + 2), _u32(opts, i + 6)
    return None


def _tcp_ts(p, skb, gro, layer):
    mine = _timestamps(_tcp_options_bytes(skb.data, skb.l4_off))
    held = _timestamps(_tcp_options_bytes(p.data, p.l4_off))
    if mine is None or held is None:
        return _tcp_options(p, skb, gro, layer)
    if mine[0] != held[0]:
        return f"tsval {mine[0]} != {held[0]}"
    return f"tsecr {mine[1]} != {held[1]}"


def _tcp_options(p, skb, gro, layer):
    return f"options {_tcp_options_bytes(skb.data, skb.l4_off).hex()} != {_tcp_options_bytes(p.data, p.l4_off).hex()}"


def _tcp_seq(p, skb, gro, layer):
    expected = (_u32(p.data, p.l4_off + 4) + p.payload_len) & 0xFFFFFFFF
    return f"seq {_u32(skb.data, skb.l4_off + 4)} != expected {expected}"


def _payload(skb) -> int:
    return len(skb.data) - skb.off


def _tcp_oversize(p, skb, gro, layer):
    return f"payload {_payload(skb)} > mss {p.gso_size}"


def _tcp_short(p, skb, gro, layer):
    if p is None:
        return f"payload {_payload(skb)}"
    return f"payload {_payload(skb)} < mss {p.gso_size}"


def _tcp_no_payload(p, skb, gro, layer):
    return "payload 0"


def _tcp_flist(p, skb, gro, layer):
    mine, held = _u32(skb.data, skb.l4_off + 12), _u32(p.data, p.l4_off + 12)
    if mine != held:
        if mine & 0xFFFF != held & 0xFFFF:
            return f"window {mine & 0xFFFF} != {held & 0xFFFF}"
        return _tcp_flags_changed(p, skb, gro, layer)
    if skb.csum_level != p.csum_level:
        return f"checksum level {skb.csum_level} != {p.csum_level}"
    return f"{p.count} segments held"


def _tcp_csum(p, skb, gro, layer):
    return f"tcp checksum 0x{_u16(skb.data, skb.off + 16):04x} does not verify"


def _tcp_hdr(p, skb, gro, layer):
    data, off = skb.data, skb.off
    if len(data) < off + 20:
        return f"{len(data) - off} bytes of TCP header"
    return f"header length {(data[off + 12] >> 4) * 4}, {len(data) - off} bytes present"


# -- UDP (udp_gro_receive, udp_gro_receive_segment) --------------------------------
def _udp_len_of(data, th):
    return _u16(data, th + 4)


def _udp_larger(p, skb, gro, layer):
    return f"udp len {_udp_len_of(skb.data, skb.l4_off)} > {_udp_len_of(p.data, p.l4_off)}"


def _udp_short(p, skb, gro, layer):
    return f"udp len {_udp_len_of(skb.data, skb.l4_off)} < {_udp_len_of(p.data, p.l4_off)}"


def _udp_max(p, skb, gro, layer):
    return f"{p.count} datagrams"


def _udp_bad_len(p, skb, gro, layer):
    return f"udp len {_udp_len_of(skb.data, skb.off)}, {len(skb.data) - skb.off} bytes present"


def _udp_zero(p, skb, gro, layer):
    return "udp checksum 0"


def _udp_no_path(p, skb, gro, layer):
    return f"no GRO path for udp port {_u16(skb.data, skb.l4_off + 2)}"


def _udp_csum(p, skb, gro, layer):
    return f"udp checksum 0x{_u16(skb.data, skb.off + 6):04x} does not verify"


def _udp_flist(p, skb, gro, layer):
    return f"fraglist {int(bool(skb.is_flist))} != {int(bool(p.is_flist))}"


def _csum_state(p, skb, gro, layer):
    return f"checksum level {skb.csum_level} != {p.csum_level}"


# -- skb_gro_receive / skb_gro_receive_list -----------------------------------------
def _merge_size(p, skb, gro, layer):
    limit = gro.ipv6_max_size if p.protocol == 0x86DD else gro.ipv4_max_size
    return f"size {p.length} + {_payload(skb)} >= {limit}"


def _bigtcp(p, skb, gro, layer):
    if p.encap_mark:
        why = "encapsulated"
    elif skb.proto != 6:
        why = "not TCP"
    elif p.protocol == 0x86DD and not gro.bigtcp_ipv6_room:
        why = "2 bytes before the Ethernet header, 8 needed (a frame injected into veth)"
    elif p.protocol == 0x86DD:
        why = "an IPv6 extension header before TCP"
    elif not gro.bigtcp_ipv4:
        why = "IPv4 (BIG TCP is IPv6 only before 6.3)"
    else:
        why = f"ethertype 0x{p.protocol:04x}, not IPv4 or IPv6"
    return f"size {p.length} + {_payload(skb)} >= 65536, {why}"


def _flist_size(p, skb, gro, layer):
    return f"size {p.length} + {len(skb.data) - skb.l2_len} >= 65536"


# -- L2 and tunnels -------------------------------------------------------------------
def _no_l2(p, skb, gro, layer):
    return "" if skb.encap_mark else f"ethertype 0x{skb.protocol:04x}"


def _gro_off(p, skb, gro, layer):
    return "generic-receive-offload off"


def _gre(p, skb, gro, layer):
    return f"gre flags 0x{_u16(skb.data, skb.off):04x}, protocol 0x{_u16(skb.data, skb.off + 2):04x}"


# reason -> evidence(p, skb, gro, layer); p is None when nothing was compared
_EVIDENCE: Dict[str, Callable] = {
    "gro_disabled": _gro_off,
    "no_l2_handler": _no_l2,
    "ip_options_or_version": _ip_options,
    "ip_no_l4_handler": _ip_no_l4,
    "ip_fragment": _ip_fragment,
    "ip_bad_hdr_csum": _ip_csum,
    "ip_len_mismatch": _ip_len,
    "ip_reserved_flag": _ip_reserved,
    "ipv6_no_l4_handler": _ipv6_no_l4,
    "ipv6_payload_len_mismatch": _ipv6_len,
    "gre_unsupported": _gre,
    "tcp_csum_bad": _tcp_csum,
    "tcp_hdr_bad": _tcp_hdr,
    "tcp_push": _tcp_flags,
    "tcp_fin": _tcp_flags,
    "tcp_urg": _tcp_flags,
    "tcp_rst": _tcp_flags,
    "tcp_syn": _tcp_flags,
    "tcp_no_payload": _tcp_no_payload,
    "tcp_short_segment": _tcp_short,
    "udp_bad_len": _udp_bad_len,
    "udp_zero_csum": _udp_zero,
    "udp_no_gro_path": _udp_no_path,
    "udp_csum_bad": _udp_csum,
}

# reasons that compare with a held packet: evidence needs it
_COMPARED: Dict[str, Callable] = {
    "ip_ttl_changed": _ttl,
    "ip_tos_changed": _tos,
    "ip_df_changed": _df,
    "ip_id_not_incrementing": _ipid_incrementing,
    "ip_id_not_fixed": _ipid_fixed,
    "ipv6_hoplimit_changed": _hoplimit,
    "ipv6_tclass_changed": _tclass,
    "tcp_cwr": _tcp_flags,
    "tcp_flags_changed": _tcp_flags_changed,
    "tcp_window_changed": _tcp_window,
    "tcp_hdrlen_changed": _tcp_hdrlen,
    "tcp_ack_changed": _tcp_ack,
    "tcp_ts_changed": _tcp_ts,
    "tcp_options_changed": _tcp_options,
    "tcp_seq_mismatch": _tcp_seq,
    "tcp_oversize": _tcp_oversize,
    "tcp_flist_mismatch": _tcp_flist,
    "udp_flist_mismatch": _udp_flist,
    "udp_flist_csum_state": _csum_state,
    "udp_len_larger": _udp_larger,
    "udp_short_last": _udp_short,
    "udp_max_segs": _udp_max,
    "merge_max_size": _merge_size,
    "merge_bigtcp_ineligible": _bigtcp,
    "flist_max_size": _flist_size,
}


def evidence(reason: Optional[str], p, skb, gro, layer: str = "") -> str:
    """The evidence for ``reason`` when ``skb`` arrived (``p``: the held packet
    it was compared with, or None)."""
    if not reason:
        return ""
    fn = _EVIDENCE.get(reason)
    if fn is None:
        fn = _COMPARED.get(reason)
        if fn is None or p is None:
            return ""
    try:
        return fn(p, skb, gro, layer)
    except (IndexError, StructError):
        return ""                       # a header cut short: nothing to quote


def flush_evidence(reason: str, p, gro) -> str:
    """Evidence for a completion the poll loop (or a full bucket) decided."""
    if reason == "bucket_full_evict_oldest":
        return f"bucket {p.hash & (GRO_HASH_BUCKETS - 1)} held {MAX_GRO_SKBS} packets"
    if reason in ("napi_complete_old", "budget_exhausted_old"):
        return f"held since jiffy {p.age}, now {gro.jiffies}"
    return ""


# -- the kernel history row behind a decision (kernels.py) ------------------------------
# Reasons whose rule differs between kernel releases: the row whose branch decided.
# (the IP ID reasons and merge_bigtcp_ineligible look at the headers: _ipid_row, _bigtcp_row)
_REASON_ROWS = {"ipv6_hoplimit_changed": "V1", "tcp_flist_mismatch": "T2", "merge_max_size": "C7"}
_UDP_L3_REASONS = frozenset(("ip_ttl_changed", "ip_tos_changed", "ip_df_changed", "ip_id_not_incrementing",
                             "ip_id_not_fixed", "ipv6_hoplimit_changed", "ipv6_tclass_changed"))


def _ipid_row(reason, p, skb, gro, layer) -> str:
    """The IP ID rows decide only where the eras differ: a header without DF
    keeping its ID (row L2), an outer header with DF (checked from 6.18, row
    L2), an outer ID held fixed by the inner header's bit (6.10-6.17, row L1)."""
    at = _l3(skb, layer)
    df = skb.data[at + 6] & 0x40
    if layer == "outer" and df:
        return "L2"
    if layer == "outer" and reason == "ip_id_not_fixed" and gro.ipid_rule == 1:
        return "L1"
    if not df and (_u16(skb.data, at + 4) == _u16(p.data, _held(p, skb, at) + 4) or reason == "ip_id_not_fixed"):
        return "L2"
    return ""


def _bigtcp_row(p, skb, gro) -> str:
    if p.encap_mark or skb.proto != 6:
        return ""
    if p.protocol == 0x86DD:
        return "C13" if not gro.bigtcp_ipv6_room else "C12" if not gro.bigtcp_ipv4 else ""
    return "C12" if not gro.bigtcp_ipv4 else "C13"


def version_row(reason: Optional[str], p, skb, gro, layer: str = "") -> str:
    """How explain names the kernel history row whose version-dependent branch
    made this decision ("row T1: CWR goes up alone (6.15+)"), or "".  A row the
    profile lacks is named too: its absence decided ("row L2, not in 6.1.192: ...")."""
    from .kernels import BY_ID

    row_id = ""
    try:
        if reason == "tcp_flags_changed" and p is not None and skb is not None and skb.l4_off:
            diff = skb.data[skb.l4_off + 13] ^ p.data[p.l4_off + 13]
            if diff == 0x80:
                row_id = "T1"                        # only CWR differs
        elif reason is None and p is not None and skb is not None and skb.same_flow and p.l4_off \
                and p.proto == 6 and p.data[p.l4_off + 13] & 0x80 and not gro.tcp_cwr_compared:
            row_id = "T1"                            # merged behind a CWR head
        elif reason in _UDP_L3_REASONS and p is not None and p.proto == 17:
            row_id = "U1"
        elif reason in ("ip_id_not_incrementing", "ip_id_not_fixed") and p is not None and skb is not None:
            row_id = _ipid_row(reason, p, skb, gro, layer)
        elif reason == "udp_no_gro_path" and gro.settings.udp_gro_forwarding and not gro.kernel.holds("U2"):
            row_id = "U2"
        elif reason == "merge_bigtcp_ineligible":
            row_id = _bigtcp_row(p, skb, gro)
        elif reason is not None:
            row_id = _REASON_ROWS.get(reason, "")
    except (IndexError, StructError):
        return ""
    if not row_id:
        return ""
    row = BY_ID[row_id]
    if gro.kernel.holds(row_id):
        return row.label()
    return f"row {row.id}, not in {gro.kernel.release}: {row.title} ({row.since}+)"
