#!/usr/bin/env python3
"""grotool's benchmark: packets/s of grotool against the I/O floor and its
peers, measured in the same run on the same generated captures.

    python bench/bench.py                       # 100k, 300k and 1M packets of each input (minutes)
    python bench/bench.py --quick               # small sizes: does it all work?
    python bench/bench.py --python /opt/py/bin/python3             # grotool under another interpreter
    python bench/bench.py --build interpreted="python3 -m grotool" --build compiled="/venv/bin/grotool"

Inputs (bench/inputs.py): ``bulk`` (64 interleaved bulk TCP flows), ``mix``
(10,000 flows: UDP, pure ACKs, short segments, bulk bursts; IPv4 and IPv6),
``real`` (overlapping copies of the recorded real TCP captures).

Per input and size: grotool statistics only (``replay -q --csum trust IN``),
the same with the default checksum mode (``replay -q --csum auto IN``: the
TCP/UDP checksums summed unless they hold the offload seed) and end to end
(``replay -q --csum trust IN OUT``), for each build; the I/O floor (bench/floor.py:
read the input walking every record header, write grotool's output bytes,
fsync); ``tshark -q -z conv,tcp``; a naive scapy loop (RawPcapReader + Ether()
+ a dict of per-flow aggregates) timed on the first ``--scapy-packets``
packets and reported per packet.  Printed: seconds, packets/s, ratios against
the floor and tshark, peak RSS (and how RSS grows from the smallest size to
the largest).  Timings are wall-clock and noisy on a shared machine: compare
the ratios of one run, not absolute numbers across runs.

``--instructions`` also counts instructions with valgrind's callgrind
(bench/callgrind.py), the measure to compare two versions by: for each build,
input and grotool measurement above, the command on a one-packet input is
start-up, and (its run on ``--instructions-packets`` packets, default 20,000,
minus the one-packet run) / (packets - 1) is instructions per packet; both
printed beside the timings and kept in the JSON.  Minutes per build, so not
part of ``--quick`` (``--quick --instructions`` does both); without valgrind it
is skipped with one line.  Callgrind counts the process it starts, so a build
must start its interpreter directly: a console script runs under its ``#!``
interpreter, a pyenv shim as the interpreter it starts, any other shell-script
wrapper is refused.

A build is a command that runs grotool, run in the repository root (so
``python -m grotool`` is this checkout's code); its ``--version`` output is
printed.  ``--python PY`` (or GROTOOL_BENCH_PYTHON) is the build
``PY -m grotool``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import callgrind  # noqa: E402
import inputs as bench_inputs  # noqa: E402

DEFAULT_SIZES = (100_000, 300_000, 1_000_000)
QUICK_SIZES = (5_000, 20_000)
REPLAY_OPTIONS = ["replay", "-q", "--csum", "trust"]
# the default mode, measured beside trust (statistics only)
AUTO_OPTIONS = ["replay", "-q", "--csum", "auto"]
# --instructions: callgrind of each grotool command on 1 and on this many packets
INSTRUCTION_PACKETS = 20_000


# Runs one command and reports its wall time, peak RSS and exit code.  A fresh
# small process starts the command: Linux carries the address space's high-water
# mark over exec into ru_maxrss, so a command forked straight from this (large)
# benchmark process would report this process's size as its own.
LAUNCHER = """
import os, sys, time
report, cmd = sys.argv[1], sys.argv[2:]
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
with open(report, "w") as f:
    f.write(f"{seconds} {usage.ru_maxrss} {os.waitstatus_to_exitcode(status)}")
"""


def timed(cmd, **kw):
    """(wall seconds, peak RSS in MiB, stdout) of one command; exits on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".timing") as report:
        subprocess.run([sys.executable, "-c", LAUNCHER, report.name, *map(str, cmd)], stdout=out, stderr=err,
                       check=True, **kw)
        seconds, maxrss_kib, code = report.read().split()
        out.seek(0)
        err.seek(0)
        if int(code) != 0:
            raise SystemExit(f"{' '.join(map(str, cmd))} failed with exit code {code}: "
                             f"{err.read().decode(errors='replace').strip()[:400]}")
        return float(seconds), round(int(maxrss_kib) / 1024, 1), out.read().decode(errors="replace")


def scapy_naive(python: str, path: str, limit: int) -> float:
    """Seconds per packet for the obvious scapy implementation (run by this
    benchmark's interpreter: scapy is a peer, not a grotool build)."""
    code = f"""
import time
from scapy.all import RawPcapReader, Ether, IP, TCP
start = time.perf_counter()
agg = {{}}
n = 0
for data, meta in RawPcapReader({path!r}):
    pkt = Ether(data)
    if IP in pkt and TCP in pkt:
        key = (pkt[IP].src, pkt[IP].dst, pkt[TCP].sport, pkt[TCP].dport)
        seq = pkt[TCP].seq
        plen = len(pkt[TCP].payload)
        cur = agg.get(key)
        if cur and cur[0] + cur[1] == seq and cur[2] < 45:
            agg[key] = (cur[0], cur[1] + plen, cur[2] + 1)
        else:
            agg[key] = (seq, plen, 1)
    n += 1
    if n >= {limit}:
        break
print((time.perf_counter() - start) / n)
"""
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


BARE_PYTHON = re.compile(r"python(3(\.\d+)?)?")


def direct_interpreter(word: str, cache: dict) -> str:
    """``word`` itself, or this benchmark's own interpreter when ``word`` is a
    bare ``python``/``python3`` that starts that same interpreter.  Such a name
    may be a wrapper script (a pyenv shim costs 60-70 ms at every start), which
    the floor and tshark do not pay: run the interpreter directly instead."""
    if not BARE_PYTHON.fullmatch(word):
        return word
    if word not in cache:
        try:
            said = subprocess.run([word, "-c", "import sys; print(sys.executable)"], capture_output=True,
                                  text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            said = ""
        same = bool(said) and os.path.realpath(said) == os.path.realpath(sys.executable)
        cache[word] = sys.executable if same else word
    return cache[word]


def parse_builds(args) -> list:
    builds = []
    resolved: dict = {}
    for spec in args.build:
        label, sep, command = spec.partition("=")
        if not sep or not label or not command.strip():
            raise SystemExit(f"--build {spec!r}: expected LABEL=COMMAND")
        builds.append((label, [direct_interpreter(word, resolved) for word in shlex.split(command)]))
    if not builds:
        python = args.python or os.environ.get("GROTOOL_BENCH_PYTHON") or sys.executable
        builds.append(("grotool", [python, "-m", "grotool"]))
    return builds


def measure(label: str, packets: int, cmd, **kw) -> dict:
    secs, rss, _ = timed(cmd, **kw)
    return {"what": label, "seconds": round(secs, 3), "pps": round(packets / secs), "peak_rss_mib": rss}


def median_row(runs: list, packets: int) -> dict:
    """One row from repeated runs of a command: the median time (the middle run,
    or the mean of the two middle ones), the largest peak RSS, every time kept."""
    times = sorted(r["seconds"] for r in runs)
    mid = len(times) // 2
    secs = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
    return {"what": runs[0]["what"], "seconds": round(secs, 3), "pps": round(packets / secs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs), "runs": [r["seconds"] for r in runs]}


def grotool_commands(label: str, cmd, cap: str, out: str) -> list:
    """(what, command, output file or None) of each grotool measurement of a
    build on one input: the timings and the instruction counts run these same commands."""
    return [(f"{label} statistics only", cmd + REPLAY_OPTIONS + [cap], None),
            (f"{label} statistics only, --csum auto", cmd + AUTO_OPTIONS + [cap], None),
            (f"{label} end to end", cmd + REPLAY_OPTIONS + [cap, out], out)]


def run_one(kind: str, packets: int, builds, tmp: str, args) -> dict:
    cap = os.path.join(tmp, f"{kind}-{packets}.pcap")
    start = time.perf_counter()
    bench_inputs.write_input(kind, cap, packets)
    os.sync()          # the new input on disk: its writeback must not run under the timed commands
    entry = {"input": kind, "packets": packets, "capture_bytes": os.path.getsize(cap),
             "generate_s": round(time.perf_counter() - start, 3), "rows": []}
    rows = entry["rows"]
    first_output = os.path.join(tmp, f"out-{builds[0][0]}.pcap")
    # every grotool command and the floor, once per round, in the same order each
    # round: drift of the machine spreads over all of them; the median run counts
    commands = []
    for label, cmd in builds:
        commands.extend(grotool_commands(label, cmd, cap, os.path.join(tmp, f"out-{label}.pcap")))
    commands.append(("I/O floor", [sys.executable, str(ROOT / "bench" / "floor.py"), cap, first_output,
                                   os.path.join(tmp, "floor.pcap")], None))
    runs = {label: [] for label, _, _ in commands}
    for _ in range(args.repeat):
        for label, cmd, out in commands:
            if out is not None and os.path.exists(out):
                os.unlink(out)                     # each end-to-end run writes a new file
            runs[label].append(measure(label, packets, cmd, cwd=ROOT))
    rows.extend(median_row(runs[label], packets) for label, _, _ in commands)
    floor = rows[-1]
    tshark = None
    if not args.no_tshark and shutil.which("tshark"):
        tshark = measure("tshark -q -z conv,tcp", packets, ["tshark", "-q", "-z", "conv,tcp", "-r", cap])
        rows.append(tshark)
    if not args.no_scapy and args.scapy_packets:
        try:
            per = scapy_naive(sys.executable, cap, min(args.scapy_packets, packets))
            rows.append({"what": f"naive scapy loop (first {min(args.scapy_packets, packets)} packets)",
                         "seconds": round(per * packets, 3), "pps": round(1 / per), "peak_rss_mib": None,
                         "extrapolated": True})
        except (subprocess.CalledProcessError, ValueError, SystemExit):
            pass
    for row in rows:
        row["vs_floor"] = round(row["seconds"] / floor["seconds"], 2) if floor["seconds"] else None
        row["vs_tshark"] = round(row["pps"] / tshark["pps"], 2) if tshark else None
    for name in os.listdir(tmp):
        os.unlink(os.path.join(tmp, name))
    return entry


def measure_startup(builds, tmp: str, repeat: int) -> dict:
    """Per build, the median of ``repeat`` statistics-only replays of a
    one-packet capture: what every row of that build pays before its first packet."""
    cap = os.path.join(tmp, "one-packet.pcap")
    bench_inputs.write_input("bulk", cap, 1)
    runs = {label: [] for label, _ in builds}
    for _ in range(repeat):
        for label, cmd in builds:
            runs[label].append(measure(f"{label} start-up", 1, cmd + REPLAY_OPTIONS + [cap], cwd=ROOT))
    os.unlink(cap)
    return {label: median_row(rows, 1) for label, rows in runs.items()}


def valgrind_commands(builds) -> dict:
    """Per build, how valgrind starts it (callgrind.valgrind_command); exits
    with the reason when a build cannot be counted, before anything is measured."""
    commands = {}
    for label, cmd in builds:
        try:
            commands[label] = callgrind.valgrind_command(cmd, str(ROOT))
        except callgrind.CannotCount as e:
            raise SystemExit(f"--instructions: build {label}: {e}")
    return commands


def measure_instructions(builds, commands: dict, kinds, packets: int, tmp: str) -> list:
    """Per input, build and grotool measurement: callgrind's instructions on a
    one-packet input (start-up) and on a ``packets``-packet one of the same kind;
    per packet = (the second - the first) / (packets - 1)."""
    rows = []
    for kind in kinds:
        caps = {}
        for n in (1, packets):
            caps[n] = os.path.join(tmp, f"{kind}-{n}.pcap")
            bench_inputs.write_input(kind, caps[n], n)
        for label, cmd in builds:
            argv_of = {n: grotool_commands(label, cmd, caps[n], os.path.join(tmp, f"out-{label}-{n}.pcap"))
                       for n in caps}
            for k, (what, _, _) in enumerate(argv_of[1]):
                totals = {}
                for n in caps:
                    _, argv, out = argv_of[n][k]
                    if out is not None and os.path.exists(out):
                        os.unlink(out)
                    argv = commands[label][0] + argv[len(cmd):]
                    totals[n] = callgrind.count_instructions(argv, commands[label][1], str(ROOT),
                                                             os.path.join(tmp, "callgrind.out"))
                    if out is not None:
                        os.unlink(out)
                row = {"input": kind, "build": label, "what": what, "packets": packets,
                       "startup_instructions": totals[1], "instructions": totals[packets],
                       "instructions_per_packet": round((totals[packets] - totals[1]) / (packets - 1))}
                rows.append(row)
                print(f"# callgrind {kind} {what}: start-up {totals[1]:,}, "
                      f"{row['instructions_per_packet']:,} per packet", file=sys.stderr)
        for path in caps.values():
            os.unlink(path)
    return rows


def print_table(results: list, instructions: bool = False) -> None:
    extra = (" instructions/packet (callgrind) |", "---:|") if instructions else ("", "")
    print("| input | packets | what | seconds | packets/s | time vs I/O floor | speed vs tshark | peak RSS MiB |"
          + extra[0])
    print("|---|---:|---|---:|---:|---:|---:|---:|" + extra[1])
    for entry in results:
        for row in entry["rows"]:
            rss = "-" if row["peak_rss_mib"] is None else f"{row['peak_rss_mib']:.0f}"
            secs = f"{row['seconds']:.2f}" + (" (extrapolated)" if row.get("extrapolated") else "")
            vs_tshark = "-" if row["vs_tshark"] is None else f"{row['vs_tshark']:.2f}x"
            line = (f"| {entry['input']} | {entry['packets']:,} | {row['what']} | {secs} | {row['pps']:,} | "
                    f"{row['vs_floor']:.2f}x | {vs_tshark} | {rss} |")
            if instructions:
                counted = row.get("instructions_per_packet")
                line += f" {'-' if counted is None else f'{counted:,}'} |"
            print(line)


def print_instructions(instructions: list) -> None:
    packets = instructions[0]["packets"]
    print(f"Instructions (callgrind, PYTHONHASHSEED=0): start-up = a one-packet run; per packet = "
          f"({packets:,}-packet run - one-packet run) / {packets - 1:,}")
    print("| input | what | start-up (instructions) | instructions/packet |")
    print("|---|---|---:|---:|")
    for row in instructions:
        print(f"| {row['input']} | {row['what']} | {row['startup_instructions'] / 1e9:.3f} G | "
              f"{row['instructions_per_packet']:,} |")


def csum_auto_cost(results: list) -> list:
    """Per input, size and build: statistics-only time with --csum auto over --csum trust."""
    lines = []
    for entry in results:
        times = {row["what"]: row["seconds"] for row in entry["rows"]}
        for what, secs in times.items():
            trust = times.get(what.removesuffix(", --csum auto"))
            if what.endswith(", --csum auto") and trust:
                build = what.removesuffix(" statistics only, --csum auto")
                lines.append(f"{entry['input']} {entry['packets']:,}: {build}: "
                             f"--csum auto takes {secs / trust:.2f}x the time of --csum trust")
    return lines


def rss_growth(results: list) -> list:
    """Peak RSS of each grotool row at the largest size over the smallest, per input."""
    lines = []
    for kind in sorted({e["input"] for e in results}):
        entries = sorted((e for e in results if e["input"] == kind), key=lambda e: e["packets"])
        if len(entries) < 2:
            continue
        small, large = entries[0], entries[-1]
        for row in small["rows"]:
            if row["peak_rss_mib"] is None:
                continue
            other = next((r for r in large["rows"] if r["what"] == row["what"]), None)
            if other and other["peak_rss_mib"]:
                lines.append(f"{kind}: {row['what']}: peak RSS {row['peak_rss_mib']:.0f} MiB at "
                             f"{small['packets']:,} packets, {other['peak_rss_mib']:.0f} MiB at "
                             f"{large['packets']:,} ({other['peak_rss_mib'] / row['peak_rss_mib']:.2f}x)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=None, help="Comma-separated packet counts (default 100000,300000,1000000).")
    ap.add_argument("--quick", action="store_true", help=f"Small sizes ({', '.join(map(str, QUICK_SIZES))}) "
                                                         "and a short scapy slice.")
    ap.add_argument("--inputs", default=",".join(bench_inputs.INPUTS),
                    help=f"Comma-separated inputs among {', '.join(bench_inputs.INPUTS)}.")
    ap.add_argument("--python", default=None, help="Run grotool as PYTHON -m grotool (env GROTOOL_BENCH_PYTHON).")
    ap.add_argument("--build", action="append", default=[], metavar="LABEL=COMMAND",
                    help="A grotool build to measure, e.g. compiled='python3 -m grotool'. Repeatable.")
    ap.add_argument("--repeat", type=int, default=3,
                    help="Runs of each grotool command and of the floor, the median counted (default 3; "
                         "tshark and scapy run once).")
    ap.add_argument("--scapy-packets", type=int, default=None, help="Packets the scapy loop is timed on.")
    ap.add_argument("--no-tshark", action="store_true")
    ap.add_argument("--no-scapy", action="store_true")
    ap.add_argument("--json", default=None, help="Also write the results as JSON.")
    ap.add_argument("--instructions", action="store_true",
                    help="Also count instructions with valgrind's callgrind: per build, input and grotool "
                         "measurement, start-up (a one-packet run) and per packet (minutes per build; "
                         "not part of --quick).")
    ap.add_argument("--instructions-packets", type=int, default=INSTRUCTION_PACKETS,
                    help=f"Packets of the larger callgrind run (default {INSTRUCTION_PACKETS}).")
    args = ap.parse_args()
    if args.instructions_packets < 2:
        raise SystemExit("--instructions-packets: at least 2")

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(QUICK_SIZES if args.quick
                                                                              else DEFAULT_SIZES)
    if args.scapy_packets is None:
        args.scapy_packets = 2_000 if args.quick else 20_000
    kinds = [k.strip() for k in args.inputs.split(",")]
    for kind in kinds:
        if kind not in bench_inputs.INPUTS:
            raise SystemExit(f"--inputs: unknown input {kind!r}")
    builds = parse_builds(args)
    instructions = None
    skipped = None
    if args.instructions:
        if shutil.which("valgrind"):
            counted_as = valgrind_commands(builds)
        else:
            skipped = "valgrind not found: no instruction counts (install valgrind for --instructions)"
            print(f"instructions: skipped: {skipped}")
    # an installed package has its bytecode compiled (pip does it); a checkout
    # run with PYTHONDONTWRITEBYTECODE would compile grotool's modules on every start
    compileall.compile_dir(str(ROOT / "grotool"), quiet=1)
    versions = {}
    for label, cmd in builds:
        _, _, out = timed(cmd + ["--version"], cwd=ROOT)
        versions[label] = out.strip()
        print(f"build {label}: {' '.join(cmd)}: {versions[label]}")
    results = []
    tmp = tempfile.mkdtemp(prefix="grotool-bench-")
    try:
        startup = measure_startup(builds, tmp, args.repeat)
        for label, row in startup.items():
            print(f"build {label}: start-up (statistics only of a one-packet capture): {row['seconds']:.3f} s, "
                  f"peak RSS {row['peak_rss_mib']:.0f} MiB")
        for packets in sizes:
            for kind in kinds:
                entry = run_one(kind, packets, builds, tmp, args)
                results.append(entry)
                print(f"# {kind} {packets:,} packets, {entry['capture_bytes'] / 1e6:.0f} MB", file=sys.stderr)
        if args.instructions and not skipped:
            instructions = measure_instructions(builds, counted_as, kinds, args.instructions_packets, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if instructions:
        # beside the timings of the same measurement (every size of that input)
        per_packet = {(row["input"], row["what"]): row["instructions_per_packet"] for row in instructions}
        for entry in results:
            for row in entry["rows"]:
                if (entry["input"], row["what"]) in per_packet:
                    row["instructions_per_packet"] = per_packet[(entry["input"], row["what"])]
    print_table(results, bool(instructions))
    if instructions:
        print_instructions(instructions)
    auto_cost = csum_auto_cost(results)
    for line in auto_cost:
        print(line)
    growth = rss_growth(results)
    for line in growth:
        print(line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"builds": {label: {"command": cmd, "version": versions[label],
                                                                  "startup": startup[label]}
                                                          for label, cmd in builds},
                                               "results": results, "csum_auto_cost": auto_cost,
                                               "rss_growth": growth,
                                               **({"instructions": instructions} if instructions else {}),
                                               **({"instructions_skipped": skipped} if skipped else {})},
                                              indent=2) + "\n")


if __name__ == "__main__":
    main()
