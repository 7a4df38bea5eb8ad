"""Link layer: turn a captured frame into the skb GRO sees.

eth_type_trans for Ethernet (the 14-byte header is the L2 identity,
compare_ether_header); for cooked Linux captures the whole SLL/SLL2 header is
compared (gro_list_prepare's memcmp of hard_header_len bytes); raw IP has no
link header, so the L2 comparison is trivially equal.
"""

from __future__ import annotations

from ..linktypes import LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, RAW_LINKTYPES
from .skb import Skb, new_skb

# link type -> (link header length, offset of the 2-byte protocol field in it)
HEADERS = {
    LINKTYPE_ETHERNET: (14, 12),     # eth_type_trans; compare_ether_header
    LINKTYPE_LINUX_SLL: (16, 14),    # cooked headers: memcmp of the whole header
    LINKTYPE_LINUX_SLL2: (20, 0),
}


class LinkLayer:
    """Builds Skbs for one capture link type."""

    def __init__(self, linktype: int):
        self.linktype = linktype
        if linktype in HEADERS:
            self.l2_len, self.proto_at = HEADERS[linktype]
        elif linktype in RAW_LINKTYPES:
            self.l2_len, self.proto_at = 0, -1          # no link header: the IP version tells
        else:
            raise ValueError(f"unsupported link type {linktype}")

    def make(self, data: bytes, ts: int, index: int) -> Skb:
        """The skb of one captured frame."""
        if type(data) is not bytes:
            data = bytes(data)          # a bytearray or memoryview from an API caller
        l2 = self.l2_len
        if self.proto_at < 0:
            version = data[0] >> 4 if data else 0
            return new_skb(data, ts, index, 0, 0x0800 if version == 4 else 0x86DD if version == 6 else 0, b"")
        if len(data) >= l2:
            at = self.proto_at
            raw = data                  # read in place (a C pointer in the compiled build): l2 bytes are there
            skb = new_skb(data, ts, index, l2, raw[at] << 8 | raw[at + 1], b"")
            skb.key_from_frame = l2     # the link header is the key's start, copied with the first layer's bytes
            return skb
        skb = new_skb(data, ts, index, l2, 0, b"")
        skb.flush = "not_ip_link"
        return skb
