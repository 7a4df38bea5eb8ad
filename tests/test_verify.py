"""`grotool replay --verify` (grotool/verify.py): the replay output, split
again, reproduces the input; a difference names the first input frame."""

from __future__ import annotations

import glob
import os

import pytest
from click.testing import CliRunner

from framebuild import Flow, tcp_frame
from grotool.cli import main
from grotool.engine import Settings
from grotool.engine.skb import Delivery
from grotool.gso import segment as gso_segment
from grotool.io.capture import PcapWriter, read_capture
from grotool.replay import replay
from grotool.verify import Verifier, compare_frames

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CAPTURES = sorted(glob.glob(os.path.join(ROOT, "captures", "*.pcap")) +
                  glob.glob(os.path.join(ROOT, "tests", "data", "*.pcap")))


def test_there_are_captures_to_verify():
    names = {os.path.basename(p) for p in CAPTURES}
    assert {"bulk-4flows.pcap", "mixed.pcap", "selftest-ipv4.pcap", "selftest-ipv6.pcap",
            "real-bulk-ipv4.pcap", "real-bulk-ipv6.pcap"} <= names


SETTINGS = {
    "default": Settings(),
    "veth": Settings(device="veth"),
    "big-full": Settings(device="veth", gro_max_size=300000, gro_ipv4_max_size=300000, l4_csum="full",
                         max_skb_frags=45, budget=300, gro_normal_batch=64),
    "small": Settings(budget=3, rx_queues=4, gro_max_size=9000, gro_ipv4_max_size=9000, csum="verify"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
@pytest.mark.parametrize("path", CAPTURES, ids=os.path.basename)
def test_every_capture_verifies(path, name):
    result = replay(path, None, SETTINGS[name], verify=True)
    v = result.verify
    assert v.ok, v.message
    assert v.frames == result.frames == result.document["totals"]["packets_in"]
    assert v.packets == result.document["totals"]["packets_out"]
    assert v.super_packets == result.document["totals"]["super_packets"]
    assert result.document["verify"] == {"ok": True, "frames": v.frames, "packets": v.packets,
                                          "super_packets": v.super_packets, "first_bad_frame": None, "message": ""}


def _delivery(data, indices, gso_size=0, gso_type=()):
    return Delivery(0, data, len(indices), "test", tuple(indices), b"", gso_size, tuple(gso_type))


def _flow_frames(n=4, size=1000, **kw):
    flow = Flow(**kw)
    return [flow.seg(size) for _ in range(n)]


def _super_of(frames):
    from grotool.engine import simulate
    (d,) = list(simulate([(i, f, -1) for i, f in enumerate(frames)], 1, Settings(device="veth")))
    assert d.segs == len(frames)
    return d


def test_verifier_accepts_a_correct_super_packet():
    frames = _flow_frames()
    v = Verifier(1)
    for f in frames:
        v.add_input(f)
    v.check(_super_of(frames))
    r = v.finish()
    assert (r.ok, r.frames, r.packets, r.super_packets) == (True, 4, 1, 1)


def test_verifier_names_the_frame_whose_payload_differs():
    frames = _flow_frames()
    d = _super_of(frames)
    corrupt = bytearray(d.data)
    corrupt[-1500] ^= 0xFF                                  # a byte of the third segment's payload
    v = Verifier(1)
    for f in frames:
        v.add_input(f)
    v.check(_delivery(bytes(corrupt), d.indices, d.gso_size, d.gso_type))
    r = v.finish()
    assert not r.ok and r.first_bad_frame == 3
    assert r.message.startswith("input frame 3: payload differs")


def test_verifier_reports_wrong_segment_count_and_uncovered_frames():
    frames = _flow_frames()
    d = _super_of(frames)
    v = Verifier(1)
    for f in frames:
        v.add_input(f)
    v.check(_delivery(d.data, d.indices[:3], d.gso_size, d.gso_type))    # claims 3 frames
    r = v.finish()
    assert r.first_bad_frame == 1
    assert "splits into 4 segments, but covers 3 input frames" in r.message

    v = Verifier(1)
    for f in frames:
        v.add_input(f)
    v.check(_delivery(frames[0], (0,)))
    r = v.finish()
    assert r.first_bad_frame == 2 and r.message == "input frame 2: not covered by any delivered packet"


def test_verifier_keeps_the_earliest_difference():
    frames = _flow_frames(n=3)
    v = Verifier(1)
    for f in frames:
        v.add_input(f)
    v.check(_delivery(frames[2][:-1], (2,)))
    v.check(_delivery(frames[0], (0,)))
    v.check(_delivery(frames[1], (0,)))                 # frame 1 covered twice
    r = v.finish()
    assert r.first_bad_frame == 1
    assert "more than one delivered packet" in r.message


def test_compare_ignores_only_the_rewritten_fields():
    a = tcp_frame(100, seq=5, ip_id=3)
    seeded = tcp_frame(100, seq=5, ip_id=3, tcp_csum="seed")
    assert compare_frames(a, seeded, 1) is None              # TCP checksum: rewritten by GRO/GSO
    other_id = tcp_frame(100, seq=5, ip_id=4)
    assert compare_frames(a, other_id, 1).startswith("ipv4.id differs (byte 19: 0x03 in the input, 0x04 after split)")
    assert compare_frames(a, other_id, 1, loose_ids=[14]) is None
    assert compare_frames(a, tcp_frame(100, seq=6, ip_id=3), 1).startswith("tcp.seq differs")
    assert compare_frames(a, tcp_frame(100, seq=5, ip_id=3, flags="PA"), 1).startswith("tcp.flags differs")
    assert compare_frames(a, a + b"\x00", 1) == f"length {len(a) + 1} after split, {len(a)} in the input"


def _write(path, frames):
    with PcapWriter(str(path), 1) as w:
        for i, f in enumerate(frames):
            w.write(1_000_000_000 + i * 1000, f)


def test_cli_verify_ok_and_failure_exit_codes(tmp_path, monkeypatch):
    src = tmp_path / "in.pcap"
    _write(src, _flow_frames(n=6, size=1448) + [tcp_frame(10, sport=9, flags="PA")])
    runner = CliRunner()
    r = runner.invoke(main, ["replay", "-q", "--verify", str(src)])
    assert r.exit_code == 0, r.output
    assert "verify: ok, 7 input frames reproduced by splitting 2 delivered packets (1 super-packets)" in r.output

    # a GSO that gets the sequence numbers wrong after the first segment must be caught
    from grotool.gso import RULES

    def wrong_seq(buf, layer, ctx):
        original_tcp(buf, layer, ctx)
        if ctx.index == 4:
            buf[layer.off + 7] ^= 1
    original_tcp = RULES["tcp"]
    monkeypatch.setitem(RULES, "tcp", wrong_seq)
    r = runner.invoke(main, ["replay", "-q", "--verify", str(src)])
    assert r.exit_code == 1
    assert "verify: FAILED: input frame 5: tcp.seq differs (byte 41" in r.output


def test_split_of_replay_output_equals_input_for_bundled_bulk_capture(tmp_path):
    # the CLI path end to end: replay --packets, then split with that sidecar
    src = os.path.join(ROOT, "captures", "bulk-4flows.pcap")
    out, packets = tmp_path / "gro.pcap", tmp_path / "gro.jsonl"
    runner = CliRunner()
    assert runner.invoke(main, ["replay", "-q", src, str(out), "--packets", str(packets)]).exit_code == 0
    assert runner.invoke(main, ["split", "-q", str(out), str(tmp_path / "s.pcap")]).exit_code == 0
    import json
    covers = [i for line in packets.read_text().splitlines() for i in json.loads(line)["covers"]]
    _, original = read_capture(src)
    _, resplit = read_capture(str(tmp_path / "s.pcap"))
    assert len(resplit) == len(original) == 400
    for k, rec in zip(covers, resplit):
        assert compare_frames(original[k][1], rec[1], 1) is None


def test_gso_segment_of_a_lone_frame_is_the_frame():
    f = tcp_frame(500)
    assert gso_segment(f, 1, 1448) == [f]
