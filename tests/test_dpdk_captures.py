"""The DPDK stack on the bundled and real captures, against the real librte_gro;
and the two commands, `replay --stack dpdk` and `grotool dpdk`, end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpdk_support import dpdk_library, outcome  # noqa: F401  (fixture)
from grotool.dpdk.engine import DpdkSettings, simulate
from grotool.oracle import read_input

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(ROOT.glob("captures/*.pcap")) + sorted((ROOT / "tests" / "data").glob("real-*.pcap"))
SETTINGS = [DpdkSettings(mode="light", burst=b) for b in (4, 32, 128)] + [
    DpdkSettings(mode="heavy", burst=b, flush_every=f) for b, f in ((8, 1), (32, 1), (32, 4), (64, 16))] + [
    DpdkSettings(mode="light", burst=32, gro_types=("tcp4", "udp4")),
    DpdkSettings(mode="heavy", burst=16, flush_every=3, gro_types=("tcp4", "udp4")),
    DpdkSettings(mode="light", burst=32, gro_types=("tcp4", "udp4", "vxlan_tcp4", "vxlan_udp4")),
    DpdkSettings(mode="heavy", burst=32, flush_every=2, gro_types=("vxlan_tcp4", "tcp4")),
    # held until the end of the capture: every merged frame's mbuf at once
    DpdkSettings(mode="heavy", burst=32, flush_every=1 << 20, max_flows=1024, max_items=1024)]


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, cwd=ROOT,
                          timeout=300, env=env)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_captures_agree_with_librte_gro(path, dpdk_library):
    frames, _, _ = read_input(str(path))
    merged = 0
    for settings in SETTINGS:
        model = simulate(frames, settings)
        assert outcome(model) == outcome(dpdk_library(frames, settings)), settings
        merged += sum(len(p.covers) > 1 for p in model)
    assert merged > 0 or "ipv6" in path.name     # the comparison covers merges, not only pass-through


def test_replay_stack_dpdk_writes_what_grotool_dpdk_writes(tmp_path, dpdk_library):
    src = ROOT / "captures" / "bulk-4flows.pcap"
    knobs = ["--dpdk-mode", "heavy", "--burst", "16", "--dpdk-flush-every", "2"]
    r = run_cli("replay", "--stack", "dpdk", src, tmp_path / "model.pcap", "--json", tmp_path / "model.json", *knobs)
    assert r.returncode == 0, r.stderr
    r = run_cli("dpdk", src, tmp_path / "lib.pcap", "--json", tmp_path / "lib.json", *knobs)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "model.pcap").read_bytes() == (tmp_path / "lib.pcap").read_bytes()
    model, lib = (json.loads((tmp_path / n).read_text()) for n in ("model.json", "lib.json"))
    assert model["schema"] == lib["schema"] == "grotool.dpdk/1"
    assert (model["source"], lib["source"]) == ("model", "librte_gro")
    assert model["summary"]["frames_in"] == 400 and model["summary"]["packets_out"] == lib["summary"]["packets_out"]
    assert [p["covers"] for p in model["packets"]] == [p["covers"] for p in lib["packets"]]
    assert sorted(i for p in lib["packets"] for i in p["covers"]) == list(range(400))
    assert set(model["summary"]["reasons"]) <= {"dpdk_timeout_flush", "end_of_capture", "dpdk_tcp_flags"}
    assert model["settings"] == {"mode": "heavy", "burst": 16, "flush_every": 2, "max_flows": 4,
                                 "max_items": 32, "gro_types": ["tcp4"], "vxlan_ports": [4789]}


def test_grotool_dpdk_without_a_compiler_is_one_line_and_exit_4(tmp_path, dpdk_library):
    from grotool.dpdk.oracle import cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    os.symlink(cache_dir() / "root", cache / "root")          # DPDK present, harness not built
    env = dict(os.environ, GROTOOL_DPDK_CACHE=str(cache), PATH=str(tmp_path / "empty"))
    r = subprocess.run([sys.executable, "-m", "grotool", "dpdk", str(ROOT / "captures" / "mixed.pcap"),
                        str(tmp_path / "o.pcap")], capture_output=True, cwd=ROOT, env=env, timeout=60)
    assert r.returncode == 4
    assert r.stderr.decode().strip().splitlines() == [
        "grotool: error: grotool dpdk needs a C compiler (cc) to build its harness"]
    assert not (tmp_path / "o.pcap").exists()


def test_unmodelled_gro_type_is_refused():
    r = run_cli("replay", "--stack", "dpdk", ROOT / "captures" / "mixed.pcap", "--dpdk-gro-types", "tcp4,tcp6")
    assert r.returncode == 3
    assert r.stderr.decode().splitlines() == [
        "grotool: error: GRO type tcp6 is not modelled (modelled: tcp4, udp4, vxlan_tcp4, vxlan_udp4)"]


def test_compare_stack_dpdk_puts_linux_against_the_dpdk_model(tmp_path):
    src = ROOT / "captures" / "bulk-4flows.pcap"
    r = run_cli("compare", src, "--stack", "dpdk", "--dpdk-mode", "heavy", "--dpdk-flush-every", "4",
                "-q", "--json", tmp_path / "c.json")
    assert r.returncode == 1, r.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["compared"]["segments"] is True
    assert "(Linux 6.18" in doc["inputs"]["a"]["path"]
    assert "--stack dpdk (dpdk-22.11, heavy mode, burst 32)" in doc["inputs"]["b"]["path"]
    assert (doc["counts"]["packets_a"], doc["counts"]["packets_b"]) == (115, 75)
    r = run_cli("compare", src, src, "--stack", "dpdk")
    assert r.returncode == 2 and "one capture" in r.stderr.decode()


def test_explain_stack_dpdk_shows_each_frame_and_each_returned_packet():
    src = ROOT / "captures" / "bulk-4flows.pcap"
    r = run_cli("explain", "--stack", "dpdk", src, "--frame", "1-9")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode().splitlines()
    assert lines[1:4] == ["burst 1", "  frame 1  tcp 10.1.0.2:40001 > 10.0.0.1:5201  held",
                          "  frame 2  tcp 10.1.0.2:40001 > 10.0.0.1:5201  merged"]
    assert "  frame 8  tcp 10.1.0.2:40001 > 10.0.0.1:5201  held: dpdk_tcp_options_differ [DPDK check_seq_option]" \
        in lines
    assert lines[-2:] == [
        "  -> packet 1: frames 1-7 (7 segments, 10202 bytes), dpdk_burst_end [DPDK rte_gro_reassemble_burst]",
        "  -> packet 2: frames 8-15 (8 segments, 11650 bytes), dpdk_burst_end [DPDK rte_gro_reassemble_burst]"]
    r = run_cli("explain", "--stack", "dpdk", src, "--reason", "dpdk_tcp_flags", "--burst", "8")
    shown = [line for line in r.stdout.decode().splitlines() if line.startswith("  frame")]
    assert len(shown) == 7 and all(line.endswith("unprocessed: dpdk_tcp_flags [DPDK gro_tcp4_reassemble]")
                                   for line in shown)
    assert run_cli("explain", "--stack", "dpdk", src, "--flow", "1").returncode == 2


def test_dpdk_document_fields_are_documented(tmp_path):
    r = run_cli("replay", "--stack", "dpdk", ROOT / "captures" / "mixed.pcap", "-q", "--json", tmp_path / "d.json")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "d.json").read_text())
    text = (ROOT / "docs" / "json.md").read_text().split("# The DPDK document")[1].split("\n# ")[0]
    for key in list(doc) + list(doc["input"]) + list(doc["settings"]) + list(doc["summary"]) \
            + list(doc["packets"][0]):
        if key != "schema":
            assert f"`{key}`" in text, key
    assert doc["schema"] == "grotool.dpdk/1" and "`grotool.dpdk/1`" in text
