"""The GRO core of one NAPI instance: struct gro_node and net/core/gro.c.

Buckets, hold/merge/normal outcomes, eviction, flushing, completion and the
gro_normal delivery list.  Protocol knowledge lives in the layer modules
(link.py, vlan.py, ipv4.py, ipv6.py, tcp.py), reached through the offload
tables in offloads.py exactly as dev_gro_receive reaches packet_offload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List, Optional

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from .config import GRO_HASH_BUCKETS, GRO_LEGACY_MAX_SIZE, MAX_GRO_SKBS, Settings
from .hoststate import HostSockets
from .kernels import cached_profile
from .skb import (Delivery, Skb, Stats, clear_keeping_room, delete_keeping_room, key_matches, new_delivery,
                  new_super_packet)
from . import offloads
from .offloads import PACKET_OFFLOADS, packet_offload
from .ipv6 import KEY_FIELDS, KEY_FIELDS_WITH_HOPLIMIT      # (after offloads, which imports ipv6)


class Bucket:
    """One gro_list: held packets, oldest first."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: List[Skb] = []

    def find(self, hash_: int, key: bytes) -> Optional[Skb]:
        """The held packet of the arriving packet's flow, or None.

        gro_list_prepare compares the hash first, then each layer clears
        same_flow on a header difference; "every compared header byte is
        equal" is the concatenated compared bytes (skb.key) being equal.  At
        most one held packet per hash and key exists, because a matching
        arrival either merges into it or completes it.
        """
        for p in self.held:
            if p.hash == hash_ and p.key == key:
                return p
        return None

    def find_waiting(self, hash_: int, skb: Skb) -> Optional[Skb]:
        """find(hash_, settled_key(skb)), comparing the skb's waiting key bytes
        where they lie (key_matches): an arrival that merges never has its key
        copied."""
        for p in self.held:
            if p.hash == hash_ and key_matches(p.key, skb):
                return p
        return None

    def remove(self, p: Skb) -> None:
        """Take held packet p out (by identity: list.remove would call each
        packet's rich comparison on the way, a Python call apiece)."""
        held = self.held
        i = 0
        while held[i] is not p:
            i += 1
        if cython.compiled:
            delete_keeping_room(held, i)     # a bucket empties at every flush: its storage kept
        else:
            del held[i]


class GroNode:
    """napi->gro: hash buckets, the rx_list and the completion path.

    ``deliver(batch)`` is handed each batch for the duration of the call (the
    compiled build empties and reuses the list after it returns): keep the
    deliveries, not the list."""

    def __init__(self, settings: Settings, stats: Stats, deliver: Callable[[List[Delivery]], None],
                 queue: int = 0):
        self.settings = settings
        self.stats = stats
        self.buckets = [Bucket() for _ in range(GRO_HASH_BUCKETS)]
        self.held_count = 0            # total held, stands in for gro->bitmask != 0
        self.jiffies = 0
        self.rx_list: List[Delivery] = []
        self.rx_count = 0
        self._gso_types: List[str] = []     # the compiled build's list for complete(), emptied before each
        self.queue = queue
        self.poll = 0
        # decision events: None, or the EventRecorder (events.py) that receive,
        # complete and normal tell of each call (one test per call when None)
        self.events = None
        self._deliver = deliver
        self._batch = settings.gro_normal_batch
        self.verify_l4 = settings.csum != "trust"
        self.csum_auto = settings.csum == "auto"
        self.gro_enabled = settings.gro
        self.max_skb_frags = settings.max_skb_frags
        self.l4_csum_full = settings.l4_csum == "full"
        # the kernel release modelled: each version-dependent rule reads its row here, once
        kernel = cached_profile(settings.kernel)
        self.kernel = kernel
        self.host = HostSockets(settings, kernel)
        self.rx_count_segs = kernel.holds("C1")
        self.rx_gro_list = settings.rx_gro_list
        self.tcp_fraglist = settings.rx_gro_list and kernel.holds("T2")
        self.tcp_cwr_compared = kernel.holds("T1")
        # inet_gro_flush's IP ID rule: 0 before 6.10, 1 from 6.10 (row L1), 2 from 6.18 (row L2)
        self.ipid_rule = 2 if kernel.holds("L2") else 1 if kernel.holds("L1") else 0
        self.udp_l3_checks = kernel.holds("U1")
        self.udp_tunnel_seed_outer = kernel.holds("U6")
        self.udp_zero_csum_tunnel = kernel.holds("U9")
        self.flist_honours_flush = kernel.holds("C11")
        # row V1: before 5.18 the hop limit is part of the same-flow key
        self.ipv6_key_fields = KEY_FIELDS if kernel.holds("V1") else KEY_FIELDS_WITH_HOPLIMIT
        # skb_gro_receive's size limits (merge_allowed_size)
        if not kernel.holds("C7"):
            self.ipv6_max_size = self.ipv4_max_size = GRO_LEGACY_MAX_SIZE
        elif not kernel.holds("C12"):
            # one gro_max_size for every protocol; above 64 KiB only from 5.19 (C8)
            self.ipv6_max_size = self.ipv4_max_size = settings.gro_max_size if kernel.holds("C8") \
                else min(settings.gro_max_size, GRO_LEGACY_MAX_SIZE)
        else:
            self.ipv6_max_size = settings.gro_max_size
            self.ipv4_max_size = settings.gro_ipv4_max_size
        self.bigtcp_ipv4 = kernel.holds("C12")
        self.bigtcp_strict = kernel.holds("C13")
        # row C13: a frame a packet socket injects into veth has its Ethernet header 2 bytes into the buffer
        self.bigtcp_ipv6_room = not (self.bigtcp_strict and settings.device == "veth")
        # below every limit merge_allowed_size checks, it cannot refuse
        self.size_check_from = min(GRO_LEGACY_MAX_SIZE, self.ipv6_max_size, self.ipv4_max_size)
        # the packet_offload list this kernel has (PacketOffload objects):
        # without CONFIG_VLAN_8021Q no VLAN GRO
        self.packet_offloads = tuple(
            offload for ethertype, offload in PACKET_OFFLOADS.items()
            if settings.vlan_gro or ethertype not in offloads.VLAN_ETHERTYPES)
        # the entry the last frame's protocol found (the list never changes): the
        # next frame of that protocol is not searched for again
        self.last_offload = self.packet_offloads[0]

    # -- dev_gro_receive --------------------------------------------------------
    def receive(self, skb: Skb) -> None:
        """dev_gro_receive + gro_skb_finish for one received frame."""
        events = self.events
        if events is not None and not events.receiving:
            events.record_receive(self, skb)         # calls receive() again, inside the record
            return
        if not self.gro_enabled:
            # netif_elide_gro: GRO off on the device
            self.normal(skb, "gro_disabled")
            return
        bucket = self.buckets[skb.hash & (GRO_HASH_BUCKETS - 1)]
        entry = self.last_offload
        if entry.type != skb.protocol:
            entry = packet_offload(self.packet_offloads, skb.protocol)
            if entry is None:
                self.normal(skb, skb.flush or "no_l2_handler")
                return
            self.last_offload = entry
        if cython.compiled:
            pp = entry.receive(bucket, skb, self)        # a C method (IPv4, IPv6: INDIRECT_CALL_INET)
        else:
            pp = entry.gro_receive(bucket, skb, self)    # the interpreter calls the handler itself
        if pp is not None:
            bucket.remove(pp)
            self.held_count -= 1
            self.complete(pp, pp.flush)
        if skb.same_flow:
            return                                   # GRO_MERGED(_FREE)
        if skb.flush is not None:
            self.normal(skb, skb.flush)              # GRO_NORMAL
            return
        if len(bucket.held) >= MAX_GRO_SKBS:
            # gro_flush_oldest: the tail of the kernel's list is our held[0]
            oldest = bucket.held[0]
            bucket.remove(oldest)
            self.held_count -= 1
            self.complete(oldest, "bucket_full_evict_oldest")
        self.hold(bucket, skb)

    def hold(self, bucket: Bucket, skb: Skb) -> None:
        """GRO_HELD: the packet becomes the head of a new aggregate."""
        skb.age = self.jiffies
        skb.payload_len = gro_len = skb.end - skb.off    # skb_gro_len
        skb.gso_size = gro_len                       # dev_gro_receive: gso_size = skb_gro_len
        skb.next_merged = None                   # nothing merged behind it yet
        skb.last_merged = None
        skb.length = skb.end - skb.start - skb.l2_len   # p->len: from the network header
        skb.ip_fixedid = 0
        skb.flag_or = 0
        skb.encapsulation = 0
        if not self.rx_gro_list:
            skb.is_flist = 0                         # only rx-gro-list decides per packet
        bucket.held.append(skb)
        self.held_count += 1

    def merge_allowed_size(self, p: Skb, skb: Skb, length: int) -> Optional[str]:
        """skb_gro_receive's size limits; returns the refusal reason or None."""
        total = p.length + length
        # netif_get_gro_max_size: gro_max_size for IPv6, gro_ipv4_max_size otherwise (rows C7, C9)
        if p.protocol == 0x86DD:
            limit = self.ipv6_max_size
        else:
            limit = self.ipv4_max_size
        if total >= limit:
            return "merge_max_size"
        if total >= GRO_LEGACY_MAX_SIZE and not self.bigtcp_eligible(p, skb):
            return "merge_bigtcp_ineligible"
        return None

    def bigtcp_eligible(self, p: Skb, skb: Skb) -> bool:
        """skb_gro_receive: may this aggregate pass 64 KiB (BIG TCP)?"""
        if skb.proto != 6 or p.encap_mark:
            return False                             # only plain TCP, never encapsulated
        if p.protocol == 0x86DD:
            # before 6.3 (row C12) the IPv6 next header itself must be TCP
            return self.bigtcp_ipv6_room and (self.bigtcp_ipv4 or p.data[p.network_offsets[0] + 6] == 6)
        # IPv4 from 6.3 (row C12); a VLAN-tagged one not since row C13
        return self.bigtcp_ipv4 and (p.protocol == 0x0800 or not self.bigtcp_strict)

    def merge(self, p: Skb, skb: Skb) -> Optional[str]:
        """skb_gro_receive: append skb's payload to p.  Returns a refusal reason or None."""
        if skb.flush is not None:
            return skb.flush                         # -E2BIG on a flagged skb
        length = skb.end - skb.off
        # merge_allowed_size, inlined for the common case that fits everywhere
        total = p.length + length
        if total >= self.size_check_from:
            refusal = self.merge_allowed_size(p, skb, length)
            if refusal is not None:
                return refusal
        skb.payload_len = length                 # its payload: the last length bytes of its frame
        # chained behind the last one (NAPI_GRO_CB(p)->last): no list per aggregate, and
        # no call (the interpreter's calls cost more than these lines)
        last = p.last_merged
        if last is None:
            p.next_merged = skb
        else:
            last.next_merged = skb
        p.last_merged = skb
        p.count += skb.count
        p.length += length
        p.payload_len += length
        skb.same_flow = True
        return None

    def merge_list(self, p: Skb, skb: Skb) -> Optional[str]:
        """skb_gro_receive_list (fraglist GRO): chain the whole skb, headers pulled
        off, behind p.  Returns a refusal reason or None."""
        if skb.flush is not None and self.flist_honours_flush:
            # a flagged skb is refused, as skb_gro_receive does (row C11)
            return skb.flush
        if p.length + skb.end - skb.start - skb.l2_len >= 65536:
            # the limit is fixed: gro_max_size is not consulted
            return "flist_max_size"
        length = skb.end - skb.off
        skb.payload_len = length
        last = p.last_merged                     # chained as merge() does
        if last is None:
            p.next_merged = skb
        else:
            last.next_merged = skb
        p.last_merged = skb
        p.count += 1
        p.length += length
        p.payload_len += length
        skb.same_flow = True
        return None

    # -- completion and delivery ------------------------------------------------
    def complete(self, p: Skb, reason: str) -> None:
        """gro_complete: rebuild the super-packet and queue it for delivery."""
        if self.events is not None:
            self.events.record_complete(self, p, reason)     # before: completion rewrites p
        layer = p.flush_layer if p.encap_mark and reason == p.flush else ""
        if p.count == 1:
            # a lone held packet goes up unchanged
            self.normal_one(new_delivery(p, reason, p.key, p.payload_len, self.queue, self.poll, layer))
            return
        # the headers GRO walked, copied to be rebuilt: header offsets count from the frame's start
        start = p.start
        first = p.data
        raw = first    # the same bytes read in place (a C pointer in the compiled build)
        if cython.compiled:
            header = PyByteArray_FromStringAndSize(cython.cast(cython.p_char, raw) + start, p.off - start)  # one copy
        else:
            header = bytearray(raw[start:p.off])
        if start:
            p.network_offsets[0] -= start    # (read by the completions in header; p is done after)
            p.network_offsets[1] -= start
        # gro_complete: the packet_offload gro_complete for skb->protocol, nhoff at the L3 start
        entry = packet_offload(self.packet_offloads, p.protocol)
        if cython.compiled:
            gso_type = self._gso_types       # one list, emptied with its storage kept (skb.clear_keeping_room)
            clear_keeping_room(gso_type)
            entry.complete(self, p, header, gso_type, p.l2_len)
        else:
            gso_type: List[str] = []
            entry.gro_complete(self, p, header, gso_type, p.l2_len)
        self.normal_one(new_super_packet(p, header, reason, tuple(gso_type), self.queue, self.poll, layer))

    def normal(self, skb: Skb, reason: str) -> None:
        """GRO_NORMAL: the received frame goes up alone and unchanged."""
        if self.events is not None:
            self.events.record_normal(reason)
        # the key is a full flow identity, and skb.off the payload start, only once TCP has parsed it
        parsed = bool(skb.l4_off)
        self.normal_one(new_delivery(skb, reason, skb.key if parsed else b"",
                                     skb.end - skb.off if parsed else 0, self.queue, self.poll, ""))

    def normal_one(self, delivery: Delivery) -> None:
        """gro_normal_one: rx_count counts segments; a full batch goes to the stack."""
        self.rx_list.append(delivery)
        # row C1: 5.10.0 counted one per delivery
        self.rx_count += delivery.segs if self.rx_count_segs else 1
        if self.rx_count >= self._batch:
            self.normal_list()

    def normal_list(self) -> None:
        """gro_normal_list: hand rx_list to the stack."""
        if self.rx_list:
            self.stats.normal_batches += 1
            self.rx_count = 0
            # the stack takes the batch during the call (the devices' deliver copies it on);
            # emptied after, compiled with its storage kept (skb.clear_keeping_room)
            self._deliver(self.rx_list)
            if cython.compiled:
                clear_keeping_room(self.rx_list)
            else:
                self.rx_list = []

    # -- flushing ---------------------------------------------------------------
    def flush(self, flush_old: bool, reason: str) -> None:
        """__gro_flush: buckets in index order, each oldest first; with flush_old
        a bucket stops at the first packet held during the current jiffy."""
        if not self.held_count:
            return
        jiffies = self.jiffies
        for bucket in self.buckets:
            held = bucket.held
            while held:
                p = held[0]
                if flush_old and p.age == jiffies:
                    break
                bucket.remove(p)
                self.held_count -= 1
                self.complete(p, reason)

    def flush_normal(self, flush_old: bool, reason: str) -> None:
        """gro_flush_normal: flush, then deliver rx_list."""
        self.flush(flush_old, reason)
        self.normal_list()
