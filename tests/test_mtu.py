"""The link MTU a capture implies (issue 32 §2): the MTU warning of replay and
the super-packets of split without a sidecar count a frame's innermost packet
(tunnel headers off) against the largest common packet length, not 1500."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tunnel_frames as T
from grotool.io.capture import PcapWriter, read_capture
from grotool.report.mtu import MAX_LINK_MTU, MtuCensus

ROOT = Path(__file__).resolve().parent.parent


def write(path, frames):
    with PcapWriter(str(path)) as w:
        for i, f in enumerate(frames):
            w.write(1_000_000_000 + i * 1000, f)
    return path


def grotool(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_vxlan_on_a_jumbo_underlay_is_not_a_host_capture(tmp_path):
    """1,564-byte frames: a 1,500-byte inner packet in VXLAN.  replay warned and
    `grotool split` cut each into 1,398 + 50-byte pieces."""
    frames = T.vxlan_tcp_flow(8, mss=1460)
    assert {len(f) for f in frames} == {1564}
    cap = write(tmp_path / "vxlan.pcap", frames)
    r = grotool("replay", "-q", "--device", "veth", "--vxlan-port", "4789", cap, "--json", "-")
    assert r.returncode == 0 and "MTU" not in r.stderr, r.stderr
    doc = json.loads(r.stdout)["input"]
    assert (doc["mtu"], doc["frames_over_mtu"], doc["mtu_from"]) == (1500, 0, "capture")
    out = tmp_path / "split.pcap"
    r = grotool("split", cap, out, "--json", "-")
    assert r.returncode == 0, r.stderr
    counts = json.loads(r.stdout)
    assert (counts["super_packets"], counts["passed_unchanged"], counts["frames_out"]) == (0, 8, 8)
    assert (counts["mtu"], counts["mtu_from"]) == (1500, "capture")
    assert [d for _, d, _ in read_capture(str(out))[1]] == frames
    # without --vxlan-port too: the MTU measure always counts off VXLAN on 4789 and 8472, GENEVE on 6081
    r = grotool("replay", "-q", cap, "--json", "-")
    assert json.loads(r.stdout)["input"]["frames_over_mtu"] == 0


def test_vxlan_on_port_8472_is_measured_by_its_inner_packet(tmp_path):
    frames = T.vxlan_tcp_flow(3, mss=1460, dport=8472) + T.vxlan_tcp_flow(1, mss=1500, dport=8472)
    cap = write(tmp_path / "flannel.pcap", frames)
    r = grotool("replay", "-q", cap, "--json", "-")
    doc = json.loads(r.stdout)["input"]
    # three 1500-byte inner packets (within the floor) and one of 1540: alone, it is over the MTU
    assert (doc["mtu"], doc["frames_over_mtu"]) == (1500, 1)
    assert "1 frames longer than the link MTU this capture implies 1500 (first: record 4, 1604 bytes)" in r.stderr


def test_bundled_mixed_capture_does_not_warn_about_itself():
    """Its IPv6 segments are 1,520-byte packets, 80 of them: the MTU of that capture's link."""
    r = grotool("replay", "-q", "captures/mixed.pcap", "--json", "-")
    assert "MTU" not in r.stderr
    doc = json.loads(r.stdout)["input"]
    assert (doc["mtu"], doc["frames_over_mtu"], doc["mtu_from"]) == (1520, 0, "capture")
    r = grotool("replay", "-q", "--mtu", "1500", "captures/mixed.pcap", "--json", "-")
    doc = json.loads(r.stdout)["input"]
    assert (doc["mtu"], doc["frames_over_mtu"], doc["mtu_from"]) == (1500, 80, "option")


def test_a_jumbo_link_and_split_mtu(tmp_path):
    flow = T.tcp_flow(6, src="10.0.0.1", dst="10.0.0.2", sport=1, dport=2, mss=8960)
    cap = write(tmp_path / "jumbo.pcap", flow)
    r = grotool("replay", "-q", cap, "--json", "-")
    assert "MTU" not in r.stderr and json.loads(r.stdout)["input"]["mtu"] == 9000
    r = grotool("split", cap, tmp_path / "same.pcap", "--json", "-")
    assert json.loads(r.stdout)["super_packets"] == 0
    # --mtu: the link is 1500 bytes; each 8960-byte segment is cut in the payload that fills it
    r = grotool("split", cap, tmp_path / "cut.pcap", "--mtu", "1500", "--json", "-")
    counts = json.loads(r.stdout)
    assert (counts["super_packets"], counts["frames_out"], counts["mtu"], counts["mtu_from"]) == \
        (6, 42, 1500, "option")
    sizes = [len(d) for _, d, _ in read_capture(str(tmp_path / "cut.pcap"))[1]]
    assert sizes[:7] == [1514] * 6 + [14 + 40 + 8960 - 6 * 1460]


def census(lengths):
    c = MtuCensus(1500)
    for record, length in enumerate(lengths, 1):
        c.lengths.setdefault(length, [0, record, length + 14])[0] += 1
    return c


@pytest.mark.parametrize("lengths, implied", [
    ([], 1500),
    ([9000] * 5, 9000),                              # a jumbo link
    ([9000] * 5 + [8000, 4000], 9000),               # with shorter last segments
    ([9000] * 5 + [65000] * 3, 9000),                # and a few super-packets: they stay over
    ([9000] * 2 + [65000] * 3, 1500),                # more super-packets than full frames: no link MTU
    ([9000], 1500),                                  # one frame is not common
    ([2948, 4396, 5844, 65226, 65226], 1500),        # GRO sizes spread, the common one over MAX_LINK_MTU
    ([MAX_LINK_MTU + 1] * 4, 1500),
    ([MAX_LINK_MTU] * 4, MAX_LINK_MTU),
    ([1520] * 80 + [1600, 1700], 1520),
])
def test_implied_mtu_rule(lengths, implied):
    c = census(lengths)
    assert c.implied == implied
    over, first = c.over()
    assert over == sum(1 for n in lengths if n > implied)
    if over:
        record = min(k for k, n in enumerate(lengths, 1) if n > implied)
        assert first == (record, lengths[record - 1] + 14)


def test_an_explicit_mtu_is_the_mtu():
    c = MtuCensus(1500, fixed=True)
    c.lengths = census([9000] * 5).lengths
    assert c.implied == 1500 and c.over() == (5, (1, 9014))
