"""TCP: tcp4/6_gro_receive, tcp_gro_receive and the completions
(net/ipv4/tcp_offload.c, net/ipv6/tcpv6_offload.c), 6.18 semantics."""

from __future__ import annotations

from struct import Struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from . import csum
from .csum import seed, sum16_range
from .network import inet_gro_flush, ipv6_gro_flush, network_flush
from .skb import defer_key, extend_key, merged_segments, settled_key

# tcp_flag_word() bits: data offset, reserved/AE, flags, window
TCP_FLAG_CWR = 0x00800000
TCP_FLAG_ECE = 0x00400000
TCP_FLAG_URG = 0x00200000
TCP_FLAG_ACK = 0x00100000
TCP_FLAG_PSH = 0x00080000
TCP_FLAG_RST = 0x00040000
TCP_FLAG_SYN = 0x00020000
TCP_FLAG_FIN = 0x00010000
TCP_DOFF = 0xF0000000
TCP_RESERVED = 0x0F000000
TCP_WINDOW = 0x0000FFFF
# only FIN and PSH may differ; CWR too before 6.15 (row T1, read by tcp_gro_receive)
_NOT_COMPARED = TCP_FLAG_FIN | TCP_FLAG_PSH
_COMPARED = ~_NOT_COMPARED
_FIN_PSH = TCP_FLAG_FIN | TCP_FLAG_PSH
_FINAL_FLAGS = TCP_FLAG_URG | TCP_FLAG_PSH | TCP_FLAG_RST | TCP_FLAG_SYN | TCP_FLAG_FIN
SEQ_MASK = 0xFFFFFFFF                # sequence numbers are 32-bit: compared modulo 2**32
_from_bytes = int.from_bytes
_unpack_word32 = Struct(">I").unpack_from
# the interpreter's tcp_gro_receive reads the sequence number, the acknowledgement
# and the flag word with one struct call (three word32 calls cost it more; the
# compiled build reads them as three C words)
_unpack_seq_ack_flags = Struct(">III").unpack_from


# The callers of word32 and same_bytes have checked that the bytes are present.
# The compiled build reads them in place through C pointers; the interpreter is
# faster with one C-implemented call than with a loop of byte reads.
def word32(data, at):
    """The big-endian 32-bit word at ``at``."""
    if cython.compiled:
        raw = data
        top = raw[at]          # a C long: shifted by 24 it must not overflow an int
        return (top << 24) | (raw[at + 1] << 16) | (raw[at + 2] << 8) | raw[at + 3]
    return _unpack_word32(data, at)[0]


def same_bytes(a, i, b, j, n):
    """a[i:i + n] == b[j:j + n], both in range (compiled: without slicing either)."""
    if cython.compiled:
        raw_a = a
        raw_b = b
        return memcmp(raw_a + i, raw_b + j, n) == 0
    return a[i:i + n] == b[j:j + n]


# -- checksum validation (skb_gro_checksum_validate) ----------------------------
# Under --csum trust every frame is CHECKSUM_UNNECESSARY (csum_cnt > 0), so
# tcp4/6_gro_receive skip validation (gro.verify_l4 is False).
def validate_l4(gro, skb, pseudo_sum: int, field_at: int, lco=None) -> bool:
    """True when the TCP/UDP checksum at field_at (covering skb.off onwards)
    is acceptable under the --csum mode.  ``lco(gro, skb, total)``, given under
    --csum auto, is asked about a checksum that is wrong as captured (``total``:
    the sum it covers, pseudo-header included): true when local checksum
    offload filled it over an inner seed (counted offloaded)."""
    stats = gro.stats
    data = skb.data
    if gro.csum_auto and skb.end >= field_at + 2:
        # (a segment too short to hold the field cannot hold a seed: it is verified)
        field = (data[field_at] << 8) | data[field_at + 1]
        folded = (pseudo_sum & 0xFFFF) + (pseudo_sum >> 16)     # csum.fold, inlined
        folded = (folded & 0xFFFF) + (folded >> 16)
        if field == folded:
            # a capture taken on a sender with checksum offload: the field holds
            # the pseudo-header seed CHECKSUM_PARTIAL leaves; the NIC would fill it
            stats.csum_offloaded += 1
            return True
    stats.csum_verified += 1
    off = skb.off
    full = skb.csum
    if full is not None and not (off - skb.start) & 1:
        # the device summed the whole frame (as a CHECKSUM_COMPLETE NIC fills
        # skb->csum); take away the headers pulled so far (skb_gro_postpull_rcsum).
        # At an even offset the 16-bit words line up, so this is exactly the sum
        # of the segment (reduced, as sum16's), and the verdict is csum.is_valid's.
        segment_sum = (full - _from_bytes(data[skb.start:off], "big")) % 0xFFFF
    else:
        segment_sum = sum16_range(data, off, skb.end)
    total = pseudo_sum + segment_sum
    if total % 0xFFFF == 0:
        return True
    if lco is not None and lco(gro, skb, total):
        stats.csum_offloaded += 1
        return True
    stats.csum_bad += 1
    return False


# -- --csum auto and local checksum offload ---------------------------------------
# A sender that leaves a tunnelled packet's innermost TCP/UDP checksum to its NIC
# (the field holds the pseudo-header seed) fills an enclosing UDP or GRE checksum
# by local checksum offload (lco_csum in include/linux/skbuff.h, used by
# udp_set_csum and gre_build_header): it is right for the packet as the NIC sends
# it, with the inner checksum filled in, not for the bytes a capture shows.
# --csum auto counts the innermost seed as filled, so it counts such an enclosing
# checksum as valid too.
def inner_seed_sum(data, at, etype, n):
    """The packet at ``at`` (an Ethernet frame when ``etype`` is None, else an IP
    packet of that ethertype): when its TCP/UDP checksum field holds the
    pseudo-header seed, the sum (mod 0xFFFF) of its L4 bytes plus its
    pseudo-header; otherwise None.  The frame ends at data[n]."""
    if etype is None:
        if n < at + 14:
            return None
        etype = (data[at + 12] << 8) | data[at + 13]
        at += 14
        while etype in (0x8100, 0x88A8) and n >= at + 4:
            etype = (data[at + 2] << 8) | data[at + 3]
            at += 4
    if etype == 0x0800:
        if n < at + 20 or data[at] >> 4 != 4 or (data[at + 6] & 0x3F) or data[at + 7]:
            return None                              # (a fragment: the NIC fills no L4 checksum)
        l4 = at + (data[at] & 15) * 4
        end = min(at + ((data[at + 2] << 8) | data[at + 3]), n)
        proto = data[at + 9]
        pseudo = pseudo4
    elif etype == 0x86DD:
        if n < at + 40 or data[at] >> 4 != 6:
            return None
        proto = data[at + 6]
        end = min(at + 40 + ((data[at + 4] << 8) | data[at + 5]), n)
        l4 = at + 40
        pseudo = pseudo6
        while proto in (0, 43, 60) and n >= l4 + 8:  # hop-by-hop, routing, destination options
            proto, l4 = data[l4], l4 + (data[l4 + 1] + 1) * 8
    else:
        return None
    field_at = l4 + 16 if proto == 6 else l4 + 6 if proto == 17 else -1
    if field_at < 0 or end < field_at + 2 or (l4 - at) & 1:
        return None
    ps = pseudo(data, at, end - l4, proto)
    if (data[field_at] << 8) | data[field_at + 1] != seed(ps):
        return None
    return (ps + sum16_range(data, l4, end)) % 0xFFFF


def lco_valid(data, start, total, at, etype, n):
    """--csum auto: an enclosing checksum covering ``start`` onwards, whose covered
    sum as captured (its pseudo-header included) is ``total``, is right once the
    innermost seed at ``at`` is filled in (the fill adds minus the inner segment's
    sum with its pseudo-header)."""
    if (at - start) & 1:
        return False
    inner = inner_seed_sum(data, at, etype, n)
    return inner is not None and (total - inner) % 0xFFFF == 0


def checksum_verified(skb) -> None:
    """__skb_incr_checksum_unnecessary after a checksum GRO verified: NONE
    becomes UNNECESSARY, then each further one raises csum_level (at most 3).
    Fraglist GRO merges only packets whose state is equal."""
    if skb.csum_level < 3:
        skb.csum_level += 1


# The pseudo-header sums are only ever reduced (modulo 0xFFFF, or folded, which
# for a positive sum below 2**32 depends only on the residue), so any congruent
# positive value serves: the addresses' 16-bit words are summed and reduced, and
# a 32-bit length is congruent to the sum of its 16-bit halves.  The completions
# use them too, to seed or fill the rebuilt TCP/UDP checksums.  ``data`` is the
# frame (bytes) or a rebuilt header (bytearray) holding the network header at nh.
# The interpreter reads the addresses' words with one struct call (cheaper for
# it than a loop of byte reads); the compiled build reads them in place.
_unpack_addr4_words = Struct(">4H").unpack_from
_unpack_addr6_words = Struct(">16H").unpack_from


def pseudo4(data, nh, length, proto=6):
    """inet_gro_compute_pseudo"""
    if cython.compiled:
        raw = data     # read in place (a C pointer): the header was parsed
        total = 0
        for at in range(nh + 12, nh + 20, 2):
            total += (raw[at] << 8) | raw[at + 1]
    else:
        total = sum(_unpack_addr4_words(data, nh + 12))
    return total % 0xFFFF + proto + length


def pseudo6(data, nh, length, proto=6):
    """ip6_gro_compute_pseudo"""
    if cython.compiled:
        raw = data
        total = 0
        for at in range(nh + 8, nh + 40, 2):
            total += (raw[at] << 8) | raw[at + 1]
    else:
        total = sum(_unpack_addr6_words(data, nh + 8))
    return total % 0xFFFF + proto + length


def _receive(bucket, skb, gro, ipv6):
    """The shared body of tcp4_gro_receive and tcp6_gro_receive (``ipv6``: which)."""
    if skb.flush is None and gro.verify_l4:
        # a packet that will be flushed anyway is not verified
        data = skb.data
        nh = skb.network_offsets[skb.encap_mark]
        ps = pseudo6(data, nh, skb.end - skb.off) if ipv6 else pseudo4(data, nh, skb.end - skb.off)
        if not validate_l4(gro, skb, ps, skb.off + 16):
            skb.flush = "tcp_csum_bad"
            return None
        checksum_verified(skb)
    # tcp_gro_pull_header, inlined: the header length, or the frame is unusable
    data = skb.data
    off = skb.off
    n = skb.end
    thlen = (data[off + 12] >> 4) * 4 if n >= off + 20 else 0
    if thlen < 20 or n < off + thlen:
        skb.flush = skb.flush or "tcp_hdr_bad"
        return None
    return tcp_gro_receive(bucket, skb, gro, thlen)


def tcp4_gro_receive(bucket, skb, gro):
    return _receive(bucket, skb, gro, False)


def tcp6_gro_receive(bucket, skb, gro):
    return _receive(bucket, skb, gro, True)


# -- tcp_gro_receive ---------------------------------------------------------------
def _never_merged_reason(flags: int):
    """URG, RST and SYN segments are never merged: their reason, or None."""
    if flags & TCP_FLAG_URG:
        return "tcp_urg"
    if flags & TCP_FLAG_RST:
        return "tcp_rst"
    if flags & TCP_FLAG_SYN:
        return "tcp_syn"
    return None


def _flag_diff_reason(flags: int, diff: int) -> str:
    """Name the first compared flag-word difference."""
    never = _never_merged_reason(flags)
    if never:
        return never
    if diff & TCP_DOFF:
        return "tcp_hdrlen_changed"
    if diff & (TCP_RESERVED | 0x00FF0000):
        return "tcp_flags_changed"
    return "tcp_window_changed"


def option_step(data: bytes, at: int, i: int, n: int) -> int:
    """How far the option at offset ``i`` of the ``n`` option bytes at ``at``
    reaches (1 for no-operation padding), or 0 where a walk of the options
    ends: the end-of-list option, or a malformed option header (no length
    byte, a length below 2).  The caller reads only while i < n."""
    raw = data      # read in place (a C pointer in the compiled build): at + i < at + n is inside data
    kind = raw[at + i]
    if kind == 0:
        return 0
    if kind == 1:
        return 1
    if i + 1 >= n:
        return 0
    olen = raw[at + i + 1]
    return olen if olen >= 2 else 0


def option_offsets(opts: bytes) -> list:
    """(offset, kind, length) of each TCP option in ``opts`` up to the end-of-list
    option or the first malformed one; no-operation padding is skipped."""
    found = []
    i = 0
    n = len(opts)
    while i < n:
        step = option_step(opts, 0, i, n)
        if not step:
            break
        if opts[i] != 1:
            found.append((i, opts[i], step))
        i += step
    return found


def _options_reason(data: bytes, at: int, data2: bytes, at2: int, n: int) -> str:
    """tcp_ts_changed when the option layout is identical and only the
    timestamp option's value differs, else tcp_options_changed.  The options
    are the ``n`` bytes at ``at`` in ``data`` and at ``at2`` in ``data2`` (the
    header lengths are equal), walked where they lie as option_offsets walks
    them; a timestamp option the area cuts short is no timestamp."""
    i = 0
    while i < n:
        step = option_step(data, at, i, n)
        if not step:
            break
        # a timestamp option: the bytes before its values and after them are the same
        if step == 10 and data[at + i] == 8 and i + 10 <= n and same_bytes(data, at, data2, at2, i + 2) \
                and same_bytes(data, at + i + 10, data2, at2 + i + 10, n - i - 10):
            return "tcp_ts_changed"
        i += step
    return "tcp_options_changed"


def _final_reason(flags: int, length: int) -> str:
    never = _never_merged_reason(flags)
    if never:
        return never
    if flags & TCP_FLAG_FIN:
        return "tcp_fin"
    if flags & TCP_FLAG_PSH:
        return "tcp_push"
    return "tcp_no_payload" if length == 0 else "tcp_short_segment"


def tcp_gro_receive(bucket, skb, gro, thlen):
    data = skb.data
    off = skb.off
    # tcp_gro_lookup: the port pair completes the flow identity (the compiled
    # build compares it where it lies and copies it into skb.key only if the
    # segment is not merged; the interpreter joins and compares strings)
    if cython.compiled:
        seq, ack, flags = word32(data, off + 4), word32(data, off + 8), word32(data, off + 12)
        defer_key(skb, off, 4)
        p = bucket.find_waiting(skb.hash, skb)
    else:
        seq, ack, flags = _unpack_seq_ack_flags(data, off + 4)
        extend_key(skb, data, off, 4)
        p = bucket.find(skb.hash, skb.key)
    skb.l4_off = off
    skb.off = end = off + thlen
    length = skb.end - end
    mss = 1
    if gro.tcp_fraglist:
        # row T2, tcp4/6_check_fraglist_gro: a held packet passes its mode on; otherwise
        # fraglist GRO is for flows no local established socket terminates
        if p is not None:
            skb.is_flist = p.is_flist
        else:
            skb.is_flist = not _locally_terminated(gro, data, skb, off)
            gro.stats.tcp_fraglist_assumed += skb.is_flist
    if p is not None:
        d2 = p.data
        th2 = p.l4_off
        if cython.compiled:
            seq2, ack2, flags2 = word32(d2, th2 + 4), word32(d2, th2 + 8), word32(d2, th2 + 12)
        else:
            seq2, ack2, flags2 = _unpack_seq_ack_flags(d2, th2 + 4)
        reason = None
        diff = (flags ^ flags2) & _COMPARED
        if not gro.tcp_cwr_compared:
            diff &= ~TCP_FLAG_CWR             # row T1: before 6.15 a held CWR head takes later segments
        if flags & TCP_FLAG_CWR:
            reason = "tcp_cwr"                # an incoming CWR always flushes
        elif diff:
            reason = _flag_diff_reason(flags, diff)
        elif ack != ack2:
            reason = "tcp_ack_changed"
        elif thlen > 20 and not (same_bytes(data, off + 20, d2, th2 + 20, thlen - 20) if cython.compiled
                                 else data[off + 20:off + thlen] == d2[th2 + 20:th2 + thlen]):
            # the options differ (the interpreter compares slices here: a call costs it more)
            reason = _options_reason(data, off + 20, d2, th2 + 20, thlen - 20)
        else:
            # gro_receive_network_flush: outer header, then inner if encapsulated
            # (network_flush's version-nibble dispatch, inlined for the outer one)
            outer = skb.network_offsets[0]
            if (data[outer] >> 4 == 6) if gro.ipid_rule else skb.outer_family == 6:
                reason = ipv6_gro_flush(p, skb, outer, 0, gro)
            else:
                reason = inet_gro_flush(p, skb, outer, 0, gro)
            if p.encap_mark:
                if reason is not None:
                    p.flush_layer = "outer"
                else:
                    reason = network_flush(p, skb, skb.network_offsets[1], 1, gro)
                    if reason is not None:
                        p.flush_layer = "inner"
            if reason is None:
                mss = p.gso_size
                if length == 0:
                    reason = "tcp_no_payload"
                elif length > mss:
                    reason = "tcp_oversize"
                elif (seq2 + p.payload_len - seq) & SEQ_MASK:
                    reason = "tcp_seq_mismatch"
        if p.is_flist:
            # fraglist: the whole flag word must match (PSH/FIN too), at most 64
            # segments, and skb_gro_receive_list chains the skb; no PSH/FIN OR-ing
            if reason is None:
                if flags != flags2 or skb.csum_level != p.csum_level or p.count >= 64:
                    reason = "tcp_flist_mismatch"
                else:
                    reason = gro.merge_list(p, skb)
            if reason is not None:
                mss = 1
                p.flush = reason
        else:
            if reason is None:
                reason = gro.merge(p, skb)
            if reason is not None:
                mss = 1
                p.flush = reason
            else:
                p.flag_or |= flags & _FIN_PSH
    if cython.compiled and not skb.same_flow:
        settled_key(skb)                      # it is held or goes up: its key is read
    # final check: a short segment or one of URG/PSH/RST/SYN/FIN ends the aggregate
    final = length < mss or flags & _FINAL_FLAGS
    if final:
        why = _final_reason(flags, length)
        if skb.flush is None:
            skb.flush = why
        if p is not None:
            if skb.same_flow:
                p.flush = why
            return p
        return None
    if p is not None and not skb.same_flow:
        return p
    return None


def _locally_terminated(gro, data, skb, off) -> bool:
    """__inet(6)_lookup_established for the segment's 4-tuple (the innermost
    network header, as skb_gro_network_header gives it)."""
    nh = skb.network_offsets[skb.encap_mark]
    if data[nh] >> 4 == 6:
        saddr, daddr = data[nh + 8:nh + 24], data[nh + 24:nh + 40]
    else:
        saddr, daddr = data[nh + 12:nh + 16], data[nh + 16:nh + 20]
    sport = (data[off] << 8) | data[off + 1]
    dport = (data[off + 2] << 8) | data[off + 3]
    return gro.host.tcp_established(saddr, sport, daddr, dport)


# -- completion --------------------------------------------------------------------
def full_l4_checksum(p, header, thoff: int, check_at: int, pseudo_sum: int) -> int:
    """--l4-csum full: the checksum a receiver would accept for the rebuilt
    super-packet (header from thoff, then the payload chunks), the field at
    check_at (relative to thoff) counted as zero."""
    header[thoff + check_at] = 0
    header[thoff + check_at + 1] = 0
    total = pseudo_sum + csum.sum16(memoryview(header)[thoff:])
    # the payload follows the (possibly odd-length) header; sum it in place
    merged = [s.data[s.end - s.payload_len:s.end] for s in merged_segments(p)]
    payload = b"".join([memoryview(p.data)[p.off:p.end], *merged])
    if (len(header) - thoff) & 1:
        total += csum.sum16(b"\x00" + payload)
    else:
        total += csum.sum16(payload)
    return csum.complement(total)


def _finish(gro, p, header, gso_type, thoff, pseudo_sum, family_type):
    """Shared tail of tcp4/6_gro_complete and tcp_gro_complete."""
    if p.is_flist:
        # fraglist: FRAGLIST GSO; checksum and flags of the first segment stay
        # as they were (the chained segments keep their own headers)
        gso_type.append("fraglist")
        gso_type.append(family_type)
        if gro.l4_csum_full:
            check = full_l4_checksum(p, header, thoff, 16, pseudo_sum)
            header[thoff + 16] = check >> 8
            header[thoff + 17] = check & 0xFF
        return
    gso_type.append(family_type)
    if family_type == "tcpv4":
        if gro.ipid_rule != 2:
            if p.ip_fixedid:
                gso_type.append("tcp_fixedid")       # one flag before 6.18 (row L2)
        else:
            if p.ip_fixedid & 1:
                gso_type.append("tcp_fixedid")
            if p.ip_fixedid & 2:
                gso_type.append("tcp_fixedid_inner")
    flag_byte = header[thoff + 13] | ((p.flag_or >> 16) & 0xFF)
    header[thoff + 13] = flag_byte
    if gro.l4_csum_full:
        check = full_l4_checksum(p, header, thoff, 16, pseudo_sum)
    else:
        check = seed(pseudo_sum)          # what CHECKSUM_PARTIAL expects
    header[thoff + 16] = check >> 8
    header[thoff + 17] = check & 0xFF
    if flag_byte & 0x80:                  # tcp_gro_complete: CWR in the first header
        gso_type.append("tcp_accecn" if gro.tcp_cwr_compared else "tcp_ecn")    # row T1


def tcp4_gro_complete(gro, p, header, gso_type, thoff):
    nh = p.network_offsets[p.encapsulation]
    length = len(header) - thoff + p.payload_len
    pseudo = pseudo4(header, nh, length)
    _finish(gro, p, header, gso_type, thoff, pseudo, "tcpv4")


def tcp6_gro_complete(gro, p, header, gso_type, thoff):
    nh = p.network_offsets[p.encapsulation]
    length = len(header) - thoff + p.payload_len
    pseudo = pseudo6(header, nh, length)
    _finish(gro, p, header, gso_type, thoff, pseudo, "tcpv6")
