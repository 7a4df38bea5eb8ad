"""How the driver hands frames to GRO (the skb layout), and so which path
skb_gro_receive takes for each merged segment.  Decisions never depend on it
(except page-pool mixing, not modelled); only the super-packet's shape does.
"""

from __future__ import annotations

# name -> description
LAYOUTS = {
    "frags": "napi_gro_frags: the whole frame in one page fragment, an empty linear area",
    "header-split": "exactly the headers in the linear area, the payload in one page fragment",
    "linear-pagefrag": "the whole frame in a linear area that is a page fragment (build_skb)",
    "linear-kmalloc": "the whole frame in a kmalloc'd linear area (copybreak, small napi_alloc_skb)",
    "mlx5-copy256": "256 bytes copied into a kmalloc'd linear area, the rest in page fragments "
                    "(mlx5e striding RQ before the 2026 fix)",
}

# Sizes on x86_64 (6.18): SKB_DATA_ALIGN(sizeof(struct sk_buff)) and of
# struct skb_shared_info, the headroom drivers reserve, the head napi_get_frags
# allocates (GRO_MAX_HEAD), and what mlx5e copied into the linear area.
SKB_STRUCT = 256
SHINFO = 320
NET_SKB_PAD = 64
GRO_MAX_HEAD = 256
MLX5_MAX_HEAD = 256


def _pow2_at_least(n: int, floor: int) -> int:
    size = floor
    while size < n:
        size <<= 1
    return size


def rx_buffer(nbytes: int) -> int:
    """The page-fragment buffer a driver posts for nbytes: half pages for
    standard frames (2048), else the next power of two (a page or more)."""
    return _pow2_at_least(nbytes, 2048)


def kmalloc_head(nbytes: int) -> int:
    """A kmalloc'd linear area for nbytes of data: headroom and shared info
    added, rounded up to the slab size (powers of two from 512)."""
    return _pow2_at_least(nbytes + NET_SKB_PAD + SHINFO, 512)


class SkbParts:
    """One received frame as the driver built it: page fragments, linear
    bytes after the link header (headlen), whether the linear area is itself a
    page fragment, truesize, and the truesize of its page fragments alone."""

    __slots__ = ("nr_frags", "headlen", "head_frag", "truesize", "frags_truesize", "slow_pull")

    def __init__(self, layout: str, frame_len: int, l2_len: int, offset: int):
        if layout == "frags":
            self.nr_frags, self.headlen, self.head_frag = 1, 0, False
            self.frags_truesize = rx_buffer(frame_len)
            self.truesize = SKB_STRUCT + kmalloc_head(GRO_MAX_HEAD) + self.frags_truesize
        elif layout == "header-split":
            payload = frame_len - l2_len - offset
            self.nr_frags, self.headlen, self.head_frag = (1 if payload else 0), offset, False
            self.frags_truesize = rx_buffer(payload) if payload else 0
            self.truesize = SKB_STRUCT + kmalloc_head(l2_len + offset) + self.frags_truesize
        elif layout == "linear-pagefrag":
            self.nr_frags, self.headlen, self.head_frag = 0, frame_len - l2_len, True
            self.frags_truesize = 0
            self.truesize = SKB_STRUCT + rx_buffer(frame_len + NET_SKB_PAD + SHINFO)
        elif layout == "linear-kmalloc":
            self.nr_frags, self.headlen, self.head_frag = 0, frame_len - l2_len, False
            self.frags_truesize = 0
            self.truesize = SKB_STRUCT + kmalloc_head(frame_len)
        else:                                   # mlx5-copy256
            copied = min(MLX5_MAX_HEAD, frame_len)
            rest = frame_len - copied
            self.nr_frags, self.headlen, self.head_frag = (1 if rest else 0), copied - l2_len, False
            self.frags_truesize = rx_buffer(rest) if rest else 0
            self.truesize = SKB_STRUCT + kmalloc_head(MLX5_MAX_HEAD) + self.frags_truesize
        # the GRO header walk reads past the linear bytes: pskb_may_pull copies
        # them in (frags: frag0 covers the page fragment, so never)
        self.slow_pull = 1 if layout != "frags" and offset > self.headlen else 0


class Shape:
    """What skb_gro_receive and skb_gro_receive_list built: page fragments in
    all skbs of the chain, skbs chained on frag_list, truesize, slow pulls."""

    __slots__ = ("frags", "frag_list", "truesize", "slow_pulls")

    def __init__(self, frags: int, frag_list: int, truesize: int, slow_pulls: int):
        self.frags = frags
        self.frag_list = frag_list
        self.truesize = truesize
        self.slow_pulls = slow_pulls


_PARTS_CACHE: dict = {}


def _parts(layout: str, frame_len: int, l2_len: int, offset: int) -> SkbParts:
    key = (layout, frame_len, l2_len, offset)
    parts = _PARTS_CACHE.get(key)
    if parts is None:
        if len(_PARTS_CACHE) > 4096:
            _PARTS_CACHE.clear()
        parts = _PARTS_CACHE[key] = SkbParts(layout, frame_len, l2_len, offset)
    return parts


_SHAPE_CACHE: dict = {}


def shape(layout: str, max_skb_frags: int, l2_len: int, offset: int, first_len: int,
          merged_payloads: tuple, fraglist: bool, header_len: int) -> Shape:
    """shape_of for merged segments of header_len + each of merged_payloads
    bytes, remembered: bulk traffic repeats the same segment sizes."""
    if layout == "frags" and not fraglist and first_len <= 2048 and \
            (not merged_payloads or header_len + max(merged_payloads) <= 2048):
        # the default layout with standard frames, in closed form: every frame is
        # one page fragment in a 2 KiB buffer; every max_skb_frags-th segment
        # starts a new skb on the frag_list (its head counted in full)
        head = _parts(layout, first_len, l2_len, offset)
        merged = len(merged_payloads)
        chained = merged // max_skb_frags if max_skb_frags > 1 else merged
        return Shape(1 + merged, chained, head.truesize + merged * 2048 + chained * (head.truesize - 2048), 0)
    key = (layout, max_skb_frags, l2_len, offset, first_len, merged_payloads, fraglist, header_len)
    result = _SHAPE_CACHE.get(key)
    if result is None:
        if len(_SHAPE_CACHE) > 4096:
            _SHAPE_CACHE.clear()
        result = _SHAPE_CACHE[key] = shape_of(layout, max_skb_frags, l2_len, offset, first_len,
                                              [header_len + n for n in merged_payloads], fraglist)
    return result


def shape_of(layout: str, max_skb_frags: int, l2_len: int, offset: int, first_len: int,
             merged_lens, fraglist: bool) -> Shape:
    """The super-packet's shape: the head skb of first_len bytes, then one
    merge per entry of merged_lens (frame lengths, headers included), each
    taking the path skb_gro_receive takes for that layout (frags, head-frag,
    or frag_list when the frags would pass MAX_SKB_FRAGS or the linear area is
    kmalloc'd), or skb_gro_receive_list's chain for fraglist GRO."""
    head = _parts(layout, first_len, l2_len, offset)
    last_frags = total_frags = head.nr_frags
    truesize = head.truesize
    slow = head.slow_pull
    chained = 0
    for frame_len in merged_lens:
        skb = _parts(layout, frame_len, l2_len, offset)
        slow += skb.slow_pull
        if not fraglist:
            if skb.headlen <= offset:
                if last_frags + skb.nr_frags <= max_skb_frags:
                    last_frags += skb.nr_frags             # frags path: the skb's head is freed
                    total_frags += skb.nr_frags
                    truesize += skb.frags_truesize
                    continue
            elif skb.head_frag:
                if last_frags + 1 + skb.nr_frags <= max_skb_frags:
                    last_frags += 1 + skb.nr_frags         # head-frag path: the head page is stolen
                    total_frags += 1 + skb.nr_frags
                    truesize += skb.truesize - SKB_STRUCT
                    continue
        chained += 1                                       # frag_list: the whole skb lives on
        last_frags = skb.nr_frags
        total_frags += skb.nr_frags
        truesize += skb.truesize
    return Shape(total_frags, chained, truesize, slow)
