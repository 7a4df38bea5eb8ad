"""One capture through two stacks (`grotool compare INPUT --stack dpdk`): Linux's
GRO (the --kernel profile, default 6.18) as A and DPDK's lib/gro model as B,
compared flow by flow (compare.py) with segments counted on both sides.  The
two stacks' reasons are different vocabularies, so they are not compared;
`replay --stack dpdk --json` gives DPDK's."""

from __future__ import annotations

import json
import os
import tempfile

from .compare import CompareResult, compare_captures
from .dpdk.engine import DpdkSettings
from .dpdk.run import PROFILE, run_dpdk
from .engine import Settings
from .engine.kernels import cached_profile
from .replay import replay


def compare_stacks(input_path: str, settings: Settings, dpdk: DpdkSettings,
                   require_order: bool = False) -> CompareResult:
    """Replay ``input_path`` through Linux (A) and through the DPDK model (B)."""
    release = cached_profile(settings.kernel).release
    with tempfile.TemporaryDirectory(prefix="grotool-compare-") as tmp:
        a_pcap, a_segs = os.path.join(tmp, "linux.pcap"), os.path.join(tmp, "linux.jsonl")
        b_pcap, b_segs = os.path.join(tmp, "dpdk.pcap"), os.path.join(tmp, "dpdk.json")
        linux = replay(input_path, a_pcap, settings, packets_path=a_segs)
        if linux.truncation:
            from .errors import InputError

            raise InputError(f"{input_path}: record {linux.truncation['record']} cut short")
        run = run_dpdk(input_path, b_pcap, None, dpdk)
        with open(b_segs, "w") as f:
            json.dump([{"segs": len(p.covers)} for p in run.packets], f)
        with open(a_segs) as f:            # Linux's reasons are not DPDK's: segments only
            lines = [json.loads(line) for line in f if line.strip()]
        with open(a_segs, "w") as f:
            json.dump([{"segs": entry.get("segs", entry.get("gso_segs", 1))} for entry in lines], f)
        result = compare_captures(a_pcap, b_pcap, require_order=require_order, sidecar_a=a_segs, sidecar_b=b_segs)
    result.a.path = f"{input_path} (Linux {release})"
    result.b.path = f"{input_path} --stack dpdk ({PROFILE}, {dpdk.mode} mode, burst {dpdk.burst})"
    result.a.sidecar = "replay --packets"
    result.b.sidecar = "replay --stack dpdk"
    return result
