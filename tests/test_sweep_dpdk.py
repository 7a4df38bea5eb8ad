"""`grotool sweep --stack dpdk`: the DPDK knobs as axes, each combination through
the DPDK model (and, differentially, what the real librte_gro returns)."""

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dpdk_support import dpdk_library  # noqa: F401  (fixture)
from framebuild import tcp_frame
from grotool.dpdk.engine import DpdkSettings, simulate
from grotool.executor import Executor
from grotool.io.capture import PcapWriter
from grotool.oracle import read_input
from grotool.sweep import Axis, combinations, run_sweep

ROOT = Path(__file__).resolve().parent.parent
MSS = 1448


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, timeout=300)


@pytest.fixture
def push_capture(tmp_path):
    """One flow: five in-order ACK segments, a PSH segment (frame 6), two more ACK segments."""
    path = tmp_path / "push.pcap"
    with PcapWriter(str(path), 1) as writer:
        for i in range(8):
            writer.write(1_700_000_000_000_000_000 + 1000 * i,
                         tcp_frame(MSS, seq=1000 + i * MSS, flags="PA" if i == 5 else "A"))
    return path


def test_cli_sweeps_burst_and_mode(push_capture):
    r = run("sweep", "--stack", "dpdk", push_capture, "--set", "burst=4,32", "--set", "dpdk-mode=light,heavy",
            "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["stack"] == "dpdk"
    assert doc["base_settings"] == DpdkSettings().as_json()
    assert doc["axes"] == [{"option": "--burst", "field": "burst", "values": [4, 32]},
                           {"option": "--dpdk-mode", "field": "mode", "values": ["light", "heavy"]}]
    got = [(r["setting"], r["replay_args"], r["packets_out"], r["polls"], r["flush_reasons"],
            r["added_latency_ns"]) for r in doc["results"]]
    # bursts of 4: [0-3] | [4] [6-7] held apart by the PSH segment 5 (returned unprocessed);
    # bursts of 32: [0-4] [6-7] and 5.  Heavy mode flushes after each full burst, and at the end
    # of the capture after a partial one.
    assert got == [
        ({"burst": 4, "mode": "light"}, ["--stack", "dpdk", "--burst", "4"], 4, 2,
         {"dpdk_burst_end": 3, "dpdk_tcp_flags": 1}, None),
        ({"burst": 4, "mode": "heavy"}, ["--stack", "dpdk", "--dpdk-mode", "heavy", "--burst", "4"], 4, 2,
         {"dpdk_timeout_flush": 3, "dpdk_tcp_flags": 1}, None),
        ({"burst": 32, "mode": "light"}, ["--stack", "dpdk"], 3, 1,
         {"dpdk_burst_end": 2, "dpdk_tcp_flags": 1}, None),
        ({"burst": 32, "mode": "heavy"}, ["--stack", "dpdk", "--dpdk-mode", "heavy"], 3, 1,
         {"end_of_capture": 2, "dpdk_tcp_flags": 1}, None),
    ]
    assert doc["results"][0]["segments_per_packet"] == {"mean": 2.0, "p50": 1, "p90": 4, "p99": 4, "max": 4}
    assert doc["results"][2]["segments_per_packet"]["max"] == 5
    assert doc["results"][2]["bytes_per_packet"]["max"] == 14 + 20 + 20 + 5 * MSS


def test_fixed_knobs_and_the_flush_cadence(push_capture):
    r = run("sweep", "--stack", "dpdk", push_capture, "--dpdk-mode", "heavy", "--burst", "2",
            "--set", "dpdk-flush-every=1,4", "--json", "-", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["base_settings"]["mode"] == "heavy" and doc["base_settings"]["burst"] == 2
    # flushed after every burst of 2: [0-1] [2-3] [4], 5, [6-7]; held for 4 bursts: [0-4], 5, [6-7]
    assert [(r["packets_out"], r["segments_per_packet"]["max"]) for r in doc["results"]] == [(5, 2), (3, 5)]
    assert doc["results"][1]["replay_args"] == ["--stack", "dpdk", "--dpdk-mode", "heavy", "--burst", "2",
                                               "--dpdk-flush-every", "4"]


def test_table_says_why_there_is_no_latency(push_capture):
    r = run("sweep", "--stack", "dpdk", push_capture, "--set", "burst=4,32")
    assert r.returncode == 0, r.stderr
    assert "latency: not defined for the DPDK stack (no clock)" in r.stdout
    assert "dpdk_burst_end" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--set", "burst=4,8"], "--burst is a DPDK knob: add --stack dpdk"),
    (["--burst", "8"], "the --dpdk-* knobs and --burst are DPDK's: add --stack dpdk"),
    (["--stack", "dpdk", "--set", "rx-usecs=8,32"], "--rx-usecs is a Linux replay setting"),
    (["--stack", "dpdk", "--device", "veth"], "--device is a Linux replay option"),
    (["--stack", "dpdk", "--set", "dpdk-gro-types=tcp4,udp4"], "cannot be swept"),
    (["--stack", "dpdk", "--burst", "8", "--set", "burst=4,8"], "--burst is also given as a fixed option"),
    (["--stack", "dpdk", "--set", "dpdk-mode=light,fast"], "'fast'"),
])
def test_usage_errors(push_capture, args, message):
    r = run("sweep", push_capture, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr


def test_run_sweep_counts_are_the_models_on_a_real_capture():
    path = str(ROOT / "tests" / "data" / "real-bulk-ipv4.pcap")
    axes = [Axis("--dpdk-mode", "mode", ("light", "heavy")), Axis("--burst", "burst", (8, 64))]
    base = DpdkSettings(flush_every=3)
    doc = run_sweep([path], base, axes, Executor())
    frames, _, _ = read_input(path)
    assert doc["inputs"] == [{"path": path, "packets": len(frames), "truncated": None}]
    for result, (_, settings) in zip(doc["results"], combinations(base, axes)):
        packets = simulate(frames, settings)
        assert result["packets_in"] == len(frames)
        assert result["packets_out"] == len(packets)
        assert result["super_packets"] == sum(len(p.covers) > 1 for p in packets)
        assert result["flush_reasons"] == dict(sorted(Counter(p.reason for p in packets).items(),
                                                      key=lambda kv: (-kv[1], kv[0])))
        assert result["polls"] == -(-len(frames) // settings.burst)
    assert [r["packets_out"] for r in doc["results"]] != [doc["results"][0]["packets_out"]] * 4


def test_a_bad_combination_is_a_value_error():
    with pytest.raises(ValueError, match="--dpdk-flush-every must be at least 1"):
        combinations(DpdkSettings(), [Axis("--dpdk-flush-every", "flush_every", (1, 0))])


def test_sweep_figures_are_the_real_librarys(dpdk_library):
    """The packets a sweep counts for each combination are the ones librte_gro returns."""
    path = str(ROOT / "captures" / "bulk-4flows.pcap")
    axes = [Axis("--dpdk-mode", "mode", ("light", "heavy")), Axis("--burst", "burst", (8, 32, 64)),
            Axis("--dpdk-flush-every", "flush_every", (1, 4))]
    doc = run_sweep([path], DpdkSettings(), axes, Executor())
    frames, _, _ = read_input(path)
    for result, (_, settings) in zip(doc["results"], combinations(DpdkSettings(), axes)):
        library = dpdk_library(frames, settings)
        assert result["packets_out"] == len(library), settings
        assert result["super_packets"] == sum(len(p.covers) > 1 for p in library)
        segs = Counter(len(p.covers) for p in library)
        assert result["segments_per_packet"]["max"] == max(segs)
        assert result["bytes_per_packet"]["max"] == max(len(p.data) for p in library)
