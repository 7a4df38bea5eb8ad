"""Receive-side scaling: the Toeplitz hash a NIC puts in skb->hash.

TCP and UDP over IPv4/IPv6 hash the 4-tuple; other IP traffic and fragments
the address pair; non-IP frames get hash 0.  The default indirection table
spreads hash & 127 over the queues round-robin (ethtool_rxfh_indir_default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Tuple

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython


# key -> per-byte-position tables: _TABLES[key][pos][byte] is the XOR of the key
# windows for the set bits of ``byte`` at input byte ``pos``.  Shared by every
# engine with that key; filled one position at a time as inputs need them.
_TABLES: Dict[bytes, list] = {}
# (key, input bytes) -> the compiled build's tables as one string (_flat_table)
_FLAT_TABLES: Dict[Tuple[bytes, int], bytes] = {}
TABLE_AFTER_MISSES = 64          # a capture with few flows never builds tables
MAX_INPUT_BYTES = 36             # an IPv6 4-tuple


class Toeplitz:
    def __init__(self, key: bytes):
        self._key_bytes = bytes(key)
        self._key = int.from_bytes(key, "big")
        self._bits = len(key) * 8
        self.cache: Dict[bytes, int] = {}   # input -> hash of the inputs seen (read-only for callers)
        self._misses = 0
        # the compiled build hashes every frame through the tables, kept as one byte
        # string of native 32-bit words (a table per input byte the key has windows
        # for) and read in place; the interpreter is faster with the cache of
        # hashes by input
        self._flat = b""
        self._flat_bytes = 0
        if cython.compiled:
            self._flat_bytes = min(MAX_INPUT_BYTES, max(0, (self._bits - 32 - 7) // 8 + 1))
            flat = _FLAT_TABLES.get((self._key_bytes, self._flat_bytes))
            if flat is None:
                flat = _FLAT_TABLES[self._key_bytes, self._flat_bytes] = _flat_table(
                    self._key, self._bits, self._flat_bytes)
            self._flat = flat

    def hash(self, tuple_bytes: bytes) -> int:
        cached = self.cache.get(tuple_bytes)
        if cached is not None:
            return cached
        nbits = len(tuple_bytes) * 8
        shift = self._bits - 32
        self._misses += 1
        if self._misses > TABLE_AFTER_MISSES and nbits - 1 <= shift:
            # many flows: a table lookup per input byte instead of a step per bit
            result = _hash_by_tables(self._tables(len(tuple_bytes)), tuple_bytes)
        else:
            value = int.from_bytes(tuple_bytes, "big")
            result = 0
            key = self._key
            for i in range(nbits):
                if value >> (nbits - 1 - i) & 1:
                    result ^= (key >> (shift - i)) & 0xFFFFFFFF
        if len(self.cache) > 1_000_000:
            self.cache.clear()           # bounded memory on captures with many flows
        self.cache[tuple_bytes] = result
        return result

    def flow_hash(self, data: bytes, off: int, protocol: int, end: int = -1) -> int:
        """skb->hash of a frame whose network header starts at ``off`` (0 for non-IP)
        and which ends at ``end`` (the end of data by default)."""
        if end < 0:
            end = len(data)
        if cython.compiled:
            # the input read where it lies in the frame, one table entry per byte
            first, first_len, second, second_len = input_ranges(data, off, protocol, end)
            if not first_len:
                return 0
            if first_len + second_len <= self._flat_bytes:
                flat = self._flat      # read in place as words: (input position, byte) at 256 * position + byte
                words = cython.cast(cython.p_uint, flat)
                raw = data
                result = 0
                # four bytes a step (input_ranges' lengths are 8 or 32, then 4 or 0)
                for pos in range(0, first_len, 4):
                    result ^= _four_bytes(words, pos, raw, first + pos)
                if second_len:
                    result ^= _four_bytes(words, first_len, raw, second)
                return result
        tup = hash_input(data, off, protocol, end)
        if not tup:
            return 0
        h = self.cache.get(tup)
        return self.hash(tup) if h is None else h

    def _tables(self, nbytes: int) -> list:
        tables = _TABLES.setdefault(self._key_bytes, [])
        key = self._key
        shift = self._bits - 32
        while len(tables) < nbytes:
            windows = _byte_windows(key, shift, len(tables))
            # row[byte]: the XOR of windows[j] for each set bit j of byte (bit 0 the
            # most significant), built bit by bit from the least significant one
            row = [0]
            for j in range(7, -1, -1):
                window = windows[j]
                row += [value ^ window for value in row]
            tables.append(row)
        return tables


def _four_bytes(words, pos: int, raw, at: int) -> int:
    """The XOR of the flat table's entries for input bytes pos to pos + 3, read
    at raw[at] (compiled build only: flow_hash)."""
    row = pos << 8
    return (words[row | raw[at]] ^ words[(row + 256) | raw[at + 1]]
            ^ words[(row + 512) | raw[at + 2]] ^ words[(row + 768) | raw[at + 3]])


def _byte_windows(key: int, shift: int, pos: int) -> list:
    """The 32-bit key windows of the eight bits of input byte ``pos``, its most
    significant bit first: the window of input bit i is the key's 32 bits from
    bit i on (``shift``: the key's length in bits minus 32)."""
    return [(key >> (shift - (pos * 8 + j))) & 0xFFFFFFFF for j in range(8)]


def _flat_table(key: int, bits: int, nbytes: int) -> bytes:
    """The compiled build's tables (see Toeplitz._tables) for the first ``nbytes``
    input bytes, as one string of native 32-bit words: (position, byte) at
    256 * position + byte.  Filled as C words, not built as Python ints (-4 M
    instructions of every start)."""
    table = bytearray(nbytes << 10)
    buf = table                                    # (a C pointer in the compiled build)
    words = cython.cast(cython.p_uint, buf)        # written in place: 256 words a position
    shift = bits - 32
    for pos in range(nbytes):
        base = pos << 8
        windows = _byte_windows(key, shift, pos)
        # as _tables: entry (base + byte) XORs the windows of byte's set bits,
        # bit 0 the most significant, doubling from the least significant one
        size = 1
        for j in range(7, -1, -1):
            window = windows[j]
            for v in range(size):
                words[base + size + v] = words[base + v] ^ window
            size <<= 1
    return bytes(table)


def input_ranges(data: bytes, off: int, protocol: int, end: int):
    """Where the bytes a NIC feeds to Toeplitz lie in the frame that ends at
    data[end]: (start, length) of the addresses, then (start, length) of the
    port pair (length 0: none).  All lengths 0: no hash."""
    n = end
    raw = data     # the same bytes read in place (a C pointer in the compiled build): every read is checked against n
    while protocol in (0x8100, 0x88A8) and n >= off + 4:
        protocol = (raw[off + 2] << 8) | raw[off + 3]
        off += 4
    if protocol == 0x0800 and n >= off + 20:
        ihl = (raw[off] & 0x0F) * 4
        proto = raw[off + 9]
        if (proto == 6 or proto == 17) and not ((raw[off + 6] << 8) | raw[off + 7]) & 0x3FFF \
                and n >= off + ihl + 4:
            return off + 12, 8, off + ihl, 4
        return off + 12, 8, 0, 0
    if protocol == 0x86DD and n >= off + 40:
        nexthdr = raw[off + 6]
        pos = off + 40
        while nexthdr in (0, 43, 60) and n >= pos + 8:
            nexthdr, pos = raw[pos], pos + (raw[pos + 1] + 1) * 8
        if nexthdr in (6, 17) and n >= pos + 4:
            return off + 8, 32, pos, 4
        return off + 8, 32, 0, 0
    return 0, 0, 0, 0


def hash_input(data: bytes, off: int, protocol: int, end: int = -1) -> bytes:
    """The bytes a NIC feeds to Toeplitz for this frame (empty: no hash)."""
    first, first_len, second, second_len = input_ranges(data, off, protocol, len(data) if end < 0 else end)
    end = first + first_len
    if not second_len or second == end:
        return data[first:end + second_len]        # one range, or the ports follow the addresses
    return data[first:end] + data[second:second + second_len]


def _hash_by_tables(tables: list, tuple_bytes: bytes) -> int:
    """Toeplitz of ``tuple_bytes``: the XOR of one table entry per input byte."""
    result = 0
    raw = tuple_bytes     # read in place (a C pointer in the compiled build): pos < len(tuple_bytes)
    for pos in range(len(tuple_bytes)):
        row = tables[pos]
        entry = row[raw[pos]]
        result ^= entry
    return result
