"""Delivery objects: a super-packet's bytes are joined from its rebuilt header
and the merged segments' payloads when first read, and behave exactly like
bytes given at construction."""

from grotool import scenarios as S
from grotool.engine import Settings, simulate
from grotool.engine.skb import Delivery


def _segments(n, payload=1000):
    return [S.tcp_frame(seq=1 + i * payload, payload=payload, ip_id=i) for i in range(n)]


def _replay(frames):
    return list(simulate([(i * 1000, f, len(f)) for i, f in enumerate(frames)], 1, Settings(device="veth")))


def test_a_super_packet_is_the_first_headers_then_every_payload_in_order():
    frames = _segments(4)
    (d,) = _replay(frames)
    assert (d.segs, d.indices, d.merged_lens) == (4, (0, 1, 2, 3), (1000, 1000, 1000))
    header_len = d.header_len
    assert header_len == 14 + 20 + 20        # Ethernet, IPv4, TCP
    assert d.frame_len == header_len + 4000
    data = d.data
    assert len(data) == d.frame_len
    assert data[header_len:] == b"".join(f[header_len:] for f in frames)
    # IPv4 total length rewritten for the whole super-packet, the rest of the first headers kept
    assert int.from_bytes(data[14 + 2:14 + 4], "big") == 20 + 20 + 4000
    assert data[:14 + 2] == frames[0][:14 + 2]
    assert d.data is data                     # joined once, then the same object


def test_a_lazily_joined_delivery_equals_one_made_from_its_bytes():
    (d,) = _replay(_segments(3))
    eager = Delivery(d.ts, d.data, d.segs, d.reason, d.indices, d.key, d.gso_size, d.gso_type, d.payload,
                     d.queue, d.poll, d.layer, d.l2_len, d.header_len, d.first_len, d.merged_lens,
                     d.fraglist, d.interface, d.delivered_ns)
    (lazy,) = _replay(_segments(3))
    assert lazy == eager and eager == lazy
    assert repr(lazy) == repr(eager)
    assert "data=b'" in repr(lazy) and "_head" not in repr(lazy) and "_header" not in repr(lazy)
    other = Delivery(d.ts, d.data[:-1] + b"\x00", d.segs, d.reason, d.indices, d.key, d.gso_size, d.gso_type,
                     d.payload, d.queue, d.poll, d.layer, d.l2_len, d.header_len, d.first_len, d.merged_lens,
                     d.fraglist, d.interface, d.delivered_ns)
    assert lazy != other


def test_replacing_the_bytes_replaces_the_length_too():
    (d,) = _replay(_segments(2))
    d.data = b"\x01\x02\x03"
    assert (d.data, d.frame_len) == (b"\x01\x02\x03", 3)
    single = Delivery(0, b"abcd", 1, "napi_complete", (0,))
    assert single.frame_len == 4 and single.data == b"abcd"


def test_the_delivery_clock_reads_none_without_a_clock_and_keeps_what_is_set():
    # Delivery.delivered_ns is kept as a 64-bit integer (NO_CLOCK: none) behind a property
    (d,) = _replay(_segments(2))                      # veth: no NIC clock
    assert d.delivered_ns is None and "delivered_ns=None" in repr(d)
    d.delivered_ns = 1_700_000_000_123_456_789
    assert d.delivered_ns == 1_700_000_000_123_456_789
    assert "delivered_ns=1700000000123456789" in repr(d)
    d.delivered_ns = None
    assert d.delivered_ns is None
    made = Delivery(0, b"abcd", 1, "napi_complete", (0,), delivered_ns=-5)
    assert made.delivered_ns == -5 and Delivery(0, b"abcd", 1, "napi_complete", (0,)).delivered_ns is None
    assert made != Delivery(0, b"abcd", 1, "napi_complete", (0,))      # the clock is a compared field
