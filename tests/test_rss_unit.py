"""RSS buckets without the kernel: the hash grotool kernel --rss gives a frame is
the nic device's hash, and replay --device veth --rss buckets by it.

The kernel side of the same cases is tests/test_rss_kernel.py.
"""

from __future__ import annotations

import struct

from click.testing import CliRunner

import kernel_support as ks
from grotool import scenarios as S
from grotool.cli import main
from grotool.engine import Settings, simulate
from grotool.engine.config import DEFAULT_RSS_KEY
from grotool.engine.link import LinkLayer
from grotool.engine.napi import NicDevice, VethDevice
from grotool.engine.skb import Stats
from grotool.oracle import bpf
from grotool.oracle.frames import parse


from test_engine_rules import toeplitz  # noqa: E402  (bit by bit, independent of rss.py)


def ports(frame: bytes, l4: int) -> bytes:
    return frame[l4:l4 + 4]


OTHER_KEY = bytes(range(1, 41))


def sample_frames():
    """(frame, the hash input the documented rule gives)"""
    v4 = ks.tcp(100, sport=40001)
    v6 = ks.tcp(100, sport=40002, family=6)
    u4 = ks.udp(50, sport=5000)
    vlan = ks.tcp(10, sport=40003, vlan=7)
    frag = ks.ether(ks.ip_wrap(v4[34:], 6, df=False)[:6] + b"\x20\x00" + ks.ip_wrap(v4[34:], 6, df=False)[8:])
    icmp = ks.ether(ks.ip_wrap(b"\x08\x00\x00\x00\x00\x01\x00\x01", 1))
    return [
        (v4, ks.V4_SRC + ks.V4_DST + ports(v4, 34)),
        (v6, ks.V6_SRC + ks.V6_DST + ports(v6, 54)),
        (u4, ks.V4_SRC + ks.V4_DST + ports(u4, 34)),
        (vlan, ks.V4_SRC + ks.V4_DST + ports(vlan, 38)),
        (frag, ks.V4_SRC + ks.V4_DST),                 # a fragment (MF): the address pair only
        (icmp, ks.V4_SRC + ks.V4_DST),                 # other IP: the address pair
        (ks.arp_frame(), b""),                         # not IP: hash 0
    ]


def test_the_ebpf_program_is_four_instructions():
    # r2 = *(u32 *)(r1 + 8) (__sk_buff.mark); call 48 (bpf_set_hash); r0 = 0 (TC_ACT_OK); exit
    assert bpf.PROGRAM == bytes.fromhex("6112080000000000" "8500000030000000" "b700000000000000"
                                        "9500000000000000")


def test_mark_control_message_carries_the_hash():
    assert bpf.mark_cmsg(0x9ABCDEF0) == [(1, 36, struct.pack("=I", 0x9ABCDEF0))]   # SOL_SOCKET, SO_MARK


def test_frame_hash_is_the_documented_toeplitz_input():
    for key in (DEFAULT_RSS_KEY, OTHER_KEY):
        hasher = bpf.FrameHasher(key)
        for frame, tup in sample_frames():
            assert hasher(frame) == (toeplitz(key, tup) if tup else 0), parse(frame)
    assert bpf.FrameHasher(DEFAULT_RSS_KEY)(b"\x00" * 10) == 0


def test_oracle_nic_and_veth_rss_give_the_same_hash():
    """One computation (rss.Toeplitz.flow_hash) for the oracle, the nic and veth --rss."""
    for key in (DEFAULT_RSS_KEY, OTHER_KEY):
        hasher = bpf.FrameHasher(key)
        link = LinkLayer(1)
        nic = NicDevice(Settings(rss_key=key), Stats(), lambda batch: None)
        veth = VethDevice(Settings(device="veth", veth_rss=True, rss_key=key), Stats(), lambda batch: None)
        plain = VethDevice(Settings(device="veth"), Stats(), lambda batch: None)
        for i, (frame, _tup) in enumerate(sample_frames()):
            skbs = [link.make(frame, i, i) for _ in range(3)]
            nic.feed(skbs[0])
            veth.feed(skbs[1])
            plain.feed(skbs[2])
            assert skbs[0].hash == skbs[1].hash == hasher(frame)
            assert skbs[2].hash == 0                   # veth without --rss: no hash, bucket 0


bucket = ks.rss_bucket
sports_in_bucket = ks.sports_in_bucket


def seg(sport: int, k: int, family: int = 4) -> bytes:
    return ks.tcp(ks.MSS, seq=1 + k * ks.MSS, sport=sport, ip_id=k, family=family)


def sim(frames, **kw):
    settings = Settings(device="veth", hz=250, **kw)
    return [(parse(d.data).sport, d.segs, d.indices) for d in simulate([(i, f, len(f)) for i, f in enumerate(frames)],
                                                                        1, settings)]


def test_veth_rss_nine_colliding_flows_evict_spread_ones_do_not():
    colliding = sports_in_bucket(5, 9)
    frames = [seg(s, k) for k in range(4) for s in colliding]
    out = sim(frames, veth_rss=True)
    assert [(segs, idx) for _, segs, idx in out] == [(1, (i,)) for i in range(36)]   # evicted in arrival order
    spread = [sports_in_bucket(b, 2)[1] for b in (6, 1, 4, 0, 3)] + sports_in_bucket(7, 4)
    frames = [seg(s, k) for k in range(4) for s in spread]
    out = sim(frames, veth_rss=True)
    order = sorted(range(9), key=lambda f: (bucket(frames[f]), f))                    # bucket index, then age
    assert out == [(spread[f], 4, tuple(range(f, 36, 9))) for f in order]
    assert [segs for _, segs, _ in sim(frames)] == [1] * 36                            # one bucket: all evicted


def test_replay_cli_rss_flag(tmp_path):
    spread = [sports_in_bucket(b, 1)[0] for b in range(8)] + [sports_in_bucket(3, 2)[1]]
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, [seg(s, k) for k in range(5) for s in spread])
    runner = CliRunner()
    for flag, packets in ((["--rss"], 9), ([], 45)):
        out = tmp_path / "out.pcap"
        result = runner.invoke(main, ["replay", "-q", "--device", "veth", *flag, str(src), str(out)])
        assert result.exit_code == 0, result.output
        assert len(ks.read_pcap(out)[1]) == packets
    # another key puts the flows elsewhere: 9 flows still fit, but the delivery order changes
    out_default, out_other = tmp_path / "d.pcap", tmp_path / "o.pcap"
    runner.invoke(main, ["replay", "-q", "--device", "veth", "--rss", str(src), str(out_default)])
    result = runner.invoke(main, ["replay", "-q", "--device", "veth", "--rss", "--rss-key", OTHER_KEY.hex(),
                                  str(src), str(out_other)])
    assert result.exit_code == 0
    first_sport = [parse(d).sport for _, d in ks.read_pcap(out_other)[1]]
    other = bpf.FrameHasher(OTHER_KEY)
    assert first_sport == sorted(spread, key=lambda s: (other(seg(s, 0)) & 7, spread.index(s)))
    assert first_sport != [parse(d).sport for _, d in ks.read_pcap(out_default)[1]]


def test_kernel_cli_rss_key_needs_rss_and_a_real_key(tmp_path):
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, ks.tcp_flow(2))
    runner = CliRunner()
    result = runner.invoke(main, ["kernel", "--rss-key", OTHER_KEY.hex(), str(src), str(tmp_path / "o.pcap")])
    assert result.exit_code == 2 and "--rss-key needs --rss" in result.output
    result = runner.invoke(main, ["kernel", "--rss", "--rss-key", "0011zz", str(src), str(tmp_path / "o.pcap")])
    assert result.exit_code == 2 and "hex" in result.output
    assert not (tmp_path / "o.pcap").exists()


def test_nic_device_uses_the_same_buckets_as_veth_rss():
    """With moderation that makes every poll take exactly 64 frames (rx-frames 64),
    the nic device delivers what veth --rss does: the same hash, buckets, eviction
    and flush order, which tests/test_rss_kernel.py checks against the kernel."""
    rng_frames = [f for _, (_, f) in zip(range(640), S.bulk_flows(48, 40, interleave="round_robin", seed=5,
                                                                    family="mixed"))]
    recs = [(i * 10, f, len(f)) for i, f in enumerate(rng_frames)]
    veth = [(d.data, d.segs, d.indices) for d in simulate(recs, 1, Settings(device="veth", veth_rss=True))]
    nic = [(d.data, d.segs, d.indices)
           for d in simulate(recs, 1, Settings(device="nic", rx_frames=64, rx_usecs=1_000_000))]
    assert nic == veth
    evictions = [d for d in simulate(recs, 1, Settings(device="veth", veth_rss=True))
                 if d.reason == "bucket_full_evict_oldest"]
    assert len(evictions) > 0 and sum(1 for _, segs, _ in veth if segs > 1) > 0


def test_rss_key_must_cover_the_ipv6_four_tuple(tmp_path):
    """A Toeplitz hash of n input bytes uses key bits up to n * 8 + 31: an IPv6
    4-tuple (36 bytes) needs 40 key bytes.  A shorter key is refused up front
    (it used to end an IPv6 replay with a traceback)."""
    import pytest

    frames = [S.tcp_frame(6, seq=100 + i * 1000, payload=1000, sport=4000 + i % 3) for i in range(6)]
    src = tmp_path / "in6.pcap"
    S.write_pcap(str(src), frames)
    runner = CliRunner()
    short = bytes(range(39)).hex()
    for args in (["replay", "-q", "--rss-key", short], ["kernel", "--rss", "--rss-key", short]):
        result = runner.invoke(main, [*args, str(src), str(tmp_path / "o.pcap")])
        assert result.exit_code == 2, result.output
        assert "at least 40 bytes" in result.output and "39 given" in result.output
        assert not (tmp_path / "o.pcap").exists()
    with pytest.raises(ValueError, match="at least 40 bytes"):
        Settings(rss_key=bytes(39)).validate()
    # a 40-byte key other than the default hashes IPv6 on both devices
    result = runner.invoke(main, ["replay", "-q", "--rss-key", bytes(range(40)).hex(), str(src)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["replay", "-q", "--device", "veth", "--rss", "--rss-key", bytes(range(40)).hex(),
                                  str(src)])
    assert result.exit_code == 0, result.output
