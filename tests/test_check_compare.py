"""grotool compare catches what a regression check must: header bytes (hop
limit, TTL, PSH, window) and rewritten flush reasons."""

import json
import os
import subprocess
import sys
from pathlib import Path

from grotool.compare import compare_captures
from grotool.io.capture import PcapWriter, read_capture

ROOT = Path(__file__).resolve().parent.parent


def run(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


def replay_to(tmp_path, capture, name):
    pcap, jsonl = tmp_path / f"{name}.pcap", tmp_path / f"{name}.jsonl"
    r = run("replay", "-q", "--device", "veth", ROOT / "captures" / capture, pcap, "--packets", jsonl)
    assert r.returncode == 0, r.stderr
    return pcap, jsonl


def edited_copy(src, dst, edit):
    """dst = src with edit(index, bytearray) applied to every packet; returns how many it changed."""
    linktype, records = read_capture(str(src))
    changed = 0
    with PcapWriter(str(dst), linktype) as writer:
        for k, (ts, data, wirelen) in enumerate(records):
            d = bytearray(data)
            if edit(k, d):
                changed += 1
            writer.write(ts, bytes(d), wirelen)
    return changed


def test_header_changes_in_super_packets_are_differences(tmp_path):
    a, a_json = replay_to(tmp_path, "bulk-4flows.pcap", "a")
    _, records = read_capture(str(a))
    supers = [k for k, (_, d, _) in enumerate(records) if len(d) > 1514]
    assert len(supers) == 63

    def psh_and_window(k, d):
        if k == supers[0]:
            d[47] |= 0x08                    # TCP flags byte (14 + 20 + 13): PSH
            return True
        if k == supers[1]:
            d[48] ^= 0x01                    # window
            return True
        return False

    b = tmp_path / "b.pcap"
    assert edited_copy(a, b, psh_and_window) == 2
    (tmp_path / "b.jsonl").write_text(a_json.read_text())
    result = compare_captures(str(a), str(b), require_order=True, sidecar_a=str(a_json),
                              sidecar_b=str(tmp_path / "b.jsonl"))
    assert not result.identical
    doc = result.to_json()
    assert doc["counts"]["differing_regions"] == 2
    summaries = [f.summary(r) for f in result.flows for r in f.regions]
    assert len(summaries) == 2
    assert any("TCP flags A vs PA" in s for s in summaries)
    assert all("but its headers differ" in s for s in summaries)
    r = run("compare", "-q", a, b)
    assert r.returncode == 1


def test_hop_limit_change_is_a_difference(tmp_path):
    a, _ = replay_to(tmp_path, "selftest-ipv6.pcap", "a")
    b = tmp_path / "b.pcap"

    def hop_limit(k, d):
        if d[12:14] == b"\x86\xdd" and d[20] == 6 and len(d) > 200:
            d[21] -= 1                       # IPv6 hop limit (14 + 7)
            return True
        return False

    changed = edited_copy(a, b, hop_limit)
    assert changed > 10
    r = run("compare", a, b)
    assert r.returncode == 1
    assert "headers differ" in r.stdout


def test_rewritten_reasons_are_a_difference(tmp_path):
    a, a_json = replay_to(tmp_path, "mixed.pcap", "a")
    b = tmp_path / "b.pcap"
    b.write_bytes(a.read_bytes())
    lines = [json.loads(line) for line in a_json.read_text().splitlines()]
    for entry in lines:
        entry["reason"] = "napi_complete" if entry["reason"] != "napi_complete" else "tcp_push"
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    r = run("compare", "-q", a, b)                       # sidecars found next to the captures
    assert r.returncode == 1
    result = compare_captures(str(a), str(b))
    assert "flush reasons compared (both sidecars have them)" in result.notes
    summaries = [f.summary(f.regions[0]) for f in result.flows if f.regions and f.kind == "tcp"]
    assert any("but flushed for" in s for s in summaries)
    # identical captures with the same sidecars are identical
    (tmp_path / "b.jsonl").write_text(a_json.read_text())
    assert run("compare", "-q", a, b).returncode == 0


def test_reasons_not_compared_when_one_side_has_none(tmp_path):
    a, a_json = replay_to(tmp_path, "mixed.pcap", "a")
    b = tmp_path / "b.pcap"
    b.write_bytes(a.read_bytes())
    # a kernel-style sidecar: segments, no reasons
    lines = [json.loads(line) for line in a_json.read_text().splitlines()]
    (tmp_path / "b.json").write_text(json.dumps({"packets": [{"gso_segs": e["segs"]} for e in lines]}))
    result = compare_captures(str(a), str(b), sidecar_b=str(tmp_path / "b.json"))
    assert result.identical
    assert "flush reasons compared (both sidecars have them)" not in result.notes
