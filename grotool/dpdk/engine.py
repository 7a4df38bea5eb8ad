"""DPDK 22.11's lib/gro, modelled (sans-IO: frames in, packets out).

The rules come from DPDK's own source (lib/gro/rte_gro.c, gro_tcp4.c,
gro_tcp4.h, gro_udp4.c, gro_udp4.h of the 22.11 series); each is cited by the
DPDK function it comes from.  Modelled: TCP/IPv4 GRO (RTE_GRO_TCP_IPV4, "tcp4")
UDP/IPv4 GRO (RTE_GRO_UDP_IPV4, "udp4": IPv4 fragment reassembly) and VXLAN
TCP/IPv4 GRO (RTE_GRO_IPV4_VXLAN_TCP_IPV4, "vxlan_tcp4", gro_vxlan_tcp4.c) and
VXLAN UDP/IPv4 GRO (RTE_GRO_IPV4_VXLAN_UDP_IPV4, "vxlan_udp4", gro_vxlan_udp4.c:
inner IPv4 fragment reassembly).  A packet of no enabled type passes through
unprocessed.

Two ways an application drives it, both modelled:

- light (``rte_gro_reassemble_burst``): each rx burst gets a fresh table of
  min(burst, max_flows x max_items, 128) packets; at the end of the burst the
  table is emptied (flows in slot order, each flow's packets in chain order)
  and the unprocessed packets follow.  Nothing is held across bursts.
- heavy (``rte_gro_reassemble`` on a context + ``rte_gro_timeout_flush`` with a
  timeout of 0): the table (max_flows x max_items packets) persists; each
  burst's unprocessed packets go out at once; the held ones after every
  ``flush_every`` bursts and at the end of the capture.

Output packets carry the frame indices they cover (in byte order), the reason
they were delivered and, for held packets, why they were held apart from an
earlier packet of their flow (``held_apart``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

from .classify import Mbuf, classify, is_ipv4_tcp, is_ipv4_udp, is_vxlan_tcp4, is_vxlan_udp4
from .params import DEFAULT_BURST, DEFAULT_MAX_FLOWS, DEFAULT_MAX_ITEMS, GRO_TYPES, MODES, VXLAN_PORT

RTE_GRO_MAX_BURST_ITEM_NUM = 128      # rte_gro.h
GRO_TCP4_TBL_MAX_ITEM_NUM = 1024 * 1024   # gro_tcp4.h
MAX_IPV4_PKT_LENGTH = 65535           # gro_tcp4.h
MAX_TCP_HLEN = 60
TCP_ACK = 0x10
DF = 0x4000
MF = 0x2000
OFFSET_MASK = 0x1FFF


@dataclass(frozen=True)
class DpdkSettings:
    """The application's GRO set-up (what testpmd's `set port N gro on` and its
    burst size choose)."""

    mode: str = "light"
    burst: int = DEFAULT_BURST
    flush_every: int = 1
    max_flows: int = DEFAULT_MAX_FLOWS
    max_items: int = DEFAULT_MAX_ITEMS
    gro_types: Tuple[str, ...] = ("tcp4",)
    vxlan_ports: Tuple[int, ...] = (VXLAN_PORT,)   # what the application classifies as VXLAN

    def problem(self) -> Optional[str]:
        if self.mode not in MODES:
            return f"--dpdk-mode must be one of {', '.join(MODES)}"
        if not 1 <= self.burst <= 65535:
            return "--burst must be 1..65535"
        if not 1 <= self.flush_every:
            return "--dpdk-flush-every must be at least 1"
        if not (1 <= self.max_flows <= 65535 and 1 <= self.max_items <= 65535):
            return "--dpdk-max-flows and --dpdk-max-items must be 1..65535 (uint16_t in rte_gro_param)"
        bad = [t for t in self.gro_types if t not in GRO_TYPES]
        if bad:
            return f"GRO type {bad[0]} is not modelled (modelled: {', '.join(GRO_TYPES)})"
        return None

    def as_json(self) -> dict:
        return {"mode": self.mode, "burst": self.burst, "flush_every": self.flush_every,
                "max_flows": self.max_flows, "max_items": self.max_items, "gro_types": list(self.gro_types),
                "vxlan_ports": list(self.vxlan_ports)}


@dataclass
class DpdkPacket:
    """One packet DPDK handed back to the application."""

    data: bytes
    covers: List[int]
    reason: str
    burst: int                        # the burst (0-based) after which it was returned
    held_apart: Optional[str] = None


@dataclass
class _Item:
    """gro_tcp4_item: a held packet (its mbuf chain as bytes)."""

    data: bytearray
    covers: List[int]
    m: Mbuf
    sent_seq: int
    ip_id: int
    is_atomic: bool
    nb_merged: int = 1
    held_apart: Optional[str] = None
    outer_ip_id: int = 0              # gro_vxlan_tcp4_item
    outer_is_atomic: bool = False


class _Table:
    """gro_tcp4_tbl / gro_udp4_tbl: flows in slots (the library scans its flow array
    from slot 0 and takes the first empty slot for a new flow; a flush with a timeout
    of 0 empties every slot, so slots fill in order: a dict by key, no scan) and an
    item count."""

    __slots__ = ("max_items", "item_num", "chains", "slot_of", "next_slot", "prefixes")

    def __init__(self, max_items: int):
        self.max_items = max_items      # gro_tcp4_tbl_create: max_flow_num = entries_num as well
        self.item_num = 0
        self.chains = {}                # slot -> chain of held items
        self.slot_of = {}               # flow key -> slot
        self.next_slot = 0
        self.prefixes = {}              # TCP flow key without the ACK number -> flows (dpdk_ack_differs)

    def find(self, key: bytes):
        slot = self.slot_of.get(key)
        return None if slot is None else self.chains[slot]

    def add_flow(self, key: bytes, item) -> None:
        slot = self.next_slot
        self.next_slot += 1
        self.slot_of[key] = slot
        self.chains[slot] = [item]

    def clear(self) -> None:
        self.item_num = 0
        self.chains.clear()
        self.slot_of.clear()
        self.next_slot = 0
        self.prefixes.clear()


def _u16(b, o):
    return (b[o] << 8) | b[o + 1]


def _u32(b, o):
    return int.from_bytes(b[o:o + 4], "big")


def _check_seq_option(item: _Item, data, m: Mbuf, sent_seq: int, ip_id: int, tcp_dl: int,
                      is_atomic: bool) -> Tuple[int, Optional[str]]:
    """check_seq_option (gro_tcp4.h): 1 append, -1 prepend, 0 with why not."""
    o = item.m
    if m.l4_len != o.l4_len:
        return 0, "dpdk_tcp_options_differ"
    # VXLAN: the held packet's headers sit after its outer Ethernet and IPv4 headers
    o_off = o.outer_l2_len + o.outer_l3_len
    if m.l4_len > 20:
        a = m.outer_l2_len + m.outer_l3_len + m.l2_len + m.l3_len + 20
        b = o_off + o.l2_len + o.l3_len + 20
        if data[a:a + m.l4_len - 20] != item.data[b:b + o.l4_len - 20]:
            return 0, "dpdk_tcp_options_differ"
    if item.is_atomic != is_atomic:
        return 0, "dpdk_df_differs"
    held_len = len(item.data) - o_off - o.l2_len - o.l3_len - o.l4_len
    # int promotion in C: the IP ID tests never wrap, the sequence sum does (uint32_t)
    if sent_seq == (item.sent_seq + held_len) & 0xFFFFFFFF:
        if is_atomic or ip_id == item.ip_id + 1:
            return 1, None
        return 0, "dpdk_ip_id_not_next"
    if (sent_seq + tcp_dl) & 0xFFFFFFFF == item.sent_seq:
        if is_atomic or ip_id + item.nb_merged == item.ip_id:
            return -1, None
        return 0, "dpdk_ip_id_not_next"
    return 0, "dpdk_seq_not_adjacent"


def _merge(item: _Item, data: bytearray, m: Mbuf, covers: List[int], cmp: int, sent_seq: int, ip_id: int) -> bool:
    """merge_two_tcp4_packets (gro_tcp4.h): the head's headers stay, the tail loses
    the head's header length; refused past an IPv4 length of 65,535."""
    if cmp > 0:
        head_m, head_len, tail_len = item.m, len(item.data), len(data)
    else:
        head_m, head_len, tail_len = m, len(data), len(item.data)
    off = m.outer_l2_len + m.outer_l3_len     # the arriving packet's (merge_two_vxlan_tcp4_packets)
    hdr_len = off + head_m.l2_len + head_m.l3_len + head_m.l4_len
    if head_len - off - head_m.l2_len + tail_len - hdr_len > MAX_IPV4_PKT_LENGTH:
        return False
    if cmp > 0:
        item.data += data[hdr_len:]
        item.covers += covers
        item.ip_id = ip_id
    else:
        item.data = data + item.data[hdr_len:]
        item.covers = covers + item.covers
        item.m = m
        item.sent_seq = sent_seq
        item.ip_id = ip_id
    item.nb_merged += 1
    return True


def tcp4_reassemble(tbl: _Table, data: bytearray, m: Mbuf, covers: List[int]) -> Tuple[int, Optional[str], bytearray]:
    """gro_tcp4_reassemble (gro_tcp4.c): (1 merged | 0 held | -1 unprocessed, the reason
    (unprocessed: why; held: why apart from the flow's held packets, None for a new
    flow), the packet's bytes as the library leaves them: an ACK segment loses its padding)."""
    if m.l4_len < 20 or m.l4_len > MAX_TCP_HLEN:
        return -1, "dpdk_tcp_hdr_len", data
    l2, l3 = m.l2_len, m.l3_len
    tcp = l2 + l3
    if data[tcp + 13] != TCP_ACK:
        return -1, "dpdk_tcp_flags", data
    ip_tlen = _u16(data, l2 + 2)
    if len(data) > ip_tlen + l2:
        del data[ip_tlen + l2:]          # rte_pktmbuf_trim of the tail padding
    tcp_dl = len(data) - tcp - m.l4_len
    if tcp_dl <= 0:
        return -1, "dpdk_no_payload", data
    is_atomic = bool(_u16(data, l2 + 6) & DF)
    ip_id = 0 if is_atomic else _u16(data, l2 + 4)
    sent_seq = _u32(data, tcp + 4)
    # tcp4_flow_key: MAC addresses, IP addresses, ports, ACK number (not VLAN, TTL, TOS)
    key = bytes(data[0:12]) + bytes(data[l2 + 12:l2 + 20]) + bytes(data[tcp:tcp + 4]) + bytes(data[tcp + 8:tcp + 12])
    chain = tbl.find(key)
    if chain is None:
        if tbl.item_num >= tbl.max_items:
            return -1, "dpdk_table_full", data
        tbl.item_num += 1
        # the ACK number is part of the flow key: a new ACK opens a flow of its own
        prefix = key[:-4]
        apart = "dpdk_ack_differs" if prefix in tbl.prefixes else None
        tbl.prefixes[prefix] = True
        tbl.add_flow(key, _Item(data, covers, m, sent_seq, ip_id, is_atomic, held_apart=apart))
        return 0, apart, data
    why = None
    for pos, item in enumerate(chain):
        cmp, why = _check_seq_option(item, data, m, sent_seq, ip_id, tcp_dl, is_atomic)
        if cmp:
            if _merge(item, data, m, covers, cmp, sent_seq, ip_id):
                return 1, None, data
            if tbl.item_num >= tbl.max_items:
                return -1, "dpdk_table_full", data
            tbl.item_num += 1
            chain.insert(pos + 1, _Item(data, covers, m, sent_seq, ip_id, is_atomic, held_apart="dpdk_max_length"))
            return 0, "dpdk_max_length", data
    if tbl.item_num >= tbl.max_items:
        return -1, "dpdk_table_full", data
    tbl.item_num += 1
    chain.append(_Item(data, covers, m, sent_seq, ip_id, is_atomic, held_apart=why))
    return 0, why, data


def _check_vxlan_seq_option(item: _Item, data, m: Mbuf, sent_seq: int, outer_ip_id: int, ip_id: int, tcp_dl: int,
                            outer_is_atomic: bool, is_atomic: bool) -> Tuple[int, Optional[str]]:
    """check_vxlan_seq_option (gro_vxlan_tcp4.c): the outer DF bits must match, the
    inner packets be neighbours (check_seq_option) and, without outer DF, the outer
    IP ID continue (append) or precede (prepend) the held one's."""
    if item.outer_is_atomic != outer_is_atomic:
        return 0, "dpdk_outer_df_differs"
    cmp, why = _check_seq_option(item, data, m, sent_seq, ip_id, tcp_dl, is_atomic)
    if cmp > 0:
        if outer_is_atomic or outer_ip_id == item.outer_ip_id + 1:
            return 1, None
        return 0, "dpdk_outer_ip_id_not_next"
    if cmp < 0:
        if outer_is_atomic or outer_ip_id + item.nb_merged == item.outer_ip_id:
            return -1, None
        return 0, "dpdk_outer_ip_id_not_next"
    return 0, why


def vxlan_tcp4_reassemble(tbl: _Table, data: bytearray, m: Mbuf, covers: List[int]) -> Tuple[int, Optional[str]]:
    """gro_vxlan_tcp4_reassemble (gro_vxlan_tcp4.c): TCP/IPv4 in VXLAN in UDP/IPv4, as
    tcp4_reassemble but keyed on the outer headers and VXLAN header too, with the outer
    IPv4 DF and ID rules; no padding trim (that is gro_tcp4's alone)."""
    if m.l4_len < 20 or m.l4_len > MAX_TCP_HLEN:
        return -1, "dpdk_tcp_hdr_len"
    o2, o3 = m.outer_l2_len, m.outer_l3_len
    udp = o2 + o3
    ip = udp + m.l2_len
    tcp = ip + m.l3_len
    if data[tcp + 13] != TCP_ACK:
        return -1, "dpdk_tcp_flags"
    tcp_dl = len(data) - tcp - m.l4_len
    if tcp_dl <= 0:
        return -1, "dpdk_no_payload"
    outer_is_atomic = bool(_u16(data, o2 + 6) & DF)
    outer_ip_id = 0 if outer_is_atomic else _u16(data, o2 + 4)
    is_atomic = bool(_u16(data, ip + 6) & DF)
    ip_id = 0 if is_atomic else _u16(data, ip + 4)
    sent_seq = _u32(data, tcp + 4)
    inner_eth = udp + 16
    # vxlan_tcp4_flow_key: outer MACs, outer IPs, UDP ports, VXLAN flags and VNI words,
    # inner MACs, inner IPs, TCP ports, ACK number (the ACK last, for dpdk_ack_differs)
    key = (bytes(data[0:12]) + bytes(data[o2 + 12:o2 + 20]) + bytes(data[udp:udp + 4]) + bytes(data[udp + 8:udp + 16])
           + bytes(data[inner_eth:inner_eth + 12]) + bytes(data[ip + 12:ip + 20]) + bytes(data[tcp:tcp + 4])
           + bytes(data[tcp + 8:tcp + 12]))

    def new_item(apart):
        return _Item(data, covers, m, sent_seq, ip_id, is_atomic, held_apart=apart, outer_ip_id=outer_ip_id,
                     outer_is_atomic=outer_is_atomic)

    chain = tbl.find(key)
    if chain is None:
        if tbl.item_num >= tbl.max_items:
            return -1, "dpdk_table_full"
        tbl.item_num += 1
        prefix = key[:-4]
        apart = "dpdk_ack_differs" if prefix in tbl.prefixes else None
        tbl.prefixes[prefix] = True
        tbl.add_flow(key, new_item(apart))
        return 0, apart
    why = None
    for pos, item in enumerate(chain):
        cmp, why = _check_vxlan_seq_option(item, data, m, sent_seq, outer_ip_id, ip_id, tcp_dl, outer_is_atomic,
                                           is_atomic)
        if cmp:
            if _merge(item, data, m, covers, cmp, sent_seq, ip_id):
                if cmp > 0:
                    item.outer_ip_id = outer_ip_id     # merge_two_vxlan_tcp4_packets: the larger ID
                return 1, None
            if tbl.item_num >= tbl.max_items:
                return -1, "dpdk_table_full"
            tbl.item_num += 1
            chain.insert(pos + 1, new_item("dpdk_max_length"))
            return 0, "dpdk_max_length"
    if tbl.item_num >= tbl.max_items:
        return -1, "dpdk_table_full"
    tbl.item_num += 1
    chain.append(new_item(why))
    return 0, why


def _flush(tbl: _Table, reason: str, burst: int, out: List[DpdkPacket]) -> None:
    """gro_tcp4_tbl_timeout_flush / gro_udp4_tbl_timeout_flush with everything due:
    flows in slot order, each chain in order; update_header writes the IPv4 total
    length of merged packets (and clears MF of a reassembly that holds the last
    fragment)."""
    for slot in sorted(tbl.chains):
        chain = tbl.chains[slot]
        while chain:
            if isinstance(chain[0], _FragItem):
                _merge_fragments(chain)
            item = chain.pop(0)
            if item.nb_merged > 1 and item.m.outer_l2_len:
                # update_vxlan_header: outer IPv4 total length, UDP length, inner IPv4 total length
                n = (len(item.data) - item.m.outer_l2_len) & 0xFFFF
                o = item.m.outer_l2_len + 2
                item.data[o:o + 2] = n.to_bytes(2, "big")
                n = (n - item.m.outer_l3_len) & 0xFFFF
                o = item.m.outer_l2_len + item.m.outer_l3_len
                item.data[o + 4:o + 6] = n.to_bytes(2, "big")
                n = (n - item.m.l2_len) & 0xFFFF
                o += item.m.l2_len + 2
                item.data[o:o + 2] = n.to_bytes(2, "big")
                if isinstance(item, _FragItem) and item.is_last_frag:
                    item.data[o + 4] &= ~(MF >> 8) & 0xFF      # update_vxlan_header: the inner MF
            elif item.nb_merged > 1:
                n = len(item.data) - item.m.l2_len
                o = item.m.l2_len + 2
                item.data[o:o + 2] = n.to_bytes(2, "big")
                if isinstance(item, _FragItem) and item.is_last_frag:
                    item.data[o + 4] &= ~(MF >> 8) & 0xFF
            out.append(DpdkPacket(bytes(item.data), item.covers, reason, burst, item.held_apart))
    tbl.clear()


# -----------------------------------------------------------------------------
# UDP/IPv4: IPv4 fragment reassembly (gro_udp4.c, gro_udp4.h)
# -----------------------------------------------------------------------------
@dataclass
class _FragItem:
    """gro_udp4_item: a held fragment (or run of fragments)."""

    data: bytearray
    covers: List[int]
    m: Mbuf
    frag_offset: int
    is_last_frag: bool
    nb_merged: int = 1
    held_apart: Optional[str] = None


def _frag_neighbor(item: _FragItem, frag_offset: int, ip_dl: int) -> int:
    """udp4_check_neighbor: 1 append, -1 prepend, 0.  The held length is a uint16_t
    counted from the mbuf (Ethernet padding included, never trimmed)."""
    o = item.m
    held = (len(item.data) - o.outer_l2_len - o.outer_l3_len - o.l2_len - o.l3_len) & 0xFFFF
    if frag_offset == item.frag_offset + held:
        return 1
    if frag_offset + ip_dl == item.frag_offset:
        return -1
    return 0


def _merge_frag(item: _FragItem, data: bytearray, m: Mbuf, covers: List[int], cmp: int, frag_offset: int,
                is_last: bool) -> bool:
    """merge_two_udp4_packets: the head's headers stay; refused past 65,535 bytes of IPv4."""
    head_m = item.m if cmp > 0 else m
    head_len, tail_len = (len(item.data), len(data)) if cmp > 0 else (len(data), len(item.data))
    off = m.outer_l2_len + m.outer_l3_len     # VXLAN: the arriving packet's (merge_two_vxlan_udp4_packets)
    hdr_len = off + head_m.l2_len + head_m.l3_len
    if head_len - off - head_m.l2_len + tail_len - hdr_len > MAX_IPV4_PKT_LENGTH:
        return False
    if cmp > 0:
        item.data += data[hdr_len:]
        item.covers += covers
    else:
        item.data = data + item.data[hdr_len:]
        item.covers = covers + item.covers
        item.m = m
        item.frag_offset = frag_offset
    item.nb_merged += 1
    if is_last:
        item.is_last_frag = True
    return True


def _merge_fragments(chain: List[_FragItem]) -> None:
    """gro_udp4_merge_items: before the flow's first packet is flushed, the packets
    after it are merged into it while each is its neighbour."""
    start = chain[0]
    while len(chain) > 1:
        nxt = chain[1]
        ip_dl = (len(nxt.data) - nxt.m.outer_l2_len - nxt.m.outer_l3_len - nxt.m.l2_len - nxt.m.l3_len) & 0xFFFF
        if ip_dl >= 0x8000:
            ip_dl -= 0x10000                  # an int16_t in gro_udp4_merge_items
        cmp = _frag_neighbor(start, nxt.frag_offset, ip_dl)
        if not cmp or not _merge_frag(start, nxt.data, nxt.m, nxt.covers, cmp, nxt.frag_offset, nxt.is_last_frag):
            return
        del chain[1]


def udp4_reassemble(tbl: _Table, data: bytearray, m: Mbuf, covers: List[int]) -> Tuple[int, Optional[str]]:
    """gro_udp4_reassemble (gro_udp4.c): 1 merged, 0 held, -1 unprocessed, with the reason
    as tcp4_reassemble gives it."""
    l2, l3 = m.l2_len, m.l3_len
    frag = _u16(data, l2 + 6)
    if not frag & (MF | OFFSET_MASK):
        return -1, "dpdk_udp_not_fragment"
    ip_dl = _u16(data, l2 + 2)
    # 22.11's librte_gro trims a fragment's tail padding here, before the length checks
    # (measured: the revision of gro_udp4.c read for this model lacks the trim)
    if len(data) > ip_dl + l2:
        del data[ip_dl + l2:]
    if len(data) <= l2 + l3 or ip_dl <= l3:
        return -1, "dpdk_no_payload"
    ip_dl -= l3
    is_last = not frag & MF
    frag_offset = ((frag & OFFSET_MASK) << 3) & 0xFFFF
    # udp4_flow_key: MAC addresses, IP addresses, IP ID
    key = bytes(data[0:12]) + bytes(data[l2 + 12:l2 + 20]) + bytes(data[l2 + 4:l2 + 6])
    return _frag_insert(tbl, key, data, m, covers, frag_offset, ip_dl, is_last)


def _frag_insert(tbl: _Table, key: bytes, data: bytearray, m: Mbuf, covers: List[int], frag_offset: int, ip_dl: int,
                 is_last: bool) -> Tuple[int, Optional[str]]:
    """The table part of gro_udp4_reassemble / gro_vxlan_udp4_reassemble."""
    chain = tbl.find(key)
    if chain is None:
        if tbl.item_num >= tbl.max_items:
            return -1, "dpdk_table_full"
        tbl.item_num += 1
        tbl.add_flow(key, _FragItem(data, covers, m, frag_offset, is_last))
        return 0, None
    pos = 0
    while pos < len(chain):
        item = chain[pos]
        cmp = _frag_neighbor(item, frag_offset, ip_dl)
        if cmp:
            if _merge_frag(item, data, m, covers, cmp, frag_offset, is_last):
                return 1, None
            if tbl.item_num >= tbl.max_items:
                return -1, "dpdk_table_full"
            tbl.item_num += 1          # stored after the previous packet (after the first, at the start)
            chain.insert(max(pos, 1), _FragItem(data, covers, m, frag_offset, is_last, held_apart="dpdk_max_length"))
            return 0, "dpdk_max_length"
        if frag_offset < item.frag_offset:
            break                      # the chain stays ordered by fragment offset
        pos += 1
    if tbl.item_num >= tbl.max_items:
        return -1, "dpdk_table_full"
    tbl.item_num += 1
    chain.insert(pos, _FragItem(data, covers, m, frag_offset, is_last, held_apart="dpdk_frag_not_adjacent"))
    return 0, "dpdk_frag_not_adjacent"


def vxlan_udp4_reassemble(tbl: _Table, data: bytearray, m: Mbuf, covers: List[int]) -> Tuple[int, Optional[str]]:
    """gro_vxlan_udp4_reassemble (gro_vxlan_udp4.c): IPv4 fragment reassembly inside
    VXLAN, as udp4_reassemble but keyed on the outer headers (not the outer UDP source
    port) and the VXLAN words too; no outer IP ID or DF rule; no padding trim."""
    udp = m.outer_l2_len + m.outer_l3_len
    ip = udp + m.l2_len
    frag = _u16(data, ip + 6)
    if not frag & (MF | OFFSET_MASK):
        return -1, "dpdk_udp_not_fragment"
    ip_dl = len(data) - ip - m.l3_len
    if ip_dl <= 0:
        return -1, "dpdk_no_payload"
    is_last = not frag & MF
    frag_offset = ((frag & OFFSET_MASK) << 3) & 0xFFFF
    inner_eth = udp + 16
    # vxlan_udp4_flow_key: outer MACs and IPs, UDP destination port, VXLAN flags and VNI
    # words, inner MACs, inner IPs, inner IP ID
    key = (bytes(data[0:12]) + bytes(data[m.outer_l2_len + 12:m.outer_l2_len + 20]) + bytes(data[udp + 2:udp + 4])
           + bytes(data[udp + 8:udp + 16]) + bytes(data[inner_eth:inner_eth + 12]) + bytes(data[ip + 12:ip + 20])
           + bytes(data[ip + 4:ip + 6]))
    return _frag_insert(tbl, key, data, m, covers, frag_offset, ip_dl, is_last)


OUTCOMES = {1: "merged", 0: "held", -1: "unprocessed"}


def simulate(frames: Iterable[bytes], settings: DpdkSettings,
             on_decision: Optional[Callable[[int, int, str, Optional[str]], None]] = None) -> List[DpdkPacket]:
    """Every frame through DPDK's GRO as the application drives it; the packets it
    returns, in the order it returns them.  ``on_decision(frame, burst, outcome,
    reason)``, when given, hears each frame's fate: merged, held (reason: why
    apart from its flow's held packets) or unprocessed (reason: why)."""
    out: List[DpdkPacket] = []
    tcp4 = "tcp4" in settings.gro_types
    udp4 = "udp4" in settings.gro_types
    vxlan_tcp4 = "vxlan_tcp4" in settings.gro_types
    vxlan_udp4 = "vxlan_udp4" in settings.gro_types
    vxlan_ports = tuple(settings.vxlan_ports)
    heavy = settings.mode == "heavy"
    pairs = settings.max_flows * settings.max_items
    entries = min(pairs, GRO_TCP4_TBL_MAX_ITEM_NUM)       # the same cap for the UDP table
    tables = tuple(_Table(entries) for _ in range(4)) if heavy else None
    burst: List[Tuple[int, bytes]] = []
    nb = 0

    def flush(tcp_tbl, udp_tbl, vxlan_tbl, vxlan_udp_tbl, reason):
        # rte_gro_timeout_flush / rte_gro_reassemble_burst: VXLAN TCP, VXLAN UDP, TCP, UDP
        _flush(vxlan_tbl, reason, nb, out)
        _flush(vxlan_udp_tbl, reason, nb, out)
        _flush(tcp_tbl, reason, nb, out)
        _flush(udp_tbl, reason, nb, out)

    def run_burst(frames_in: Sequence[Tuple[int, bytes]], last: bool) -> None:
        nonlocal nb
        if heavy:
            tcp_tbl, udp_tbl, vxlan_tbl, vxlan_udp_tbl = tables
        else:
            size = min(len(frames_in), pairs, RTE_GRO_MAX_BURST_ITEM_NUM)
            tcp_tbl, udp_tbl, vxlan_tbl, vxlan_udp_tbl = _Table(size), _Table(size), _Table(size), _Table(size)
        unprocessed: List[DpdkPacket] = []
        for index, frame in frames_in:
            data = bytearray(frame)
            m = classify(frame, vxlan_ports)
            if vxlan_tcp4 and is_vxlan_tcp4(m.packet_type):
                ret, why = vxlan_tcp4_reassemble(vxlan_tbl, data, m, [index])
            elif vxlan_udp4 and is_vxlan_udp4(m.packet_type):
                ret, why = vxlan_udp4_reassemble(vxlan_udp_tbl, data, m, [index])
            elif tcp4 and is_ipv4_tcp(m.packet_type):
                ret, why, data = tcp4_reassemble(tcp_tbl, data, m, [index])
            elif udp4 and is_ipv4_udp(m.packet_type):
                ret, why = udp4_reassemble(udp_tbl, data, m, [index])
            else:
                ret, why = -1, "dpdk_not_gro_type"
            if on_decision is not None:
                on_decision(index, nb, OUTCOMES[ret], why)
            if ret < 0:
                unprocessed.append(DpdkPacket(bytes(data), [index], why, nb))
        if heavy:
            out.extend(unprocessed)            # rte_gro_reassemble returns them at once
            if (nb + 1) % settings.flush_every == 0 or last:
                flush(tcp_tbl, udp_tbl, vxlan_tbl, vxlan_udp_tbl, "end_of_capture" if last else "dpdk_timeout_flush")
        else:
            flush(tcp_tbl, udp_tbl, vxlan_tbl, vxlan_udp_tbl, "dpdk_burst_end")   # rte_gro_reassemble_burst: the tables first
            out.extend(unprocessed)
        nb += 1

    for index, frame in enumerate(frames):
        burst.append((index, frame))
        if len(burst) == settings.burst:
            run_burst(burst, False)
            burst = []
    if burst:
        run_burst(burst, True)
    elif heavy and any(t.item_num for t in tables):
        nb -= 1
        flush(*tables, "end_of_capture")
    return out
