"""File level of the DPDK stack: a capture through the model (``replay --stack
dpdk``) or through the real librte_gro (``grotool dpdk``), the output pcap and
the JSON document (schema ``grotool.dpdk/1``).

Input frames are read as ``grotool kernel`` reads them (grotool.oracle.read_input:
other link types get an Ethernet header, a declared FCS is stripped), so both
stacks and both of DPDK's sides see the same Ethernet frames.  Each output
packet's timestamp is that of the first frame it covers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import List, Optional

from ..errors import InputError
from ..io.capture import LINKTYPE_ETHERNET, PcapWriter
from ..io.jsonout import write_json
from ..oracle import read_input
from ..oracle.frames import flow_json, parse
from .engine import DpdkPacket, DpdkSettings, simulate

SCHEMA = "grotool.dpdk/1"
PROFILE = "dpdk-22.11"
OUTPUT_SNAPLEN = 262144


@dataclass
class DpdkRun:
    packets: List[DpdkPacket]
    stamps: List[int]
    input_info: dict
    settings: DpdkSettings
    source: str                         # "model" or "librte_gro"

    @property
    def frames(self) -> int:
        return len(self.stamps)

    def document(self) -> dict:
        reasons = Counter(p.reason for p in self.packets if p.reason)
        return {
            "schema": SCHEMA,
            "stack": "dpdk",
            "profile": PROFILE,
            "source": self.source,
            "input": self.input_info,
            "settings": self.settings.as_json(),
            "summary": {"frames_in": self.frames, "packets_out": len(self.packets),
                        "merged_packets": sum(1 for p in self.packets if len(p.covers) > 1),
                        "frames_merged": sum(len(p.covers) for p in self.packets if len(p.covers) > 1),
                        "reasons": dict(sorted(reasons.items()))},
            "packets": [self._packet_json(i, p) for i, p in enumerate(self.packets)],
        }

    def _packet_json(self, i: int, p: DpdkPacket) -> dict:
        doc = {"index": i, "ts_ns": self.stamps[p.covers[0]], "len": len(p.data), "covers": list(p.covers),
               "segs": len(p.covers), "flow": flow_json(parse(p.data))}
        if self.source == "model":
            doc.update(reason=p.reason, burst=p.burst, held_apart=p.held_apart)
        return doc


def run_dpdk(input_path: str, output_path: Optional[str], json_path: Optional[str], settings: DpdkSettings, *,
             library: bool = False) -> DpdkRun:
    """A capture through DPDK's GRO: the model, or with ``library`` the real librte_gro."""
    problem = settings.problem()
    if problem:
        raise InputError(problem)
    if output_path == "-" and json_path == "-":
        raise InputError("OUTPUT and --json cannot both be standard output")
    from ..io.safe_output import check_outputs

    check_outputs([output_path, json_path], ["output capture", "--json"], [input_path])
    frames, stamps, info = read_input(input_path)
    if library:
        from .oracle import run_library

        packets = run_library(frames, settings)
    else:
        packets = simulate(frames, settings)
    run = DpdkRun(packets, stamps, info, settings, "librte_gro" if library else "model")
    if output_path:
        with PcapWriter(output_path, LINKTYPE_ETHERNET, OUTPUT_SNAPLEN) as writer:
            for p in packets:
                writer.write(stamps[p.covers[0]], p.data)
    if json_path:
        write_json(run.document(), json_path, indent=1)
    return run
