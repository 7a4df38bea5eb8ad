"""The fast paths give exactly the slow paths' answers.

* csum.frame_sums (one numpy pass over a poll's frames) is congruent to
  csum.sum16 per frame, for every length (odd, every residue mod 4, empty),
  all-zero and all-0xFF data, batches on both sides of BATCH_MIN_BYTES, and
  without numpy;
* TCP validation from a primed whole-frame sum (napi.prime_checksums) gives the
  verdict the per-frame sum gives: the same deliveries, reasons and checksum
  counters with numpy, without numpy and with priming switched off, for
  correct, corrupted, 0x0000 / 0xFFFF and offloaded-seed checksum fields, odd
  payloads, IPv4/IPv6, VLAN tags and IP-in-IP tunnels, in every --csum mode
  and both device models;
* the pseudo-header sums tcp.py uses reduce and fold like csum.pseudo4/pseudo6;
* the byte readers whose compiled and interpreted bodies differ (csum.ip_header_ok, csum.sum16_range,
  tcp.word32, tcp.same_bytes) give the straightforward answers, at every offset;
* tcp._options_reason, walking two option areas where they lie in their frames,
  names what tcp.option_offsets of the two sliced areas says (timestamps first,
  last, twice, beside NOPs, SACK and malformed or cut options);
* skb.extend_key and extend_key_masked (the compiled build copies ranges into one new string), after
  ranges skb.defer_key left waiting or none, gives exactly the concatenated
  slices, ranges running past the data included;
* the RSS hash input and the Toeplitz hash match the straightforward versions;
* PcapWriter's gathered writes survive short writes byte for byte.

Random data from fixed seeds, plain loops (no hypothesis).
"""

from __future__ import annotations

import os
import random
import struct
import subprocess
import sys

import pytest

import framebuild as F
from grotool import scenarios as S
from grotool.engine import Settings, csum, ipv6, napi, rss, simulate, skb, tcp
from grotool.io.capture import PcapWriter, read_capture

BASE_TS = 1_700_000_000 * 10**9
needs_numpy = pytest.mark.skipif(csum.numpy_module() is None, reason="numpy not installed (grotool[fast])")


@pytest.fixture(autouse=True)
def prime_from_the_first_frame(monkeypatch):
    """The engine sums the first CSUM_PRIME_AFTER_FRAMES frames one by one (and
    the compiled build every frame: PRIME_CHECKSUMS); these tests want the
    primed path from the start, in both builds."""
    monkeypatch.setattr(napi, "CSUM_PRIME_AFTER_FRAMES", 0)
    monkeypatch.setattr(napi, "PRIME_CHECKSUMS", True)


def ones_sum(data: bytes) -> int:
    """RFC 1071 the slow way, folded to 0..0xFFFF (tests/framebuild.py)."""
    return F.ones_sum(data)


def same_residue(a: int, b: int) -> bool:
    return a % 0xFFFF == b % 0xFFFF


# ------------------------------------------------------------------------------------------
# frame_sums against sum16 and an independent word loop
# ------------------------------------------------------------------------------------------
def _frames(rng: random.Random, count: int):
    out = []
    for _ in range(count):
        kind = rng.random()
        n = rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 60, 61, 62, 63, 1514, 1515, 1516, 1517, rng.randrange(0, 9001)])
        if kind < 0.1:
            out.append(b"\xff" * n)                # words of 0xFFFF: "negative zero" sums
        elif kind < 0.2:
            out.append(bytes(n))                   # words of 0x0000
        else:
            out.append(rng.randbytes(n))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_frame_sums_congruent_to_sum16(seed):
    rng = random.Random(seed)
    for _ in range(40):
        frames = _frames(rng, rng.randrange(1, 80))
        sums = csum.frame_sums(frames)
        assert len(sums) == len(frames)
        for f, s in zip(frames, sums):
            assert same_residue(s, csum.sum16(f)), len(f)
            assert same_residue(s, ones_sum(f)), len(f)


@needs_numpy
def test_frame_sums_takes_the_numpy_route_and_agrees():
    rng = random.Random(11)
    frames = [rng.randbytes(rng.randrange(1, 3000)) for _ in range(64)]
    assert csum.batch_worthwhile(sum(map(len, frames)))
    assert [s % 0xFFFF for s in csum.frame_sums(frames)] == [csum.sum16(f) for f in frames]
    # empty frames inside a numpy batch
    mixed = [b""] + frames[:10] + [b"", b"\x01"] + frames[10:] + [b""]
    assert [s % 0xFFFF for s in csum.frame_sums(mixed)] == [csum.sum16(f) for f in mixed]


def test_frame_sums_without_numpy(monkeypatch):
    monkeypatch.setattr(csum, "_np", None)
    rng = random.Random(5)
    frames = _frames(rng, 100)
    assert not csum.batch_worthwhile(10**9)
    assert csum.frame_sums(frames) == [csum.sum16(f) for f in frames]


def test_frame_sums_small_batch_is_exact():
    frames = [b"\x12\x34\x56", b"", b"\xff\xff"]
    assert csum.frame_sums(frames) == [csum.sum16(f) for f in frames]


def test_sum16_extremes():
    for n in (0, 1, 2, 3, 4, 1000, 1001):
        for data in (bytes(n), b"\xff" * n):
            assert same_residue(csum.sum16(data), ones_sum(data))
            if n:
                assert same_residue(csum.frame_sums([data] * 8 + [os.urandom(4096)])[0], ones_sum(data))


# ------------------------------------------------------------------------------------------
# byte readers with a compiled and an interpreted body (the suite runs under both builds)
# ------------------------------------------------------------------------------------------
def test_sum16_range_is_sum16_of_the_slice():
    """sum16_range (compiled: 32-bit words in machine order, then the 0..3 bytes
    left) is exactly sum16 of the slice: every start and end in short data of
    every length, long frames at every alignment, all-zero and all-0xFF bytes."""
    rng = random.Random(9)
    checked = 0
    for n in range(0, 24):
        for data in (rng.randbytes(n), bytes(n), b"\xff" * n):
            for start in range(n + 1):
                for end in range(start, n + 1):
                    want = csum.sum16(data[start:end])
                    assert csum.sum16_range(data, start, end) == want, (data, start, end)
                    assert want == ones_sum(data[start:end]) % 0xFFFF
                    checked += 1
    for _ in range(300):
        data = rng.choice([rng.randbytes, bytes, lambda k: b"\xff" * k])(rng.randrange(1400, 9100))
        start = rng.randrange(0, 70)
        end = rng.choice([len(data), rng.randrange(start, len(data) + 1)])
        assert csum.sum16_range(data, start, end) == csum.sum16(data[start:end]) == \
            ones_sum(data[start:end]) % 0xFFFF
        checked += 1
    assert checked == 3 * sum((n + 1) * (n + 2) // 2 for n in range(24)) + 300


def test_ip_header_ok_is_a_zero_ones_complement_sum():
    rng = random.Random(5)
    header = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 1500, 7, 0x4000, 64, 6, 0,
                                   bytes((10, 0, 0, 1)), bytes((10, 0, 0, 2))))
    header[10:12] = struct.pack("!H", csum.complement(ones_sum(bytes(header))))
    good = bytes(header)
    assert ones_sum(good) in (0, 0xFFFF)
    checked = 0
    for pad in (0, 1, 14, 17):
        for frame, want in ((bytes(pad) + good, True), (bytes(pad) + good[:3] + b"\x01" + good[4:], False),
                            (bytes(pad) + bytes(20), True), (bytes(pad) + b"\xff" * 20, True)):
            assert csum.ip_header_ok(frame, pad) is want
            checked += 1
    for _ in range(2000):
        data = rng.randbytes(rng.randrange(20, 64))
        off = rng.randrange(0, len(data) - 19)
        assert csum.ip_header_ok(data, off) is (ones_sum(data[off:off + 20]) % 0xFFFF == 0)
        # the same header made valid (its checksum field set), then one bit flipped:
        # the compiled build sums native 32-bit words, which must agree either way
        valid = bytearray(data)
        valid[off + 10:off + 12] = b"\0\0"
        valid[off + 10:off + 12] = struct.pack("!H", csum.complement(ones_sum(bytes(valid[off:off + 20]))))
        assert csum.ip_header_ok(bytes(valid), off) is True
        bit = rng.randrange(160)
        valid[off + bit // 8] ^= 0x80 >> (bit % 8)
        assert csum.ip_header_ok(bytes(valid), off) is False
        checked += 3
    assert checked == 6016


def test_word32_and_same_bytes_read_what_slicing_reads():
    rng = random.Random(6)
    for _ in range(2000):
        a = rng.randbytes(rng.randrange(4, 80))
        at = rng.randrange(0, len(a) - 3)
        assert tcp.word32(a, at) == struct.unpack_from("!I", a, at)[0]
        b = bytearray(a)
        n = rng.randrange(0, len(a) - at + 1)
        if n and rng.random() < 0.5:
            b[at + rng.randrange(n)] ^= 1 << rng.randrange(8)
        b = bytes(rng.randbytes(3)) + bytes(b)
        assert tcp.same_bytes(a, at, b, at + 3, n) is (a[at:at + n] == b[at + 3:at + 3 + n])
    assert tcp.word32(b"\xff" * 4, 0) == 0xFFFFFFFF
    assert tcp.same_bytes(b"abc", 1, b"xbc", 1, 2) is True and tcp.same_bytes(b"abc", 0, b"xbc", 0, 3) is False


def _options_reason_by_slices(opts, opts2):
    """The definition: a timestamp option (kind 8, length 10, within the area)
    whose bytes before its values and after them are equal in both areas."""
    n = len(opts)
    for i, kind, olen in tcp.option_offsets(opts):
        if kind == 8 and olen == 10 and i + 10 <= n and opts[:i + 2] == opts2[:i + 2] \
                and opts[i + 10:] == opts2[i + 10:]:
            return "tcp_ts_changed"
    return "tcp_options_changed"


def _random_options(rng, n):
    pieces = []
    while sum(map(len, pieces)) < n:
        choice = rng.random()
        if choice < 0.35:
            pieces.append(bytes([8, 10]) + rng.randbytes(8))                  # timestamps
        elif choice < 0.55:
            pieces.append(b"\x01")                                             # NOP
        elif choice < 0.75:
            pieces.append(bytes([5, 10]) + rng.randbytes(8))                  # SACK block
        elif choice < 0.85:
            pieces.append(bytes([rng.randrange(256), rng.randrange(4)]))      # kind with a bad length
        else:
            pieces.append(rng.randbytes(rng.randrange(1, 4)))                 # anything, EOL included
    return b"".join(pieces)[:n]


def test_options_reason_walks_in_place_as_option_offsets_does():
    rng = random.Random(11)
    seen = set()
    for _ in range(4000):
        n = rng.choice((4, 8, 12, 20, 32, 40))
        opts = _random_options(rng, n)
        other = bytearray(opts)
        for _ in range(rng.randrange(3)):
            other[rng.randrange(n)] = rng.randrange(256)
        other = bytes(other)
        head, head2 = rng.randbytes(rng.randrange(60)), rng.randbytes(rng.randrange(60))
        data, data2 = head + opts + rng.randbytes(9), head2 + other + rng.randbytes(5)
        expected = _options_reason_by_slices(opts, other)
        assert tcp._options_reason(data, len(head), data2, len(head2), n) == expected, (opts, other)
        seen.add(expected)
    assert seen == {"tcp_ts_changed", "tcp_options_changed"}
    # the second of two timestamp options is the one that changed
    ts1, ts2, ts2b = bytes([8, 10]) + bytes(8), bytes([8, 10]) + bytes(range(8)), bytes([8, 10]) + bytes(range(1, 9))
    assert tcp._options_reason(ts1 + ts2 + b"\x01\x01", 0, ts1 + ts2b + b"\x01\x01", 0, 22) == "tcp_ts_changed"
    assert tcp._options_reason(b"\x01\x01" + ts1, 0, b"\x01\x01" + ts2, 0, 12) == "tcp_ts_changed"
    assert tcp._options_reason(b"\x01\x01" + ts1, 0, b"\x01\x00" + ts2, 0, 12) == "tcp_options_changed"
    # a timestamp option cut short by the area is no timestamp: nothing past the area is read
    assert tcp._options_reason(b"\x01\x01\x08\x0a\x00\x00\x00\x01", 0, b"\x01\x01\x08\x0a\x00\x00\x00\x02", 0, 8) \
        == "tcp_options_changed"


def _extended(key, data, head, at, n, at2=0, n2=0, deferred=()):
    frame = skb.Skb(data, 0, 0, 0, key=key)
    frame.key_from_frame = head
    if deferred:
        skb.defer_key(frame, *deferred)
        assert frame.key == key
    if n2 or at2:
        skb.extend_key(frame, data, at, n, at2, n2)
    else:
        skb.extend_key(frame, data, at, n)
    assert (frame.key_from_frame, frame.key_n, frame.key_n2) == (0, 0, 0)
    return frame.key


def test_extend_key_appends_the_concatenated_slices():
    rng = random.Random(8)
    for _ in range(3000):
        data = rng.randbytes(rng.randrange(0, 90))
        key = rng.randbytes(rng.randrange(0, 40))
        # pending link header bytes, offsets and lengths inside, at the edge of and past the data
        head = rng.choice((0, 0, 14, 18, rng.randrange(0, 100)))
        at, n = rng.randrange(0, 100), rng.randrange(0, 20)
        # ranges a layer deferred (IPv4's addresses and protocol), sometimes
        deferred = ()
        waiting = b""
        if rng.random() < 0.5:
            d0, m0, d1, m1 = (rng.randrange(0, 100), rng.randrange(0, 20), rng.randrange(0, 100),
                              rng.choice((0, 1, rng.randrange(0, 20))))
            deferred = (d0, m0, d1, m1)
            waiting = data[d0:d0 + m0] + data[d1:d1 + m1]
        if rng.random() < 0.5:
            at2, n2 = rng.randrange(0, 100), rng.randrange(0, 20)
            got = _extended(key, data, head, at, n, at2, n2, deferred)
            assert got == key + data[:head] + waiting + data[at:at + n] + data[at2:at2 + n2], \
                (len(data), head, deferred, at, n, at2, n2)
        else:
            got = _extended(key, data, head, at, n, deferred=deferred)
            assert got == key + data[:head] + waiting + data[at:at + n], (len(data), head, deferred, at, n)
        assert type(got) is bytes
    assert _extended(b"k", b"abcdef", 0, 2, 2, 0, 1) == b"kcda"
    assert _extended(b"", b"abcdef", 3, 4, 2) == b"abcef"
    assert _extended(b"", b"", 0, 0, 0) == b""
    assert _extended(b"k", b"abcdef", 1, 5, 1, deferred=(3, 1, 2, 1)) == b"kadcf"


def test_extend_key_masked_keeps_the_masked_bytes_then_the_range():
    rng = random.Random(9)
    for _ in range(3000):
        data = rng.randbytes(rng.randrange(0, 90))
        key = rng.randbytes(rng.randrange(0, 40))
        head = rng.choice((0, 0, 14, 18, rng.randrange(0, 100)))
        mask = bytes(rng.choice((0, 0xFF, 0xF0, 0x0F, rng.randrange(256))) for _ in range(rng.randrange(0, 12)))
        # the masked bytes lie in the data (a layer checked its header's length); the rest anywhere
        if len(mask) > len(data):
            mask = mask[:len(data)]
        at = rng.randrange(0, len(data) - len(mask) + 1)
        at2, n2 = rng.randrange(0, 100), rng.randrange(0, 40)
        frame = skb.Skb(data, 0, 0, 0, key=key)
        frame.key_from_frame = head
        waiting = b""
        if rng.random() < 0.5:
            d0, m0, d1, m1 = rng.randrange(0, 100), rng.randrange(0, 20), rng.randrange(0, 100), rng.randrange(0, 4)
            skb.defer_key(frame, d0, m0, d1, m1)
            waiting = data[d0:d0 + m0] + data[d1:d1 + m1]
        skb.extend_key_masked(frame, data, at, mask, at2, n2)
        fields = bytes(byte & bits for byte, bits in zip(data[at:at + len(mask)], mask))
        assert frame.key == key + data[:head] + waiting + fields + data[at2:at2 + n2], (len(data), head, at, mask)
        assert type(frame.key) is bytes and (frame.key_from_frame, frame.key_n, frame.key_n2) == (0, 0, 0)


def test_ipv6_key_is_the_masked_first_word_next_header_and_addresses():
    """ipv6_gro_receive's identity: version and flow label (traffic class and
    payload length left out), next header, addresses, extension headers."""
    rng = random.Random(10)
    for _ in range(500):
        header = bytearray(rng.randbytes(40))
        header[0] = 0x60 | (header[0] & 0x0F)
        header[6] = 6
        frame = skb.Skb(bytes(14) + bytes(header) + bytes(20), 0, 0, 14)
        frame.key_from_frame = 14
        frame.off = 14
        skb.extend_key_masked(frame, frame.data, 14, ipv6.KEY_FIELDS, 22, 32)
        assert frame.key == (bytes(14) + bytes((header[0] & 0xF0, header[1] & 0x0F)) + header[2:4] + bytes(2)
                             + header[6:7] + header[8:40])


def test_settled_key_takes_the_pending_link_header_once():
    frame = skb.Skb(b"0123456789", 0, 0, 4)
    frame.key_from_frame = 4
    assert skb.settled_key(frame) == b"0123" and frame.key_from_frame == 0
    assert skb.settled_key(frame) == b"0123" and frame.key == b"0123"


def test_deferred_ranges_join_the_key_in_order():
    """IP in IP defers two ranges twice: the first join before the second wait;
    one range more (TCP's ports) waits behind them, compared in place."""
    frame = skb.Skb(b"0123456789", 0, 0, 2)
    frame.key_from_frame = 2
    skb.defer_key(frame, 4, 2, 9, 1)
    assert frame.key == b""
    skb.defer_key(frame, 6, 1, 3, 1)
    assert frame.key == b"01459" and (frame.key_at, frame.key_n, frame.key_at2, frame.key_n2) == (6, 1, 3, 1)
    skb.defer_key(frame, 7, 2)
    assert frame.key == b"01459" and (frame.key_at3, frame.key_n3) == (7, 2)
    assert skb.key_matches(b"014596378", frame) and not skb.key_matches(b"014596377", frame)
    assert not skb.key_matches(b"01459637", frame)
    assert skb.settled_key(frame) == b"014596378" and skb.settled_key(frame) == b"014596378"
    skb.extend_key(frame, frame.data, 8, 2)
    assert frame.key == b"01459637889"


def test_a_frame_in_a_larger_buffer_keys_its_own_bytes():
    """A frame read where it lies in the reader's buffer (data[start:end]):
    its link header's key bytes are its own, not the buffer's first bytes."""
    frame = skb.new_skb(b"xyz0123456789", 3, 13, 0, 0, 2, 0x800, b"")
    frame.key_from_frame = 2
    skb.defer_key(frame, 7, 2, 12, 1)
    skb.defer_key(frame, 9, 1)
    assert skb.key_matches(b"014596", frame) and not skb.key_matches(b"xy4596", frame)
    assert skb.settled_key(frame) == b"014596"
    skb.rebase(frame)
    assert (frame.data, frame.start, frame.end, frame.off) == (b"0123456789", 0, 10, 2)


# ------------------------------------------------------------------------------------------
# pseudo-header sums
# ------------------------------------------------------------------------------------------
def test_pseudo_sums_reduce_and_fold_like_csum_pseudo():
    rng = random.Random(3)
    specials = [bytes(4), b"\xff" * 4, bytes(16), b"\xff" * 16]
    for i in range(3000):
        length = rng.choice([0, 1, 20, 21, 65535, 65536, 65537, 131071, rng.randrange(0, 1 << 20)])
        if i < 16:
            s4, d4 = specials[i % 2], specials[(i // 2) % 2]
            s6, d6 = specials[2 + i % 2], specials[2 + (i // 2) % 2]
        else:
            s4, d4, s6, d6 = rng.randbytes(4), rng.randbytes(4), rng.randbytes(16), rng.randbytes(16)
        hdr4 = bytes(12) + s4 + d4
        hdr6 = bytes(8) + s6 + d6
        for fast, slow in ((tcp.pseudo4(hdr4, 0, length), csum.pseudo4(s4, d4, 6, length)),
                           (tcp.pseudo6(hdr6, 0, length), csum.pseudo6(s6, d6, 6, length))):
            assert fast > 0 and slow > 0 and fast < 1 << 32
            assert same_residue(fast, slow)
            assert csum.fold(fast) == csum.fold(slow)


# ------------------------------------------------------------------------------------------
# TCP verdicts through the engine: primed (numpy), unprimed, no numpy
# ------------------------------------------------------------------------------------------
def _traffic(seed: int):
    """Several flows of mixed families/encapsulations with every kind of checksum field."""
    rng = random.Random(seed)
    flows = []
    for i in range(10):
        flows.append(dict(family=rng.choice([4, 6]), sport=2000 + i, seq=rng.getrandbits(32),
                          ip_id=rng.getrandbits(16), vlan=rng.random() < 0.3,
                          outer=rng.choice([None, None, {"family": 4}, {"family": 6}])))
    frames = []
    for n in range(900):
        f = rng.choice(flows)
        plen = rng.choice([1448, 1448, 1448, 1447, 1001, 999, 513, 300, 7, 0])
        r = rng.random()
        bad = False
        if r < 0.05:
            bad = True                                         # off by one
        elif r < 0.10:
            bad = rng.randrange(1, 0x10000)                    # some other value
        kw = dict(sport=f["sport"], seq=f["seq"], payload=rng.randbytes(plen), ip_id=f["ip_id"] & 0xFFFF,
                  flags="PA" if rng.random() < 0.08 else "A", bad_tcp_csum=bad,
                  tcp_options=S.tcp_opts_ts(n // 16, 7))
        if f["vlan"]:
            kw["vlan"] = [100]
        if f["outer"]:
            kw["outer"] = dict(f["outer"], ip_id=f["ip_id"] & 0xFFFF)
        frame = bytearray(S.tcp_frame(f["family"], **kw))
        r = rng.random()
        if r < 0.05 and not f["outer"] and not f["vlan"]:
            # the field as an offloading sender leaves it, or flipped between the
            # two ones'-complement zeros (0x0000 <-> 0xFFFF), or a flipped payload bit
            p = F.parse(bytes(frame))
            at = p.l4_off + 16
            how = rng.choice(["seed", "zero", "ones", "flip"])
            if how == "seed":
                struct.pack_into("!H", frame, at, F.tcp_seed_of(bytes(frame), p))
            elif how == "zero":
                struct.pack_into("!H", frame, at, 0)
            elif how == "ones":
                struct.pack_into("!H", frame, at, 0xFFFF)
            elif len(frame) > at + 20:
                frame[rng.randrange(at + 20, len(frame))] ^= 1 << rng.randrange(8)
        elif r < 0.07:
            frame += bytes(rng.randrange(1, 6))                # Ethernet trailer: odd lengths too
        frames.append(bytes(frame))
        f["seq"] = (f["seq"] + plen) & 0xFFFFFFFF
        f["ip_id"] += 1
    ts = []
    t = BASE_TS
    for _ in frames:
        t += rng.choice([1200, 1200, 600, 100, 20_000])
        ts.append(t)
    return [(a, b, len(b)) for a, b in zip(ts, frames)]


def _run(records, settings):
    from grotool.engine import Engine
    engine = Engine(1, settings)
    out = []
    for rec in records:
        out.extend(engine.feed(*rec))
    out.extend(engine.finish())
    st = engine.stats
    return ([(d.data, d.segs, d.reason, d.indices, d.gso_size, d.gso_type, d.payload) for d in out],
            (st.csum_offloaded, st.csum_verified, st.csum_bad, st.ip_csum_bad))


SETTINGS = [Settings(device="veth"), Settings(device="veth", csum="verify"), Settings(),
            Settings(csum="verify"), Settings(csum="trust"), Settings(budget=5, rx_usecs=30, rx_frames=0),
            Settings(device="veth", budget=13, l4_csum="full")]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: f"{s.device}-{s.csum}-{s.budget}-{s.l4_csum}")
def test_primed_and_unprimed_verdicts_identical(monkeypatch, seed, settings):
    records = _traffic(seed)
    fast = _run(records, settings)
    assert fast[1][2] or settings.csum == "trust"       # some checksums are bad
    # no priming at all: every verdict from csum.sum16 of the segment
    with monkeypatch.context() as m:
        m.setattr(napi, "prime_checksums", lambda skbs: 0)
        slow = _run(records, settings)
    assert fast == slow
    # priming with the exact pure-Python sums (numpy missing)
    with monkeypatch.context() as m:
        m.setattr(csum, "_np", None)
        m.setattr(csum, "batch_worthwhile", lambda total: True)
        pure = _run(records, settings)
    assert fast == pure


@needs_numpy
def test_priming_really_happens_and_backs_off():
    records = _traffic(1)
    calls = []
    orig = napi.prime_checksums

    def counting(skbs):
        n = orig(skbs)
        calls.append(n)
        return n

    napi_prime = napi.prime_checksums
    napi.prime_checksums = counting
    try:
        _run(records, Settings(device="veth", csum="verify"))
        assert sum(calls) > 500                          # most frames were primed
        # a capture whose checksums all hold the offload seed: auto never sums,
        # so the primer backs off and primes only a few polls
        calls.clear()
        seeded = []
        for ts, frame, wl in records + _traffic(4) + _traffic(5):
            p = F.parse(frame)
            if frame[12:14] != b"\x08\x00" or frame[23] != 6 or p.proto != 6:
                continue
            b = bytearray(frame)
            struct.pack_into("!H", b, p.l4_off + 16, F.tcp_seed_of(frame, p))
            seeded.append((ts, bytes(b), wl))
        _, counters = _run(seeded, Settings(device="veth", budget=4))
        assert counters[1] == 0 and counters[0] > 0
        polls = -(-len(seeded) // 4)
        assert polls > 40
        # backing off 1, 2, 4, ... polls after each useless priming: about log2(polls) tries
        assert 0 < sum(1 for n in calls if n) <= polls.bit_length() + 1
    finally:
        napi.prime_checksums = napi_prime


@needs_numpy
def test_no_priming_during_warmup(monkeypatch):
    monkeypatch.setattr(napi, "CSUM_PRIME_AFTER_FRAMES", 600)
    calls = []
    orig = napi.prime_checksums
    monkeypatch.setattr(napi, "prime_checksums", lambda skbs: calls.append(len(skbs)) or orig(skbs))
    _run(_traffic(0), Settings(device="veth", csum="verify"))
    assert calls and sum(calls) <= 900 - 600 + 64


def test_only_the_interpreted_build_primes_with_numpy(tmp_path):
    """By default the interpreted engine primes long captures' checksums with
    numpy (after its warm-up); the compiled one sums each frame in C and never
    imports numpy."""
    path = tmp_path / "bulk.pcap"
    with PcapWriter(str(path)) as w:
        for ts, frame in S.bulk_flows(8, 7000 // 8, seed=3):     # (the fixture changed the warm-up here)
            w.write(ts, frame)
    code = ("import sys; from grotool.engine import Settings, napi; from grotool.replay import replay; "
            f"r = replay({str(path)!r}, None, Settings()); "
            "print(napi.__file__.endswith('.py'), 'numpy' in sys.modules, r.document['totals']['packets_out'], "
            "napi.CSUM_PRIME_AFTER_FRAMES)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    interpreted, numpy_imported, delivered, warmup = out.stdout.split()
    assert int(delivered) > 0 and int(warmup) <= 6000
    assert numpy_imported == ("True" if interpreted == "True" and csum.numpy_module() is not None else "False")


def test_bundled_captures_identical_with_and_without_priming(monkeypatch):
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "..", "captures", n) for n in ("mixed.pcap", "selftest-ipv4.pcap",
                                                                 "selftest-ipv6.pcap", "bulk-4flows.pcap")]
    for path in paths:
        linktype, records = read_capture(path)
        for settings in (Settings(device="veth", csum="verify"), Settings(csum="auto")):
            fast = [(d.data, d.segs, d.reason, d.indices) for d in simulate(records, linktype, settings)]
            with monkeypatch.context() as m:
                m.setattr(napi, "prime_checksums", lambda skbs: 0)
                slow = [(d.data, d.segs, d.reason, d.indices) for d in simulate(records, linktype, settings)]
            assert fast == slow, path


# ------------------------------------------------------------------------------------------
# RSS: hash input fast paths and the Toeplitz hash
# ------------------------------------------------------------------------------------------
def _hash_input_reference(data: bytes, off: int, protocol: int) -> bytes:
    while protocol in (0x8100, 0x88A8) and len(data) >= off + 4:
        protocol = (data[off + 2] << 8) | data[off + 3]
        off += 4
    if protocol == 0x0800 and len(data) >= off + 20:
        ihl = (data[off] & 0x0F) * 4
        proto = data[off + 9]
        frag = struct.unpack_from("!H", data, off + 6)[0] & 0x3FFF
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


def _toeplitz_reference(key: bytes, data: bytes) -> int:
    k = int.from_bytes(key, "big")
    kbits = len(key) * 8
    result = 0
    for i in range(len(data) * 8):
        if data[i // 8] >> (7 - i % 8) & 1:
            result ^= (k >> (kbits - 32 - i)) & 0xFFFFFFFF
    return result


def test_hash_input_matches_reference():
    rng = random.Random(9)
    records = _traffic(2)
    frames = [f for _, f, _ in records]
    # IPv4 with options and fragments, IPv6 with extension headers, cut-short frames
    frames += [F.tcp_frame(10, ip_options=b"\x01\x01\x01\x00"), F.tcp_frame(10, mf=True),
               F.tcp_frame(10, frag_offset=3), F.tcp_frame(10, family=6, ext=[F.ExtHdr(60), F.ExtHdr(0)]),
               F.icmp_echo_frame(), F.arp_frame()]
    for f in list(frames):
        for cut in (14, 20, 33, 34, 37, 38, 53, 54, 57, 58):
            frames.append(f[:cut])
    for f in frames:
        for off in (14,):
            proto = (f[12] << 8) | f[13] if len(f) >= 14 else 0
            assert rss.hash_input(f, off, proto) == _hash_input_reference(f, off, proto)
    for _ in range(200):
        f = rng.randbytes(rng.randrange(0, 80))
        proto = rng.choice([0x0800, 0x86DD, 0x8100, 0x88A8, 0])
        assert rss.hash_input(f, 0, proto) == _hash_input_reference(f, 0, proto)


def test_flow_hash_matches_reference_on_frames():
    """Toeplitz.flow_hash: the compiled build reads the input where it lies in the
    frame through a table per input byte, the interpreter hashes hash_input's
    bytes through its cache; both are the reference hash of the reference input."""
    rng = random.Random(11)
    frames = [f for _, f, _ in _traffic(3)]
    frames += [F.tcp_frame(10, ip_options=b"\x01\x01\x01\x00"), F.tcp_frame(10, frag_offset=3),
               F.tcp_frame(10, family=6, ext=[F.ExtHdr(60), F.ExtHdr(0)]), F.icmp_echo_frame(), F.arp_frame()]
    frames += [f[:cut] for f in list(frames) for cut in (33, 37, 38, 57, 58)]
    frames += [rng.randbytes(rng.randrange(0, 90)) for _ in range(300)]
    short = bytes(range(16))        # windows for 12 input bytes: IPv4 only
    checked = {"hashed": 0, "none": 0, "short": 0}
    for key in (Settings().rss_key, bytes(rng.randbytes(52)), short):
        t = rss.Toeplitz(key)
        for f in frames:
            proto = (f[12] << 8) | f[13] if len(f) >= 14 else 0
            tup = _hash_input_reference(f, 14, proto)
            if key is short and len(tup) > 12:
                with pytest.raises(ValueError):
                    t.flow_hash(f, 14, proto)
                checked["short"] += 1
                continue
            assert t.flow_hash(f, 14, proto) == (_toeplitz_reference(key, tup) if tup else 0)
            checked["hashed" if tup else "none"] += 1
    assert min(checked.values()) > 20, checked


def test_toeplitz_hash_matches_reference():
    rng = random.Random(4)
    key = Settings().rss_key
    t = rss.Toeplitz(key)
    for _ in range(300):
        data = rng.randbytes(rng.choice([8, 12, 32, 36]))
        expected = _toeplitz_reference(key, data)
        assert t.hash(data) == expected
        assert t.cache.get(data) == expected        # second lookup: from the cache
    # a short key (16 bytes): tables where every key window exists, the bit loop
    # (and its error) where one does not
    short = bytes(range(16))
    t = rss.Toeplitz(short)
    for _ in range(150):
        data = rng.randbytes(12)
        assert t.hash(data) == _toeplitz_reference(short, data)
    with pytest.raises(ValueError):
        _toeplitz_reference(short, b"\xff" * 36)
    with pytest.raises(ValueError):
        t.hash(b"\xff" * 36)
    # the Microsoft RSS verification suite's first IPv4 vector (66.9.149.187:2794 -> 161.142.100.80:1766)
    vec = bytes([66, 9, 149, 187, 161, 142, 100, 80]) + struct.pack("!HH", 2794, 1766)
    assert rss.Toeplitz(key).hash(vec) == 0x51CCC178


# ------------------------------------------------------------------------------------------
# PcapWriter: gathered writes, short writes
# ------------------------------------------------------------------------------------------
def _write(path, records, linktype=1):
    with PcapWriter(str(path), linktype) as w:
        for ts, data in records:
            w.write(ts, data)


def test_pcap_writer_gathered_and_short_writes(tmp_path, monkeypatch):
    rng = random.Random(8)
    records = [(BASE_TS + i, rng.randbytes(rng.choice([0, 1, 60, 1514, 65000, 200000]))) for i in range(300)]
    records.append((BASE_TS + 999, bytearray(b"mutable")))
    _write(tmp_path / "a.pcap", records)
    expected = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1) + b"".join(
        struct.pack("<IIII", *divmod(ts, 10**9), len(d), len(d)) + bytes(d) for ts, d in records)
    assert (tmp_path / "a.pcap").read_bytes() == expected

    if hasattr(os, "writev"):
        real = os.writev

        def short_writev(fd, bufs):
            # write at most a random prefix, often cutting a buffer in the middle
            bufs = list(bufs)
            total = sum(len(b) for b in bufs)
            limit = max(1, rng.randrange(total + 1)) if total else 0
            out = []
            for b in bufs:
                if limit <= 0:
                    break
                piece = memoryview(b)[:limit]
                out.append(piece)
                limit -= len(piece)
            return real(fd, out)

        monkeypatch.setattr(os, "writev", short_writev)
        _write(tmp_path / "b.pcap", records)
        assert (tmp_path / "b.pcap").read_bytes() == expected

    # a bytearray changed after write() must not change what was written
    buf = bytearray(b"before")
    with PcapWriter(str(tmp_path / "c.pcap")) as w:
        w.write(BASE_TS, buf)
        buf[:] = b"after!"
    _, recs = read_capture(str(tmp_path / "c.pcap"))
    assert recs[0][1] == b"before"
