"""bench/ works: its generated inputs are what they say, and bench.py --quick
runs every measurement.  Performance itself is never asserted here."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import inputs as bench_inputs  # noqa: E402
from grotool.io.capture import read_capture  # noqa: E402


def test_generated_inputs_are_deterministic_and_sized(tmp_path):
    for kind in bench_inputs.INPUTS:
        a, b = tmp_path / f"{kind}-a.pcap", tmp_path / f"{kind}-b.pcap"
        bench_inputs.write_input(kind, str(a), 700)
        bench_inputs.write_input(kind, str(b), 700)
        assert a.read_bytes() == b.read_bytes()
        linktype, records = read_capture(str(a))
        assert linktype == 1 and len(records) == 700
        assert all(records[k][0] <= records[k + 1][0] for k in range(699)), kind


def test_mix_has_udp_pure_acks_short_segments_and_ipv6(tmp_path):
    path = tmp_path / "mix.pcap"
    bench_inputs.write_input("mix", str(path), 3000)
    _, records = read_capture(str(path))
    v6 = sum(1 for _, f, _ in records if f[12:14] == b"\x86\xdd")
    udp = sum(1 for _, f, _ in records if (f[23] if f[12:14] == b"\x08\x00" else f[20]) == 17)
    # IPv4: 14 + 20 + 20 header bytes and nothing else is a pure ACK
    pure_acks = sum(1 for _, f, _ in records if f[12:14] == b"\x08\x00" and f[23] == 6 and len(f) == 54)
    short = sum(1 for _, f, _ in records if f[12:14] == b"\x08\x00" and f[23] == 6 and 54 < len(f) < 700)
    assert v6 and udp and pure_acks and short
    # every frame fits a 1500-byte MTU (replay would warn about each one that does not)
    assert max(len(f) for _, f, _ in records) == 14 + 1488


def test_generated_checksums_are_correct(tmp_path):
    """--csum auto (measured beside trust) verifies bulk and mix: every TCP/UDP
    checksum is right, none is a seed, none bad; IPv4 header checksums too."""
    from grotool.engine import Settings
    from grotool.replay import replay

    for kind in ("bulk", "mix"):
        path = tmp_path / f"{kind}.pcap"
        bench_inputs.write_input(kind, str(path), 3000)
        for csum in ("auto", "verify"):
            sums = replay(str(path), None, Settings(csum=csum)).document["totals"]["checksums"]
            assert sums["tcp_verified"] > 1000 and sums["tcp_bad"] == sums["tcp_offloaded"] == 0, (kind, sums)
            assert sums["ip_header_bad"] == 0


def test_quick_benchmark_runs_every_measurement(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench.py"), "--sizes", "400", "--scapy-packets", "50",
                        "--json", str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("build grotool: ") and "grotool, version" in lines[0]
    assert lines[1].startswith("build grotool: start-up (statistics only of a one-packet capture): ")
    doc = json.loads(out.read_text())
    startup = doc["builds"]["grotool"]["startup"]
    assert startup["what"] == "grotool start-up" and len(startup["runs"]) == 3 and startup["seconds"] > 0
    assert [(e["input"], e["packets"]) for e in doc["results"]] == [("bulk", 400), ("mix", 400), ("real", 400)]
    whats = [row["what"] for row in doc["results"][0]["rows"]]
    tshark = ["tshark -q -z conv,tcp"] if shutil.which("tshark") else []
    assert whats == ["grotool statistics only", "grotool statistics only, --csum auto", "grotool end to end",
                     "I/O floor", *tshark, "naive scapy loop (first 50 packets)"]
    for entry in doc["results"]:
        for row in entry["rows"]:
            assert row["seconds"] > 0 and row["pps"] > 0
        # grotool and the floor ran three times each (the default --repeat), the median counted
        for row in entry["rows"][:4]:
            assert len(row["runs"]) == 3 and row["seconds"] == sorted(row["runs"])[1], row
        times = {row["what"]: row["seconds"] for row in entry["rows"]}
        ratio = times["grotool statistics only, --csum auto"] / times["grotool statistics only"]
        assert (f"{entry['input']} 400: grotool: --csum auto takes {ratio:.2f}x the time of --csum trust"
                in doc["csum_auto_cost"])
    assert len(doc["csum_auto_cost"]) == 3 and all(line in lines for line in doc["csum_auto_cost"])


def _load_bench():
    import importlib.util
    spec = importlib.util.spec_from_file_location("grotool_bench", ROOT / "bench" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bare_python_in_a_build_runs_the_same_interpreter_directly(tmp_path, monkeypatch):
    bench = _load_bench()
    # a wrapper script like a pyenv shim: the same interpreter, started through bash
    shim = tmp_path / "python3"
    shim.write_text(f"#!/bin/bash\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    # a wrapper for some other interpreter: kept as given
    other = tmp_path / "python"
    other.write_text("#!/bin/bash\necho /opt/other/bin/python\n")
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")

    class Args:
        build = ["a=python3 -m grotool", "b=env GROTOOL_PURE=1 python3 -m grotool", "c=python -m grotool",
                 "d=/usr/bin/python3 -m grotool", "e=python3x -m grotool"]
    assert bench.parse_builds(Args) == [
        ("a", [sys.executable, "-m", "grotool"]),
        ("b", ["env", "GROTOOL_PURE=1", sys.executable, "-m", "grotool"]),
        ("c", ["python", "-m", "grotool"]),
        ("d", ["/usr/bin/python3", "-m", "grotool"]),
        ("e", ["python3x", "-m", "grotool"]),
    ]
