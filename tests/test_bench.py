"""bench/ works: its generated inputs are what they say, and bench.py --quick
runs every measurement.  Performance itself is never asserted here."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def _load_callgrind():
    import callgrind
    return callgrind


def test_callgrind_total_reads_the_instruction_column(tmp_path):
    callgrind = _load_callgrind()
    both = tmp_path / "both.out"
    both.write_text("version: 1\ncmd: python\nevents: Ir\nsummary: 5000\nfl=(1) x.c\nfn=(1) f\n3 17\n"
                    "totals: 5001\n")
    assert callgrind.callgrind_total(str(both)) == 5001
    # more events than Ir (e.g. --cache-sim=yes): the Ir column; summary: only (older callgrind)
    older = tmp_path / "older.out"
    older.write_text("events: Dr Ir Dw\nsummary: 10 700 30\n")
    assert callgrind.callgrind_total(str(older)) == 700
    empty = tmp_path / "empty.out"
    empty.write_text("events: Ir\n")
    with pytest.raises(ValueError):
        callgrind.callgrind_total(str(empty))


def test_valgrind_command_starts_the_interpreter_itself(tmp_path, monkeypatch):
    callgrind = _load_callgrind()
    # a pyenv-like shim: bash that execs this interpreter; asked as SHIM -m, it is replaced by it
    shim = tmp_path / "python3"
    shim.write_text(f"#!/bin/bash\nexec {sys.executable} \"$@\"\n")
    shim.chmod(0o755)
    # a console script: its #! interpreter runs it
    script = tmp_path / "grotool"
    script.write_text(f"#!{sys.executable}\nimport grotool.cli\n")
    script.chmod(0o755)
    # some other shell wrapper: refused (callgrind would count bash)
    wrapper = tmp_path / "run-grotool.sh"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m grotool \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert callgrind.valgrind_command(["python3", "-m", "grotool"], str(tmp_path)) == (
        [sys.executable, "-m", "grotool"], {})
    assert callgrind.valgrind_command(["env", "GROTOOL_PURE=1", "A=b=c", str(shim), "-m", "grotool"],
                                      str(tmp_path)) == ([sys.executable, "-m", "grotool"],
                                                         {"GROTOOL_PURE": "1", "A": "b=c"})
    assert callgrind.valgrind_command([sys.executable, "-m", "grotool"], "/") == ([sys.executable, "-m", "grotool"], {})
    assert callgrind.valgrind_command(["grotool", "replay"], "/") == ([sys.executable, str(script), "replay"], {})
    assert callgrind.valgrind_command(["./grotool"], str(tmp_path)) == (
        [sys.executable, os.path.join(str(tmp_path), "./grotool")], {})
    with pytest.raises(callgrind.CannotCount, match="is a shell script"):
        callgrind.valgrind_command(["run-grotool.sh"], str(tmp_path))
    with pytest.raises(callgrind.CannotCount, match="is a shell script"):
        callgrind.valgrind_command(["python3", "-c", "pass"], str(tmp_path))
    with pytest.raises(callgrind.CannotCount, match="not found"):
        callgrind.valgrind_command(["no-such-grotool"], str(tmp_path))
    with pytest.raises(callgrind.CannotCount, match="env option"):
        callgrind.valgrind_command(["env", "-i", "python3"], str(tmp_path))


def _bench_with_instructions(tmp_path, path_dirs, packets):
    out = tmp_path / "bench.json"
    env = {**os.environ, "PATH": os.pathsep.join(map(str, path_dirs))}
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "bench.py"), "--sizes", "300", "--inputs", "bulk",
                        "--repeat", "1", "--no-tshark", "--no-scapy", "--instructions",
                        "--instructions-packets", str(packets), "--json", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=900, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines(), json.loads(out.read_text())


def test_instructions_are_skipped_with_one_line_without_valgrind(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    lines, doc = _bench_with_instructions(tmp_path, [empty], 200)
    skipped = [line for line in lines if "valgrind" in line]
    assert skipped == ["instructions: skipped: valgrind not found: no instruction counts "
                       "(install valgrind for --instructions)"]
    assert "instructions" not in doc and doc["instructions_skipped"] in skipped[0]
    # the timings are all there, without an instructions column
    assert [row["what"] for row in doc["results"][0]["rows"]] == [
        "grotool statistics only", "grotool statistics only, --csum auto", "grotool end to end", "I/O floor"]
    assert not any("instructions_per_packet" in row for row in doc["results"][0]["rows"])


def test_instructions_per_packet_from_a_one_packet_and_a_200_packet_run(tmp_path):
    """Six callgrind runs (three measurements, 1 and 200 packets): about a minute."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        if os.environ.get("GROTOOL_REQUIRE_KERNEL") == "1":
            pytest.fail("valgrind is not installed (.ci/run installs it)")
        pytest.skip("valgrind not installed (.ci/run installs it)")
    # valgrind through a wrapper that logs each run: its input and the total callgrind wrote
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "runs.log"
    (bindir / "valgrind").write_text(
        "#!/bin/bash\n"
        f"{valgrind} \"$@\"; status=$?\n"
        "out=${2#--callgrind-out-file=}\n"
        "args=\"$*\"\n"
        f"echo \"${{args##*replay }} | $(grep '^totals:' \"$out\")\" >> {log}\n"
        "exit $status\n")
    (bindir / "valgrind").chmod(0o755)
    lines, doc = _bench_with_instructions(tmp_path, [bindir, *os.environ["PATH"].split(os.pathsep)], 200)
    runs = log.read_text().splitlines()
    assert len(runs) == 6, runs
    rows = doc["instructions"]
    assert [(row["input"], row["what"], row["packets"]) for row in rows] == [
        ("bulk", "grotool statistics only", 200), ("bulk", "grotool statistics only, --csum auto", 200),
        ("bulk", "grotool end to end", 200)]
    for k, (row, options) in enumerate(zip(rows, ["-q --csum trust", "-q --csum auto", "-q --csum trust"])):
        one, many = runs[2 * k].split(" | "), runs[2 * k + 1].split(" | ")
        # exactly the two runs of this command: the one-packet input, then the 200-packet one
        assert one[0].startswith(f"{options} ") and one[0].split()[3].endswith("bulk-1.pcap"), one
        assert many[0].startswith(f"{options} ") and many[0].split()[3].endswith("bulk-200.pcap"), many
        assert (len(one[0].split()) == 5) == (row["what"] == "grotool end to end")
        assert one[1] == f"totals: {row['startup_instructions']}"
        assert many[1] == f"totals: {row['instructions']}"
        per_packet = row["instructions_per_packet"]
        assert isinstance(per_packet, int) and per_packet > 0
        assert per_packet == round((row["instructions"] - row["startup_instructions"]) / 199)
        assert row["startup_instructions"] > 10_000_000          # an interpreter's start-up, not a shell's
    # beside the timings: the table's column and the JSON rows of the same measurement
    timed = {row["what"]: row for row in doc["results"][0]["rows"]}
    for row in rows:
        assert timed[row["what"]]["instructions_per_packet"] == row["instructions_per_packet"]
        assert any(line.startswith(f"| bulk | 300 | {row['what']} |")
                   and line.endswith(f" {row['instructions_per_packet']:,} |") for line in lines)
        assert (f"| bulk | {row['what']} | {row['startup_instructions'] / 1e9:.3f} G | "
                f"{row['instructions_per_packet']:,} |") in lines
    assert any(line.startswith("| bulk | 300 | I/O floor |") and line.endswith(" - |") for line in lines)
