#!/usr/bin/env python3
"""grotool's benchmark: packets/s end to end, as a ratio against peers measured
in the same run on the same file.

    python bench/bench.py [--packets 300000] [--flows 64] [--json bench/out/result.json]

Peers: `tshark -q -z conv,tcp` (a C dissector reading the same capture) and a
naive scapy loop (RawPcapReader + Ether() dissection + a dict of per-flow
aggregates, the obvious way to write this in Python), the latter on a slice of
the file and reported per packet.  Timings are wall-clock and noisy on a shared
machine: compare the ratios of one run, not absolute numbers across runs.
Peak RSS per command shows that grotool streams: it does not grow with the
capture (run with --packets 100000 and 300000 to see).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grotool.io.capture import PcapWriter  # noqa: E402


def make_capture(path: str, packets: int, flows: int) -> None:
    """64 interleaved bulk flows, bursty as TSO senders are: each turn a flow
    sends a burst of 1..44 full segments back to back."""
    try:
        from grotool.scenarios import bulk_flows
    except ImportError:
        bulk_flows = None
    with PcapWriter(path) as w:
        if bulk_flows is not None:
            for i, (ts, frame) in enumerate(bulk_flows(flows, packets, interleave="bursty", seed=1)):
                if i >= packets:
                    break
                w.write(ts, frame)
            return
        raise SystemExit("grotool.scenarios.bulk_flows is needed to build the benchmark capture")


def timed(cmd, **kw):
    """(wall seconds, peak RSS in MiB) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed with exit code {proc.returncode}")
    return secs, round(usage.ru_maxrss / 1024, 1)


def scapy_naive(path: str, limit: int) -> float:
    """Seconds per packet for the obvious scapy implementation."""
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
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=300_000)
    ap.add_argument("--flows", type=int, default=64)
    ap.add_argument("--scapy-packets", type=int, default=20_000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="grotool-bench-")
    try:
        cap = os.path.join(tmp, "bulk.pcap")
        t0 = time.perf_counter()
        make_capture(cap, args.packets, args.flows)
        gen_s = time.perf_counter() - t0
        out = os.path.join(tmp, "out.pcap")
        grotool = [sys.executable, "-m", "grotool", "replay", "-q"]
        results = {"packets": args.packets, "flows": args.flows, "capture_bytes": os.path.getsize(cap),
                   "generate_s": round(gen_s, 3)}
        for label, extra in (("grotool_nic", []), ("grotool_veth", ["--device", "veth"]),
                             ("grotool_nic_verify", ["--csum", "verify"])):
            secs, rss = timed(grotool + extra + [cap, out], cwd=ROOT)
            results[label] = {"seconds": round(secs, 3), "pps": round(args.packets / secs), "peak_rss_mib": rss}
        if shutil.which("tshark"):
            secs, rss = timed(["tshark", "-q", "-z", "conv,tcp", "-r", cap])
            results["tshark_conv_tcp"] = {"seconds": round(secs, 3), "pps": round(args.packets / secs),
                                          "peak_rss_mib": rss}
        try:
            per = scapy_naive(cap, args.scapy_packets)
            results["scapy_naive"] = {"seconds_per_packet": per, "pps": round(1 / per),
                                      "measured_on": args.scapy_packets}
        except (subprocess.CalledProcessError, ValueError):
            results["scapy_naive"] = None
        base = results["grotool_nic"]["pps"]
        ratios = {}
        if "tshark_conv_tcp" in results:
            ratios["grotool_nic_vs_tshark"] = round(base / results["tshark_conv_tcp"]["pps"], 3)
        if results.get("scapy_naive"):
            ratios["grotool_nic_vs_scapy"] = round(base / results["scapy_naive"]["pps"], 2)
        results["ratios"] = ratios
        text = json.dumps(results, indent=2)
        print(text)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(text + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
