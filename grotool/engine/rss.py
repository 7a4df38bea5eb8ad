"""Receive-side scaling: the Toeplitz hash a NIC puts in skb->hash.

TCP and UDP over IPv4/IPv6 hash the 4-tuple; other IP traffic and fragments
the address pair; non-IP frames get hash 0.  The default indirection table
spreads hash & 127 over the queues round-robin (ethtool_rxfh_indir_default).
"""

from __future__ import annotations

from struct import unpack_from
from typing import Dict


class Toeplitz:
    def __init__(self, key: bytes):
        self._key = int.from_bytes(key, "big")
        self._bits = len(key) * 8
        self._cache: Dict[bytes, int] = {}

    def hash(self, tuple_bytes: bytes) -> int:
        cached = self._cache.get(tuple_bytes)
        if cached is not None:
            return cached
        value = int.from_bytes(tuple_bytes, "big")
        nbits = len(tuple_bytes) * 8
        result = 0
        key = self._key
        shift = self._bits - 32
        for i in range(nbits):
            if value >> (nbits - 1 - i) & 1:
                result ^= (key >> (shift - i)) & 0xFFFFFFFF
        if len(self._cache) > 1_000_000:
            self._cache.clear()           # bounded memory on captures with many flows
        self._cache[tuple_bytes] = result
        return result


def hash_input(data: bytes, off: int, protocol: int) -> bytes:
    """The bytes a NIC feeds to Toeplitz for this frame (empty: no hash)."""
    while protocol in (0x8100, 0x88A8) and len(data) >= off + 4:
        protocol = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if protocol == 0x0800 and len(data) >= off + 20:
        ihl = (data[off] & 0x0F) * 4
        proto = data[off + 9]
        frag = unpack_from("!H", data, off + 6)[0] & 0x3FFF
        addrs = data[off + 12:off + 20]
        if proto in (6, 17) and not frag and len(data) >= off + ihl + 4:
            return addrs + data[off + ihl:off + ihl + 4]
        return addrs
    if protocol == 0x86DD and len(data) >= off + 40:
        addrs = data[off + 8:off + 40]
        nexthdr = data[off + 6]
        pos = off + 40
        while nexthdr in (0, 43, 60) and len(data) >= pos + 8:
            nexthdr, pos = data[pos], pos + (data[pos + 1] + 1) * 8
        if nexthdr in (6, 17) and len(data) >= pos + 4:
            return addrs + data[pos:pos + 4]
        return addrs
    return b""
