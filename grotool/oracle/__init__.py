"""The real-kernel oracle: replay a capture through Linux's own GRO (veth in a
private network namespace) and write what it delivered.  Needs root."""

from __future__ import annotations

from typing import Callable, Optional

from ..errors import InputError
from ..io.capture import LINKTYPE_ETHERNET, CaptureReader, PcapWriter
from ..io.jsonout import write_json
from .kernel import CSUM_MODES, KernelRun, parse, replay_frames, to_ethernet
from .netns import check_environment

__all__ = ["run_kernel_replay", "replay_frames", "KernelRun", "CSUM_MODES", "check_environment"]

SCHEMA = "grotool.kernel/1"
MAX_FRAME = 65535 + 14 + 8


def _flow_json(frame: bytes) -> Optional[dict]:
    import ipaddress

    p = parse(frame)
    if p is None:
        return None
    proto, src, dst, sport, dport, vlan = p.flow[:6]
    mk = ipaddress.IPv4Address if len(src) == 4 else ipaddress.IPv6Address
    return {"proto": proto, "src": str(mk(src)), "dst": str(mk(dst)), "sport": sport, "dport": dport,
            "vlan": list(vlan)}


def document(run: KernelRun, input_info: dict) -> dict:
    packets = []
    for i, pkt in enumerate(run.packets):
        p = parse(pkt.data)
        packets.append({
            "index": i, "len": len(pkt.data), "ts_ns": pkt.ts, "gso_type": pkt.gso_type, "gso_size": pkt.gso_size,
            "gso_segs": pkt.segs, "csum": pkt.csum, "covers": pkt.covers, "batch": pkt.batch,
            "flow": _flow_json(pkt.data), "seq": p.seq if p is not None else None,
            "payload": p.payload if p is not None else None, "tcp_flags": p.flags if p is not None and p.proto == 6 else None,
        })
    return {
        "schema": SCHEMA,
        "input": input_info,
        "settings": run.settings,
        "reliable": run.reliable,
        "drops": run.drops,
        "warnings": run.warnings,
        "batches": [vars(b) for b in run.batches],
        "packets": packets,
    }


def run_kernel_replay(input_path: str, output_path: Optional[str], json_path: Optional[str] = None, *,
                      csum: str = "auto", udp_gro: str = "off", batch: int = 64, max_seconds: float = 300,
                      log: Optional[Callable[[str], None]] = None) -> KernelRun:
    """Replay a capture file through the kernel; write the delivered pcap and JSON sidecar."""
    check_environment()
    timestamps, frames = [], []
    with CaptureReader(input_path) as reader:
        linktype = reader.linktype if reader.linktype is not None else 1
        for ts, data, wirelen in reader:
            frame = to_ethernet(linktype, data)
            if len(frame) > MAX_FRAME:
                raise InputError(f"{reader.name}: record {len(frames) + 1} is {len(frame)} bytes, "
                                 f"more than veth's MTU 65535 allows")
            if len(frame) < 14:
                frame = frame + b"\0" * (14 - len(frame))
            frames.append(frame)
            timestamps.append(ts)
        fmt = reader.format
    run = replay_frames(frames, timestamps, csum=csum, udp_gro=udp_gro, batch=batch,
                        max_seconds=max_seconds, log=log)
    if output_path:
        with PcapWriter(output_path, LINKTYPE_ETHERNET, 262144) as w:
            for pkt in run.packets:
                w.write(pkt.ts, pkt.data)
    if json_path:
        info = {"path": input_path, "format": fmt, "linktype": linktype, "packets": len(frames)}
        write_json(document(run, info), json_path, indent=1)
    return run
