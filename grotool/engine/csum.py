"""Internet checksum arithmetic (RFC 1071 / RFC 1624) on bytes.

The ones'-complement sum of 16-bit big-endian words equals the big integer
value of the bytes modulo 0xFFFF (2**16 == 1 mod 0xFFFF), which CPython
computes in C: far faster than a Python loop over words.

``frame_sums`` does the same for many frames at once, with numpy when it is
installed (the optional ``fast`` extra) and the batch is big enough to pay for
numpy's fixed cost; the verdicts built on it are the same either way.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

_UNSET = object()
_np = _UNSET                           # numpy, imported on first need (grotool[fast]), or None


def numpy_module():
    """numpy when installed, else None; imported only when a batch needs it
    (its import costs tens of milliseconds a small capture need not pay)."""
    global _np
    if _np is _UNSET:
        try:
            import numpy
        except ImportError:
            numpy = None
        _np = numpy
    return _np

_from_bytes = int.from_bytes
LITTLE_ENDIAN = sys.byteorder == "little"

# Below this many bytes in a batch, numpy's fixed cost (a few microseconds)
# outweighs the per-frame arithmetic it saves.
BATCH_MIN_BYTES = 4096
_PADS = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")


def sum16(data) -> int:
    """Ones'-complement sum of ``data`` (odd length padded with a zero byte), in 0..0xFFFE."""
    if len(data) & 1:
        return (_from_bytes(data, "big") << 8) % 0xFFFF
    return _from_bytes(data, "big") % 0xFFFF


def sum16_range(data, start: int, end: int) -> int:
    """sum16(data[start:end]) (0 <= start <= end <= len(data)), read in place."""
    if cython.compiled:
        # 32-bit words in the machine's byte order added in 64 bits (no carry to
        # fold: a frame has far fewer than 2**32 of them; the loop vectorises).
        # Modulo 0xFFFF that is the sum of the 16-bit words in that order; on a
        # little-endian machine each is the big-endian word times 256 (see
        # frame_sums), so times 256 again gives the big-endian sum back.
        raw = data
        p = raw + start
        n = end - start
        words = n >> 2
        native = 0
        for k in range(words):
            memcpy(cython.address(word), p + 4 * k, 4)
            native += word
        native %= 0xFFFF
        if LITTLE_ENDIAN:
            native = (native << 8) % 0xFFFF
        tail = 0
        for i in range(4 * words, n - 1, 2):    # the last 0..3 bytes: big-endian words
            tail += (p[i] << 8) | p[i + 1]
        if n & 1:
            tail += p[n - 1] << 8               # an odd byte is padded with a zero byte
        return (native + tail) % 0xFFFF
    if (end - start) & 1:
        return (_from_bytes(memoryview(data)[start:end], "big") << 8) % 0xFFFF
    return _from_bytes(memoryview(data)[start:end], "big") % 0xFFFF


def batch_worthwhile(total_bytes: int) -> bool:
    """True when frame_sums takes its one-pass (numpy) route for this many bytes."""
    return total_bytes >= BATCH_MIN_BYTES and numpy_module() is not None


def frame_sums(frames) -> list:
    """For each frame, an integer congruent to ``sum16(frame)`` modulo 0xFFFF
    (not reduced: callers reduce once, after adding and subtracting), computed
    in one pass over all the frames when numpy is available and it pays.

    The one-pass route pads each frame with zero bytes to a multiple of four
    (zero words change no sum; sum16 pads an odd length with a zero byte too),
    reads the bytes as little-endian 32-bit integers and adds them per frame in
    64 bits.  Modulo 0xFFFF a 32-bit integer is the sum of its two 16-bit halves
    (2**16 == 1), and a little-endian 16-bit word is the big-endian one rotated
    by a byte, i.e. multiplied by 256; since 256 * 256 == 1, multiplying the
    total by 256 gives the big-endian sum back.
    """
    total = 0
    for f in frames:
        total += len(f)
    if not batch_worthwhile(total):
        return [sum16(f) for f in frames]
    nonempty = [i for i, f in enumerate(frames) if f]   # reduceat cannot express an empty segment
    if len(nonempty) == len(frames):
        return one_pass_sums(frames)
    out = [0] * len(frames)
    for i, v in zip(nonempty, one_pass_sums([frames[i] for i in nonempty])):
        out[i] = v
    return out


def one_pass_sums(frames) -> list:
    """frame_sums' one-pass route for non-empty frames (after batch_worthwhile
    said yes); the same values frame by frame when numpy is missing."""
    np = numpy_module()
    if np is None:
        return [sum16(f) for f in frames]
    parts = []
    starts = []
    pos = 0
    pads = _PADS
    for f in frames:
        n = len(f)
        starts.append(pos)
        parts.append(f)
        pad = -n & 3
        if pad:
            parts.append(pads[pad])
            n += pad
        pos += n >> 2
    words = np.frombuffer(b"".join(parts), "<u4")
    # no overflow: below 2**32 per word, and even a 1 MiB frame has only 2**18 words
    sums = np.add.reduceat(words, starts, dtype=np.uint64)
    sums <<= np.uint64(8)
    return sums.tolist()


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


def ip_header_ok(data, off: int) -> bool:
    """ip_fast_csum over the 20-byte IPv4 header at ``off`` is zero: the
    ones'-complement sum of its ten words is 0 modulo 0xFFFF.  The caller has
    checked that the 20 bytes are present."""
    if cython.compiled:
        # read in place (a C pointer) as five native 32-bit words: 2**16 is 1 and a
        # byte swap a factor 2**8 modulo 0xFFFF, so their sum is 0 exactly when the
        # ten big-endian 16-bit words' is
        raw = data
        total = 0
        for i in range(5):
            memcpy(cython.address(word), raw + off + 4 * i, 4)
            total += word
        return total % 0xFFFF == 0
    # interpreted: the header as one integer, congruent to its word sum (see above)
    return _from_bytes(data[off:off + 20], "big") % 0xFFFF == 0


def replace16(check: int, old: int, new: int) -> int:
    """Incrementally update a checksum field for a 16-bit change (RFC 1624 eqn. 3),
    as csum_replace2 does for iph->tot_len in inet_gro_complete."""
    total = (~check & 0xFFFF) + (~old & 0xFFFF) + new
    return (~fold(total)) & 0xFFFF
