"""Link layer: turn a captured frame into the skb GRO sees.

eth_type_trans for Ethernet: the 14-byte header is the L2 identity
(compare_ether_header in gro_list_prepare, eth_gro_receive).  A cooked Linux
capture (SLL/SLL2) records what a receiving NIC's Ethernet header would carry
only in part: the source address (the first sll_halen bytes of its 8-byte
address field) and the protocol; the destination is not recorded and taken to
be the same for every packet (the capturing host's own address), so the L2
identity is the source address and the protocol (SLL2: and the interface
index, as packets of different devices never merge).  The other bytes of the
cooked header (packet type, ARPHRD type, the unused tail of the address
field, which the kernel leaves uninitialised) are not part of it.  Raw IP has
no link header, so the L2 comparison is trivially equal; a BSD loopback
header (NULL/LOOP) is only the address family, the same for every packet of
a family.
"""

from __future__ import annotations

from ..linktypes import (LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LOOPBACK_LINKTYPES,
                         RAW_LINKTYPES, loopback_ethertype)
from .skb import Skb, new_skb

# link type -> (link header length, offset of the 2-byte protocol field in it)
HEADERS = {
    LINKTYPE_ETHERNET: (14, 12),     # eth_type_trans; compare_ether_header
    LINKTYPE_LINUX_SLL: (16, 14),
    LINKTYPE_LINUX_SLL2: (20, 0),
}
# how a frame's link header is read (LinkLayer.kind)
KIND_ETHERNET = 0       # the whole header is the L2 identity, the protocol field in it
KIND_RAW = 1            # no link header: the IP version tells the protocol
KIND_LOOPBACK = 2       # 4-byte address family (NULL, LOOP)
KIND_SLL = 3            # cooked: source address and protocol are the identity
KIND_SLL2 = 4
# the cooked headers' 8-byte address field (sll_addr) starts here
SLL_ADDR_AT = 6                 # after sll_halen, 16 bits at 4
SLL2_ADDR_AT = 12               # after sll2_halen, 8 bits at 11


class LinkLayer:
    """Builds Skbs for one capture link type."""

    def __init__(self, linktype: int):
        self.linktype = linktype
        if linktype in HEADERS:
            self.l2_len, self.proto_at = HEADERS[linktype]
            self.kind = KIND_SLL if linktype == LINKTYPE_LINUX_SLL else \
                KIND_SLL2 if linktype == LINKTYPE_LINUX_SLL2 else KIND_ETHERNET
        elif linktype in RAW_LINKTYPES:
            self.l2_len, self.proto_at = 0, -1          # no link header: the IP version tells
            self.kind = KIND_RAW
        elif linktype in LOOPBACK_LINKTYPES:
            self.l2_len, self.proto_at = 4, -1          # the address family tells
            self.kind = KIND_LOOPBACK
        else:
            raise ValueError(f"unsupported link type {linktype}")

    def make(self, data: bytes, ts: int, index: int, start: int = 0, end: int = -1) -> Skb:
        """The skb of one captured frame: ``data``, or data[start:end] when a
        range is given (a frame in the capture reader's buffer, not copied)."""
        if type(data) is not bytes:
            data = bytes(data)          # a bytearray or memoryview from an API caller
        if end < 0:
            end = len(data)
        l2 = self.l2_len
        if self.kind:
            if start or end != len(data):
                data = data[start:end]
            return self.make_other(data, ts, index)
        if end - start >= l2:
            at = start + self.proto_at
            frame = data                # bytes by now: the compiled build reads it as such, without a type test
            skb = new_skb(frame, start, end, ts, index, l2, frame[at] << 8 | frame[at + 1], b"")
            skb.key_from_frame = l2     # the link header is the key's start, copied with the first layer's bytes
            return skb
        skb = new_skb(data, start, end, ts, index, l2, 0, b"")
        skb.flush = "not_ip_link"
        return skb

    def make_other(self, data: bytes, ts: int, index: int) -> Skb:
        """make() for the link types other than Ethernet."""
        kind = self.kind
        l2 = self.l2_len
        if kind == KIND_RAW:
            version = data[0] >> 4 if data else 0
            return new_skb(data, 0, len(data), ts, index, 0, 0x0800 if version == 4 else 0x86DD if version == 6 else 0, b"")
        if len(data) < l2:
            skb = new_skb(data, 0, len(data), ts, index, l2, 0, b"")
            skb.flush = "not_ip_link"
            return skb
        if kind == KIND_LOOPBACK:
            skb = new_skb(data, 0, len(data), ts, index, l2, loopback_ethertype(self.linktype, data), b"")
            skb.key_from_frame = l2     # the family: one value per protocol
            return skb
        at = self.proto_at
        # only the first sll_halen bytes of the address field are address (at most the 8 recorded);
        # the length leads, so addresses of different lengths never read alike
        if kind == KIND_SLL:
            n = min(data[4] << 8 | data[5], 8)
            identity = data[4:6] + data[SLL_ADDR_AT:SLL_ADDR_AT + n] + data[at:at + 2]
        else:
            n = min(data[11], 8)
            # sll2_if_index too: packets of another device never merge (gro_list_prepare compares dev)
            identity = data[4:8] + data[11:12] + data[SLL2_ADDR_AT:SLL2_ADDR_AT + n] + data[at:at + 2]
        return new_skb(data, 0, len(data), ts, index, l2, data[at] << 8 | data[at + 1], identity)
