"""Internet checksum arithmetic (RFC 1071 / RFC 1624) on bytes.

The ones'-complement sum of 16-bit big-endian words equals the big integer
value of the bytes modulo 0xFFFF (2**16 == 1 mod 0xFFFF), which CPython
computes in C: far faster than a Python loop over words.
"""

from __future__ import annotations

_from_bytes = int.from_bytes


def sum16(data) -> int:
    """Ones'-complement sum of ``data`` (odd length padded with a zero byte), in 0..0xFFFE."""
    if len(data) & 1:
        return (_from_bytes(data, "big") << 8) % 0xFFFF
    return _from_bytes(data, "big") % 0xFFFF


def fold(value: int) -> int:
    """Reduce a sum of 16-bit quantities to 16 bits the way hardware does (1..0xFFFF)."""
    value = (value & 0xFFFF) + (value >> 16)
    value = (value & 0xFFFF) + (value >> 16)
    return value


def pseudo4(src: bytes, dst: bytes, proto: int, length: int) -> int:
    """Unfolded sum of the IPv4 pseudo-header."""
    return (_from_bytes(src, "big") % 0xFFFF) + (_from_bytes(dst, "big") % 0xFFFF) + proto + length


def pseudo6(src: bytes, dst: bytes, proto: int, length: int) -> int:
    """Unfolded sum of the IPv6 pseudo-header."""
    return (_from_bytes(src, "big") % 0xFFFF) + (_from_bytes(dst, "big") % 0xFFFF) + (length >> 16) + (length & 0xFFFF) + proto


def seed(pseudo_sum: int) -> int:
    """The value a CHECKSUM_PARTIAL packet carries in its L4 checksum field:
    the folded, not complemented, pseudo-header sum (tcp4/6_gro_complete)."""
    return fold(pseudo_sum)


def is_valid(pseudo_sum: int, segment) -> bool:
    """True when pseudo-header + segment (checksum field included) sums to 0xFFFF."""
    return (pseudo_sum + sum16(segment)) % 0xFFFF == 0


def complement(pseudo_sum_plus_data: int) -> int:
    """Final checksum field value for a segment whose field was zero while summing."""
    value = pseudo_sum_plus_data % 0xFFFF
    return (~value) & 0xFFFF if value else 0xFFFF


def ip_header_ok(header) -> bool:
    """ip_fast_csum over the 20-byte header is zero."""
    return _from_bytes(header, "big") % 0xFFFF == 0


def replace16(check: int, old: int, new: int) -> int:
    """Incrementally update a checksum field for a 16-bit change (RFC 1624 eqn. 3),
    as csum_replace2 does for iph->tot_len in inet_gro_complete."""
    total = (~check & 0xFFFF) + (~old & 0xFFFF) + new
    return (~fold(total)) & 0xFFFF
