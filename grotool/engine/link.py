"""Link layer: turn a captured frame into the skb GRO sees.

eth_type_trans for Ethernet (the 14-byte header is the L2 identity,
compare_ether_header); for cooked Linux captures the whole SLL/SLL2 header is
compared (gro_list_prepare's memcmp of hard_header_len bytes); raw IP has no
link header, so the L2 comparison is trivially equal.
"""

from __future__ import annotations

from .skb import Skb

LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
RAW_LINKTYPES = (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6, 12, 14)


class LinkLayer:
    """Builds Skbs for one capture link type."""

    def __init__(self, linktype: int):
        self.linktype = linktype
        if linktype == LINKTYPE_ETHERNET:
            self.make = self._ethernet
        elif linktype == LINKTYPE_LINUX_SLL:
            self.make = self._sll
        elif linktype == LINKTYPE_LINUX_SLL2:
            self.make = self._sll2
        elif linktype in RAW_LINKTYPES:
            self.make = self._raw
        else:
            raise ValueError(f"unsupported link type {linktype}")

    @staticmethod
    def _ethernet(data: bytes, ts: int, index: int) -> Skb:
        skb = Skb(data, ts, index, 14)
        if len(data) >= 14:
            skb.protocol = (data[12] << 8) | data[13]
            skb.key = data[:14]
        else:
            skb.flush = "not_ip_link"
        return skb

    @staticmethod
    def _sll(data: bytes, ts: int, index: int) -> Skb:
        skb = Skb(data, ts, index, 16)
        if len(data) >= 16:
            skb.protocol = (data[14] << 8) | data[15]
            skb.key = data[:16]
        else:
            skb.flush = "not_ip_link"
        return skb

    @staticmethod
    def _sll2(data: bytes, ts: int, index: int) -> Skb:
        skb = Skb(data, ts, index, 20)
        if len(data) >= 20:
            skb.protocol = (data[0] << 8) | data[1]
            skb.key = data[:20]
        else:
            skb.flush = "not_ip_link"
        return skb

    @staticmethod
    def _raw(data: bytes, ts: int, index: int) -> Skb:
        skb = Skb(data, ts, index, 0)
        version = data[0] >> 4 if data else 0
        skb.protocol = 0x0800 if version == 4 else 0x86DD if version == 6 else 0
        return skb
