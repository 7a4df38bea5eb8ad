"""The packet as GRO sees it: struct sk_buff plus struct napi_gro_cb, reduced
to what decisions and the rebuilt super-packet need.

One class serves both the incoming packet and a held aggregate ("p" in the
kernel): holding a packet just gives it the aggregate fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from .layout import shape


def _slots_equal(cls, a, b):
    """== for the record classes below: the same class and every slot equal."""
    if type(b) is not cls:
        return NotImplemented
    return all(getattr(a, name) == getattr(b, name) for name in cls.__slots__)


def _slots_repr(cls, obj) -> str:
    fields = ", ".join(f"{name}={getattr(obj, name)!r}" for name in cls.__slots__)
    return f"{cls.__name__}({fields})"


# The compiled engine reads a frame where it lies in the capture reader's
# buffer (Skb.start/end); the interpreter is given each frame as its own
# string: offsets into a large buffer are beyond the small integers Python
# keeps ready, and every header offset it computes would be a new object.
FRAMES_IN_PLACE = cython.compiled
# Delivery.delivered_ns without a clock (veth, the API's own deliveries): the
# smallest 64-bit integer, below any time the engine's clock can read
NO_CLOCK = -(2 ** 63)


# Neither an skb nor a delivery can be part of a reference cycle: their fields
# hold bytes, strings, integers and lists or tuples of those, and an skb the
# segments merged behind it (a chain that ends: a segment is merged once, into
# a head that is never merged itself), a delivery its head.
# The compiled build leaves them out of the cycle collector (no tracking when
# made and freed, nothing for a collection to walk), and keeps freed ones for
# reuse (no allocator call per frame).
@cython.freelist(256)
@cython.no_gc
@cython.cclass
class Skb:
    __slots__ = (
        # incoming packet, napi_gro_cb style
        "data",          # bytes holding the frame, link header included, at [start, end): in
                         # the compiled replay the capture reader's buffer, kept (never changed)
                         # while the skb is held or merged; given by the API, the frame itself
        "start",         # the frame's first byte in data; every offset below counts from data[0]
        "end",           # one past the frame's last byte in data
        "ts",            # capture timestamp, ns
        "index",         # 0-based position in the capture
        "hash",          # skb->hash (raw RSS hash, 0 without RSS)
        "l2_len",        # bytes of link header before skb->data (ETH_HLEN for Ethernet)
        "protocol",      # skb->protocol: the ethertype after the link header
        "off",           # skb_gro_offset (as an offset in data: the frame's start + skb_gro_offset)
        "flush",         # None or the reason that forbids holding/merging this skb
        "proto",         # innermost L4 protocol number recorded by the IP layer
        "key",           # same-flow identity: the header bytes every layer compares
        "key_from_frame",  # the frame's first bytes (its link header) that belong to the key
                           # but are not copied into it yet: the first extend_key copies them
        "key_at", "key_n", "key_at2", "key_n2", "key_at3", "key_n3",
                         # three more ranges of the frame waiting to join the key after
                         # those (defer_key): a merged segment's key is never copied
        "count",         # segments (1 for a received frame)
        "network_offsets",  # [outer, inner] L3 header offsets (in data; header-relative once completed)
        "encap_mark",
        "outer_family",  # 4 or 6: the family of the outermost IP header
        "inner_family",  # 4 or 6: the family of the inner IP header (encapsulated), else 0
        "l4_off",        # transport header offset
        "same_flow",     # set when merged into a held packet
        "ip_fixedid",    # bit 0 outer, bit 1 inner (inet_gro_flush)
        "is_flist",      # fraglist GRO for this packet (tcp4/6_check_fraglist_gro, udp_gro_receive;
                         # set before it is read: by TCP under rx-gro-list, by UDP, else by hold())
        "recursion",     # gro_recursion_inc_test's counter: layer transitions so far
        "flush_layer",   # held encapsulated packet: "outer"/"inner" header of its L3 flush reason ("" otherwise)
        "csum_level",    # ip_summed and csum_level: -1 CHECKSUM_NONE, 0..3 CHECKSUM_UNNECESSARY at that
                         # level after GRO verified checksums (__skb_incr_checksum_unnecessary)
        "csum",          # None, or the ones'-complement sum of the whole frame as an integer
                         # congruent to csum.sum16(data) mod 0xFFFF (CHECKSUM_COMPLETE's
                         # skb->csum), computed for a whole poll by the device (napi.py)
        # held aggregate ("p")
        "length",        # p->len: bytes from skb->data (after the link header)
        "payload_len",   # skb_gro_len(p): L4 payload bytes accumulated; a merged segment: its own
        "gso_size",      # the first segment's payload length (mss)
        "age",           # jiffies when held
        "next_merged",   # the chain of merged segments, in order: a head's first one, a segment's
                         # next (skb_shinfo(p)->frag_list, then skb->next); each frame's payload
                         # is its last payload_len bytes, as merge() counted them
        "last_merged",   # a head's last merged segment (NAPI_GRO_CB(p)->last), None before the first
        "flag_or",       # TCP FIN|PSH bits gathered from merged segments
        "encapsulation", # skb->encapsulation during completion: the L4 complete reads network_offsets[it]
    )

    def __init__(self, data: bytes, ts: int, index: int, l2_len: int, hash_: int = 0,
                 protocol: int = 0, key: bytes = b""):
        _init_skb(self, data, 0, len(data), ts, index, l2_len, hash_, protocol, key)

    def gro_len(self) -> int:
        """skb_gro_len: bytes after the headers consumed so far."""
        return self.end - self.off


def frame_bytes(skb) -> bytes:
    """The bytes of skb's frame: data itself, or its [start, end) slice."""
    data = skb.data
    start = skb.start
    end = skb.end
    if start == 0 and end == len(data):
        return data
    if cython.compiled and 0 <= start <= end <= len(data):
        # one copy, without the slice object and its two integers
        return PyBytes_FromStringAndSize(cython.cast(cython.p_char, data) + start, end - start)
    return data[start:end]


def delivered_bytes(delivery) -> bytes:
    """delivery.data: what the property reads, as a function the compiled
    statistics call directly (a property is an attribute look-up by name)."""
    data = delivery._data
    if data is None:
        if delivery._header is None:
            data = delivery._data = frame_bytes(delivery._head)     # a frame that lay in a larger buffer
        else:
            data = delivery._data = _join_super_packet(delivery._header, delivery._head)
            delivery._header = None
    return data


def rebase(skb) -> None:
    """Give a frame that lies in a larger buffer its own string, and every
    offset with it (explain's recorder: its evidence reads the arriving frame
    and a held packet's at offsets counted from each frame's start)."""
    start = skb.start
    if start == 0 and skb.end == len(skb.data):
        return
    skb.data = skb.data[start:skb.end]
    skb.end -= start
    skb.start = 0
    skb.off -= start
    skb.network_offsets[0] -= start
    skb.network_offsets[1] -= start
    if skb.l4_off:
        skb.l4_off -= start
    if skb.key_n:
        skb.key_at -= start
    if skb.key_n2:
        skb.key_at2 -= start
    if skb.key_n3:
        skb.key_at3 -= start


def _init_skb(skb, data, start, end, ts, index, l2_len, hash_, protocol, key) -> None:
    # every field is set here (the compiled build gives each a C type)
    skb.data = data
    skb.start = start
    skb.end = end
    skb.ts = ts
    skb.index = index
    skb.hash = hash_
    skb.l2_len = l2_len
    skb.protocol = protocol
    skb.off = off = start + l2_len
    skb.flush = None
    skb.proto = 0
    skb.key = key
    skb.key_from_frame = 0
    skb.key_at = 0
    skb.key_n = 0
    skb.key_at2 = 0
    skb.key_n2 = 0
    skb.key_at3 = 0
    skb.key_n3 = 0
    skb.count = 1
    skb.network_offsets = [off, off]
    skb.encap_mark = 0
    skb.outer_family = 0
    skb.inner_family = 0
    skb.l4_off = 0
    skb.same_flow = False
    skb.recursion = 0
    skb.csum_level = -1
    skb.csum = None
    skb.is_flist = 0
    skb.flush_layer = ""
    skb.ip_fixedid = 0
    skb.encapsulation = 0
    skb.flag_or = 0
    # the aggregate fields get their values in GroNode.hold
    skb.length = 0
    skb.payload_len = 0
    skb.gso_size = 0
    skb.age = 0
    skb.next_merged = None
    skb.last_merged = None


def new_skb(data, start, end, ts, index, l2_len, protocol, key) -> Skb:
    """Skb(data, ts, index, l2_len, 0, protocol, key) for the per-frame path,
    its frame at data[start:end] (the compiled build makes it without the
    Python call protocol)."""
    skb = Skb.__new__(Skb)
    if cython.compiled:
        # a new extension object's C fields are 0 and its object fields None:
        # the fields _init_skb gives another value are set (tests/test_builds.py
        # checks the two agree)
        skb.data = data
        skb.start = start
        skb.end = end
        skb.ts = ts
        skb.index = index
        skb.l2_len = l2_len
        skb.protocol = protocol
        skb.off = start + l2_len
        skb.key = key
        skb.count = 1
        skb.network_offsets[0] = start + l2_len
        skb.network_offsets[1] = start + l2_len
        skb.csum_level = -1
        skb.flush_layer = ""
        return skb
    _init_skb(skb, data, start, end, ts, index, l2_len, 0, protocol, key)
    return skb


@cython.freelist(256)
@cython.no_gc
@cython.cclass
class Delivery:
    """One packet handed to the stack: a super-packet or a packet sent up unchanged."""

    __slots__ = (
        "ts",            # first segment's capture timestamp (ns)
        "_data",         # the frame as delivered (link header included), once known: the data property
        "_head",         # the engine's delivery: the skb it came from (a super-packet's head, its
                         # segments chained behind it); data, indices and merged_lens are read
                         # from it when first asked for
        "_header",       # a super-packet's rebuilt header until data is first read
        "frame_len",     # len(data), known without building it
        "segs",          # napi_gro_cb count: input frames it covers
        "reason",        # why it was delivered now (see reasons.py)
        "_indices",      # capture indices it covers, in order (a tuple): the indices property
        "key",           # same-flow identity (empty when GRO never parsed it)
        "gso_size",
        "gso_type",      # tuple of GSO type names
        "payload",       # L4 payload bytes as GRO counted them (padding included); 0 if L4 never parsed it
        "queue",         # RX queue (NAPI instance) it came through
        "poll",          # poll number on that queue
        "layer",         # for an L3 reason of an encapsulated packet: "outer" or "inner" header
        # for the skb layout model (layout.py), filled for super-packets only
        "l2_len",        # link header bytes
        "header_len",    # bytes of headers GRO walked (from the frame start)
        "first_len",     # the first segment's frame length
        "_merged_lens",  # payload bytes of each merged segment (a tuple): the merged_lens property
        "fraglist",      # built by skb_gro_receive_list
        "interface",     # capture interface (device) it came from
        "_delivered_ns",  # nic device: simulated time its batch reached the stack (NO_CLOCK: none),
                          # a C integer in the compiled build: the delivered_ns property
    )

    def __init__(self, ts: int, data: bytes, segs: int, reason: str, indices: Tuple[int, ...],
                 key: bytes = b"", gso_size: int = 0, gso_type: Tuple[str, ...] = (), payload: int = 0,
                 queue: int = 0, poll: int = 0, layer: str = "", l2_len: int = 0, header_len: int = 0,
                 first_len: int = 0, merged_lens: Tuple[int, ...] = (), fraglist: bool = False,
                 interface: int = 0, delivered_ns: Optional[int] = None):
        _fill(self, ts, data, segs, reason, indices, key, gso_size, gso_type, payload, queue, poll, layer,
              l2_len, header_len, first_len, merged_lens, fraglist, interface,
              NO_CLOCK if delivered_ns is None else delivered_ns)

    @property
    def delivered_ns(self) -> Optional[int]:
        """With the nic device, the simulated time (ns) its batch reached the
        stack; None without that clock."""
        at = self._delivered_ns
        return None if at == NO_CLOCK else at

    @delivered_ns.setter
    def delivered_ns(self, value: Optional[int]) -> None:
        self._delivered_ns = NO_CLOCK if value is None else value

    @property
    def data(self) -> bytes:
        """The frame as delivered.  A super-packet's bytes are joined from its
        rebuilt header and the segments' payloads when first read: a replay
        that writes no packets never copies them."""
        return delivered_bytes(self)

    @data.setter
    def data(self, value: bytes) -> None:
        self._data = value
        self._header = None
        self.frame_len = len(value)

    @property
    def indices(self) -> Tuple[int, ...]:
        """The capture indices it covers, in order (made when first read: a
        replay that only counts never builds them)."""
        indices = self._indices
        if indices is None:
            indices = self._indices = segment_indices(self._head)
        return indices

    @property
    def merged_lens(self) -> Tuple[int, ...]:
        """Payload bytes of each merged segment (made when first read)."""
        lens = self._merged_lens
        if lens is None:
            lens = self._merged_lens = merged_payload_lens(self._head)
        return lens

    def __eq__(self, other):
        if type(other) is not Delivery:
            return NotImplemented
        return self.data == other.data and all(
            getattr(self, name.lstrip("_")) == getattr(other, name.lstrip("_"))
            for name in Delivery.__slots__ if name not in _NOT_COMPARED)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name.lstrip('_')}={getattr(self, name.lstrip('_'))!r}" for name in Delivery.__slots__
                           if name not in _NOT_SHOWN)
        return f"Delivery({fields})"

    def shape(self, layout: str = "frags", max_skb_frags: int = 17):
        """The skb layout model's view of this packet (layout.Shape)."""
        offset = self.header_len - self.l2_len
        return shape(layout, max_skb_frags, self.l2_len, offset, self.first_len or self.frame_len,
                     self.merged_lens, self.fraglist, self.header_len)


# Delivery's slots that are not fields of their own: == compares data and the
# fields, repr shows them all
_NOT_COMPARED = ("_data", "_head", "_header")
_NOT_SHOWN = ("_head", "_header")


# CPython frees a list's storage when it empties: a list that fills and empties
# every poll (the NIC ring, a GRO bucket, the rx_list, the replay's deliveries,
# a completion's GSO types) would allocate it again each time.  The compiled
# build empties such lists keeping their storage (the C API's own way: the
# length set, the references dropped).  Its call sites branch on
# cython.compiled, so the interpreter empties them as ever without a call.
def clear_keeping_room(items: list) -> None:
    """items.clear(), the list's storage kept for the items to come."""
    if cython.compiled:
        n = len(items)
        slots = PySequence_Fast_ITEMS(items)
        Py_SET_SIZE(items, 0)                # empty before any reference is dropped
        for i in range(n):
            Py_DecRef(slots[i])
        return
    items.clear()


def delete_keeping_room(items: list, i: int) -> None:
    """del items[i] (0 <= i < len(items)), the list's storage kept."""
    if cython.compiled:
        n = len(items)
        slots = PySequence_Fast_ITEMS(items)
        gone = slots[i]
        memmove(slots + i, slots + i + 1, (n - i - 1) * cython.sizeof(cython.pointer(PyObject)))
        Py_SET_SIZE(items, n - 1)
        Py_DecRef(gone)
        return
    del items[i]


def merged_segments(head) -> list:
    """The segments merged behind head, in order."""
    out = []
    s = head.next_merged
    while s is not None:
        out.append(s)
        s = s.next_merged
    return out


def segment_indices(head) -> Tuple[int, ...]:
    """The capture indices of an aggregate (or a lone skb), head first."""
    if head.next_merged is None:
        return (head.index,)
    return (head.index,) + tuple([s.index for s in merged_segments(head)])


def merged_payload_lens(head) -> Tuple[int, ...]:
    """The payload bytes of each segment merged behind the head."""
    return tuple([s.payload_len for s in merged_segments(head)])


def _fill(delivery, ts, data, segs, reason, indices, key, gso_size, gso_type, payload, queue, poll, layer,
          l2_len, header_len, first_len, merged_lens, fraglist, interface, delivered_ns) -> None:
    # delivered_ns: the clock's reading, or NO_CLOCK
    delivery.ts = ts
    delivery._data = data
    delivery._head = None
    delivery._header = None
    delivery.frame_len = len(data)
    delivery.segs = segs
    delivery.reason = reason
    delivery._indices = indices
    delivery.key = key
    delivery.gso_size = gso_size
    delivery.gso_type = gso_type
    delivery.payload = payload
    delivery.queue = queue
    delivery.poll = poll
    delivery.layer = layer
    delivery.l2_len = l2_len
    delivery.header_len = header_len
    delivery.first_len = first_len
    delivery._merged_lens = merged_lens
    delivery.fraglist = fraglist
    delivery.interface = interface
    delivery._delivered_ns = delivered_ns


def new_delivery(skb, reason, key, payload, queue, poll, layer) -> Delivery:
    """The Delivery of a frame that goes up unchanged (skb: its skb, a lone held
    packet or one GRO did not hold), for the engine's per-packet path: its
    indices are read from the skb when asked for (the compiled build makes it
    without the Python call protocol)."""
    delivery = Delivery.__new__(Delivery)
    data = skb.data
    _fill(delivery, skb.ts, data, 1, reason, None, key, 0, (), payload, queue, poll, layer,
          0, 0, 0, (), False, 0, NO_CLOCK)
    delivery._head = skb
    if skb.start or skb.end != len(data):
        delivery._data = None                   # sliced from its buffer when read
        delivery.frame_len = skb.end - skb.start
    return delivery


def new_super_packet(p, header, reason, gso_type, queue, poll, layer) -> Delivery:
    """The Delivery of aggregate ``p``: ``header`` (its frame's headers up to
    p.off, as completion rebuilt them), then the payloads of p's frame and of
    each merged segment's.  Its bytes are joined only when read
    (Delivery.data), and its indices and merged_lens made only when read."""
    delivery = Delivery.__new__(Delivery)
    _fill(delivery, p.ts, b"", p.count, reason, None, p.key, p.gso_size, gso_type, p.payload_len, queue, poll,
          layer, p.l2_len, p.off - p.start, p.end - p.start, None, bool(p.is_flist), 0, NO_CLOCK)
    delivery._data = None
    delivery._head = p
    delivery._header = header
    delivery.frame_len = len(header) + p.payload_len     # the header may have grown (an IPv6 jumbo option)
    return delivery


def _copy_waiting(dst, key, src, start, head, at0, n0, at1, n1, at3, n3):
    """Compiled build only: copies ``key``, then the waiting bytes of the frame
    at ``src + start`` (its first ``head`` bytes) and of ``src`` (the ranges
    at0/n0, at1/n1, at3/n3) to ``dst``; returns where the copy ends."""
    memcpy(dst, cython.cast(cython.p_uchar, key), len(key))
    dst += len(key)
    memcpy(dst, src + start, head)
    dst += head
    memcpy(dst, src + at0, n0)
    dst += n0
    memcpy(dst, src + at1, n1)
    dst += n1
    memcpy(dst, src + at3, n3)
    return dst + n3


def _waiting_in_frame(skb, size) -> bool:
    """Compiled build only: every waiting range lies within the ``size`` bytes of skb.data."""
    return (0 <= skb.start and skb.start + skb.key_from_frame <= size
            and 0 <= skb.key_at and 0 <= skb.key_n and skb.key_at + skb.key_n <= size
            and 0 <= skb.key_at2 and 0 <= skb.key_n2 and skb.key_at2 + skb.key_n2 <= size
            and 0 <= skb.key_at3 and 0 <= skb.key_n3 and skb.key_at3 + skb.key_n3 <= size)


def extend_key(skb, data, at, n, at2=0, n2=0) -> None:
    """skb.key += data[at:at + n] + data[at2:at2 + n2]: a layer's compared
    header bytes appended to the flow identity (``data`` is skb.data).  The
    bytes still waiting go in first: the link header's (skb.key_from_frame)
    and deferred layers' ranges (defer_key).  The compiled build copies the
    ranges into one new string instead of joining slices; ranges not wholly in
    data take the slicing path, so both builds give the same bytes."""
    head = skb.key_from_frame
    key = skb.key
    at0 = skb.key_at
    n0 = skb.key_n
    at1 = skb.key_at2
    n1 = skb.key_n2
    at3 = skb.key_at3
    n3 = skb.key_n3
    if cython.compiled:
        size = len(data)
        if _waiting_in_frame(skb, size) and 0 <= at and 0 <= n and at + n <= size and 0 <= at2 and 0 <= n2 \
                and at2 + n2 <= size:
            k = len(key)
            out = PyBytes_FromStringAndSize(cython.NULL, k + head + n0 + n1 + n3 + n + n2)
            dst = out
            src = data
            dst = _copy_waiting(dst, key, src, skb.start, head, at0, n0, at1, n1, at3, n3)
            memcpy(dst, src + at, n)
            memcpy(dst + n, src + at2, n2)
            skb.key = out
            skb.key_from_frame = 0
            skb.key_n = 0
            skb.key_n2 = 0
            skb.key_n3 = 0
            return
    skb.key_from_frame = 0
    skb.key_n = 0
    skb.key_n2 = 0
    if n3 or n2:
        skb.key_n3 = 0
        start = skb.start
        skb.key = b"".join((key, data[start:start + head], data[at0:at0 + n0], data[at1:at1 + n1],
                            data[at3:at3 + n3], data[at:at + n], data[at2:at2 + n2]))
    elif head or n0 or n1:
        # the common case (a layer's one range behind IPv4's): no empty slices to join
        start = skb.start
        skb.key = b"".join((key, data[start:start + head], data[at0:at0 + n0], data[at1:at1 + n1],
                            data[at:at + n]))
    else:
        skb.key = key + data[at:at + n]


def extend_key_masked(skb, data, at, mask, at2, n2) -> None:
    """extend_key(skb, data, at2, n2) after, first, header fields that share
    bytes with fields the layer ignores: data[at + i] & mask[i] for each byte
    of ``mask``.  The compiled build copies everything into one new string, as
    extend_key does; ranges not wholly in data take the slicing path, so both
    builds give the same bytes."""
    m = len(mask)
    if cython.compiled:
        size = len(data)
        if _waiting_in_frame(skb, size) and 0 <= at and at + m <= size and 0 <= at2 and 0 <= n2 \
                and at2 + n2 <= size:
            key = skb.key
            k = len(key)
            head = skb.key_from_frame
            n0 = skb.key_n
            n1 = skb.key_n2
            n3 = skb.key_n3
            out = PyBytes_FromStringAndSize(cython.NULL, k + head + n0 + n1 + n3 + m + n2)
            dst = out
            src = data
            bits = mask
            dst = _copy_waiting(dst, key, src, skb.start, head, skb.key_at, n0, skb.key_at2, n1, skb.key_at3, n3)
            for i in range(m):
                dst[i] = src[at + i] & bits[i]
            memcpy(dst + m, src + at2, n2)
            skb.key = out
            skb.key_from_frame = 0
            skb.key_n = 0
            skb.key_n2 = 0
            skb.key_n3 = 0
            return
    fields = (int.from_bytes(data[at:at + m], "big") & int.from_bytes(mask, "big")).to_bytes(m, "big")
    skb.key = b"".join((settled_key(skb), fields, data[at2:at2 + n2]))


def defer_key(skb, at, n, at2=0, n2=0) -> None:
    """extend_key(skb, skb.data, at, n, at2, n2), postponed: the ranges wait
    with the link header's bytes for the next extend_key or settled_key, which
    copies them all into one new string, or for key_matches, which compares
    them where they lie.  For IPv4, whose next layer extends or settles the
    key before anything reads it, and TCP, whose merged segments never need
    their key copied."""
    if not (skb.key_n or skb.key_n2):
        skb.key_at = at
        skb.key_n = n
        skb.key_at2 = at2
        skb.key_n2 = n2
        return
    if not (n2 or skb.key_n3):
        skb.key_at3 = at                 # one range more, behind those waiting
        skb.key_n3 = n
        return
    extend_key(skb, skb.data, 0, 0)      # ranges already waiting (IP in IP) join first
    skb.key_at = at
    skb.key_n = n
    skb.key_at2 = at2
    skb.key_n2 = n2


def settled_key(skb) -> bytes:
    """skb.key with the bytes still waiting (the link header's, deferred
    layers') in it, for a layer that builds its key bytes itself."""
    head = skb.key_from_frame
    if skb.key_n or skb.key_n2 or skb.key_n3 or (head and cython.compiled):
        extend_key(skb, skb.data, 0, 0)
    elif head:
        # the link header's bytes alone: the interpreter concatenates them inline
        # (a call to extend_key costs it more); the same bytes either way
        skb.key = skb.key + skb.data[skb.start:skb.start + head]
        skb.key_from_frame = 0
    return skb.key


def _same(a, b, n) -> bool:
    """Compiled build only: the n bytes at C pointers a and b are equal,
    compared a word at a time, the last word overlapping the one before it
    (a fixed-size copy into a word is one load)."""
    if n >= 8:
        i = 0
        while i + 8 < n:
            memcpy(cython.address(wa), a + i, 8)
            memcpy(cython.address(wb), b + i, 8)
            if wa != wb:
                return False
            i += 8
        memcpy(cython.address(wa), a + n - 8, 8)
        memcpy(cython.address(wb), b + n - 8, 8)
        return wa == wb
    if n >= 4:
        memcpy(cython.address(ha), a, 4)
        memcpy(cython.address(hb), b, 4)
        if ha != hb:
            return False
        memcpy(cython.address(ha), a + n - 4, 4)
        memcpy(cython.address(hb), b + n - 4, 4)
        return ha == hb
    i = 0
    while i < n:
        if a[i] != b[i]:
            return False
        i += 1
    return True


def key_matches(key, skb) -> bool:
    """key == settled_key(skb), without settling: the compiled build compares
    the waiting bytes where they lie in the frame (a merged segment's key is
    never copied); the interpreter settles the key and compares strings."""
    if cython.compiled:
        data = skb.data
        if _waiting_in_frame(skb, len(data)):
            own = skb.key
            k = len(own)
            head = skb.key_from_frame
            n0 = skb.key_n
            n1 = skb.key_n2
            n3 = skb.key_n3
            if len(key) != k + head + n0 + n1 + n3:
                return False
            dst = key
            src = data
            return (_same(dst, cython.cast(cython.p_uchar, own), k)
                    and _same(dst + k, src + skb.start, head)
                    and _same(dst + k + head, src + skb.key_at, n0)
                    and _same(dst + k + head + n0, src + skb.key_at2, n1)
                    and _same(dst + k + head + n0 + n1, src + skb.key_at3, n3))
    return key == settled_key(skb)


def _join_super_packet(header, p) -> bytes:
    """A super-packet's bytes: its rebuilt ``header``, then the payload of head
    p's frame (from p.off to p.end) and of each merged segment's (its last payload_len
    bytes).  The compiled build copies each piece once into the new string
    instead of slicing the payloads and joining the slices (two copies and an
    object per segment); pieces not wholly in their frames (never made by the
    engine) take the slicing path, so both builds give the same bytes and never
    read outside a frame."""
    if cython.compiled:
        total = _super_packet_length(header, p)
        if total >= 0:
            out = PyBytes_FromStringAndSize(cython.NULL, total)
            _copy_super_packet(header, p, out)
            return out
    first = p.data
    parts = [header, first[p.start:p.end][p.off - p.start:]]      # Python slices: in bounds whatever the lengths
    s = p.next_merged
    while s is not None:
        parts.append(s.data[s.start:s.end][s.end - s.start - s.payload_len:])
        s = s.next_merged
    return b"".join(parts)


def _super_packet_length(header, p) -> int:
    """The length of _join_super_packet's string when every piece lies wholly in
    its frame, else -1 (compiled build only)."""
    header_len = p.off
    end = p.end
    total = len(header) + end - header_len
    if not 0 <= header_len <= end <= len(p.data):
        return -1
    s = p.next_merged
    while s is not None:
        n = s.payload_len
        if not (0 <= n <= s.end - s.start and s.end <= len(s.data)):
            return -1
        total += n
        s = s.next_merged
    return total


def _copy_super_packet(header, p, dst) -> None:
    """Write _join_super_packet's bytes at dst, pieces known to lie in their
    frames (_super_packet_length; compiled build only)."""
    at = len(header)
    memcpy(dst, cython.cast(cython.p_uchar, header), at)
    src = p.data
    memcpy(dst + at, src + p.off, p.end - p.off)
    at += p.end - p.off
    s = p.next_merged
    while s is not None:
        n = s.payload_len
        src = s.data
        memcpy(dst + at, src + s.end - n, n)
        at += n
        s = s.next_merged


def copy_frame(delivery, dst) -> bool:
    """Write the delivered frame (``frame_len`` bytes, as ``data`` holds them)
    at dst without making its string: the compiled replay copies each
    delivery once, from the frames GRO kept, into the pcap writer's buffer.
    False, nothing written, when its pieces do not make frame_len bytes in
    their frames (never for the engine's deliveries; the caller takes data).
    Compiled build only."""
    n = delivery.frame_len
    data = delivery._data
    if data is not None:
        if len(data) != n:
            return False
        memcpy(dst, cython.cast(cython.p_uchar, data), n)
        return True
    p = delivery._head
    if p is None:
        return False
    if delivery._header is None:
        # a frame sent up as it arrived, in the reader's buffer or a string of its own
        if not (0 <= p.start <= p.end <= len(p.data) and p.end - p.start == n):
            return False
        src = p.data
        memcpy(dst, src + p.start, n)
        return True
    if _super_packet_length(delivery._header, p) != n:
        return False
    _copy_super_packet(delivery._header, p, dst)
    return True


class Stats:
    """Counters the engine keeps while it runs."""

    __slots__ = (
        "frames",
        "csum_offloaded",       # L4 checksum field held exactly the pseudo-header seed
        "csum_verified",
        "csum_bad",
        "ip_csum_bad",
        "polls",                # NAPI polls, repolls included
        "irqs",                 # nic: interrupts that scheduled a poll
        "timer_polls",          # nic: polls scheduled by the gro_flush_timeout timer
        "normal_batches",       # gro_normal_list hand-overs to the stack
        # host-state hints: traffic a host option would have changed
        "udp_no_gro_path",      # destination port -> datagrams
        "udp_tunnel_payloads",  # of those ports, the ones whose first datagram held "vxlan" or "geneve"
        "tcp_fraglist_assumed",  # TCP segments taken as forwarded (rx-gro-list, no --local-tcp for them)
        "outgoing",             # frames the capture marks as sent by the capturing host
    )

    def __init__(self, frames: int = 0, csum_offloaded: int = 0, csum_verified: int = 0, csum_bad: int = 0,
                 ip_csum_bad: int = 0, polls: int = 0, irqs: int = 0, timer_polls: int = 0,
                 normal_batches: int = 0, udp_no_gro_path: Optional[Dict[int, int]] = None,
                 tcp_fraglist_assumed: int = 0, udp_tunnel_payloads: Optional[Dict[int, str]] = None,
                 outgoing: int = 0):
        self.frames = frames
        self.csum_offloaded = csum_offloaded
        self.csum_verified = csum_verified
        self.csum_bad = csum_bad
        self.ip_csum_bad = ip_csum_bad
        self.polls = polls
        self.irqs = irqs
        self.timer_polls = timer_polls
        self.normal_batches = normal_batches
        self.udp_no_gro_path = {} if udp_no_gro_path is None else udp_no_gro_path
        self.tcp_fraglist_assumed = tcp_fraglist_assumed
        self.udp_tunnel_payloads = {} if udp_tunnel_payloads is None else udp_tunnel_payloads
        self.outgoing = outgoing

    def __eq__(self, other):
        return _slots_equal(Stats, self, other)

    def __repr__(self) -> str:
        return _slots_repr(Stats, self)
