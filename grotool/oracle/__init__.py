"""The real-kernel oracle: replay a capture through Linux's own GRO (a veth
pair in a private network namespace) and write what it delivered.  Needs
root, iproute2 and ethtool.  See shared/spec/kernel-oracle.md and the
docstring of grotool.oracle.kernel for the batch protocol and --csum modes.

Public API::

    run_kernel_replay(input_path, output_path, json_path=None, *, csum="auto", host=HostState(),
                      batch=64, max_seconds=300, log=None, rss_key=None) -> KernelReplayResult
    replay_frames(frames, timestamps=None, *, csum, host, batch, max_seconds, log,
                  require_reliable=True) -> list[DeliveredPacket]
    kernel_replay(frames, ...) -> KernelReplayResult          # same, without raising
    KernelSession(host=HostState.build(...), max_seconds=...) # one namespace, many replays

``host`` (grotool.oracle.hoststate.HostState) is the receiving host's state:
rx-udp-gro-forwarding, rx-gro-list, UDP_GRO sockets, VXLAN/GENEVE ports and
local established TCP flows; ``udp_gro="off|forward|fraglist"`` is the
deprecated older form of the first two.

Link types: Ethernet frames are injected as they are; the others get an
Ethernet header to 02:00:00:00:00:02 (frames.to_ethernet): raw IPv4/IPv6
(101, 228, 229, 12, 14) and BSD loopback (NULL 0, LOOP 108) from
02:00:00:00:00:01 with the ethertype of the IP version or address family (a
record of neither IPv4 nor IPv6 gets ethertype 0, not IP, as in the
simulation's link layer); Linux cooked captures (SLL 113, SLL2 276) from
their recorded 6-byte source address with their protocol field.  The output
pcap is Ethernet.
An FCS the capture declares is stripped (the kernel never sees one).

Output: a nanosecond pcap of the packets the kernel delivered, in delivery
order, control frames removed; each packet's timestamp is that of the first
input frame it covers, so the same input gives a byte-identical pcap.  The
JSON sidecar (schema ``grotool.kernel/1``) carries per packet gso_type,
gso_size, gso_segs, checksum state and the input frames covered; per batch
timing and attempts; the drop counters; and ``reliable``.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from ..errors import EnvironmentProblem, InputError
from ..io.capture import LINKTYPE_ETHERNET, CaptureReader, PcapWriter
from ..io.jsonout import write_json
from . import frames
from .frames import fix_checksums, flow_json, parse, tcp_flag_string, to_ethernet
from .kernel import (BUDGET, CSUM_MODES, DEFAULT_CSUM, BatchInfo, DeliveredList, DeliveredPacket, KernelReplayResult,
                     KernelRun,
                     KernelSession, UnreliableRun, frame_problem, kernel_replay, replay_frames)
from .hoststate import HostState, LocalTcp, parse_local_tcp
from .netns import UDP_GRO_MODES, KernelLacksFeature, check_environment, grotool_namespaces, remove_stale

__all__ = ["run_kernel_replay", "replay_frames", "kernel_replay", "KernelSession", "KernelReplayResult",
           "KernelRun", "DeliveredPacket", "DeliveredList", "BatchInfo", "UnreliableRun", "CSUM_MODES", "DEFAULT_CSUM",
           "UDP_GRO_MODES", "HostState", "LocalTcp", "parse_local_tcp", "KernelLacksFeature", "check_environment",
           "grotool_namespaces", "remove_stale", "document",
           "read_input", "SCHEMA", "parse", "fix_checksums", "to_ethernet", "frames"]

SCHEMA = "grotool.kernel/1"
OUTPUT_SNAPLEN = 262144


def _packet_json(i: int, pkt: DeliveredPacket, vxlan_ports=()) -> dict:
    p = parse(pkt.data, vxlan_ports=vxlan_ports)
    return {
        "index": i, "ts_ns": pkt.ts, "len": len(pkt.data), "gso_type": list(pkt.gso_type),
        "gso_size": pkt.gso_size, "gso_segs": pkt.gso_segs, "csum": pkt.csum, "covers": list(pkt.covers),
        "batch": pkt.batch, "flow": flow_json(p),
        "seq": p.seq if p is not None else None,
        "payload": p.payload if p is not None else None,
        "flags": tcp_flag_string(p.flags) if p is not None and p.proto == frames.IPPROTO_TCP else None,
        "tcp_flags": p.flags if p is not None and p.proto == frames.IPPROTO_TCP else None,
        "vnet": dict(pkt.vnet), "tp_status": pkt.tp_status, "fraglist": pkt.fraglist,
    }


def document(result: KernelReplayResult, input_info: dict) -> dict:
    """The JSON sidecar of a run."""
    frames_in = sum(b.frames for b in result.batches)
    vxlan_ports = tuple(result.settings.get("host", {}).get("vxlan_ports", ()))
    return {
        "schema": SCHEMA,
        "kernel": result.kernel,
        "input": input_info,
        "settings": result.settings,
        "reliable": result.reliable,
        "drops": result.drops,
        "link_counters": result.link_counters,
        "warnings": list(result.warnings),
        "summary": {"frames_in": frames_in, "packets_out": len(result.packets),
                    "super_packets": sum(1 for p in result.packets if p.gso_segs > 1),
                    "fraglist_packets": sum(1 for p in result.packets if p.fraglist),
                    "segments_out": sum(p.gso_segs for p in result.packets),
                    "unmatched_packets": result.unmatched_packets, "uncovered_frames": result.uncovered_frames,
                    "batches": len(result.batches),
                    "replayed_batches": sum(1 for b in result.batches if b.attempts > 1)},
        "batches": [{"index": b.index, "first_frame": b.first_frame, "frames": b.frames, "attempts": b.attempts,
                     "send_us": b.send_us, "ok": b.ok, "packets": b.packets} for b in result.batches],
        "packets": [_packet_json(i, p, vxlan_ports) for i, p in enumerate(result.packets)],
    }


def ethernet_frame(linktype: int, data, where: str) -> bytes:
    """A captured frame as the Ethernet frame an oracle injects; InputError
    naming ``where`` (e.g. "in.pcap: record 3") when it cannot be one."""
    try:
        frame = to_ethernet(linktype, bytes(data))
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    problem = frame_problem(frame)
    if problem:
        raise InputError(f"{where} is {problem}")
    return frame


def read_input(input_path: str):
    """(Ethernet frames, timestamps, input info) of a capture file; InputError when unusable."""
    frames_out, stamps = [], []
    truncated = 0
    with CaptureReader(input_path) as reader:
        linktype = reader.linktype if reader.linktype is not None else LINKTYPE_ETHERNET
        fcs = reader.fcs_len
        first_ts = last_ts = None
        for ts, data, wirelen in reader:
            index = len(frames_out)
            if fcs and len(data) >= fcs and wirelen >= len(data):
                data, wirelen = data[:-fcs], wirelen - fcs
            if len(data) < wirelen:
                truncated += 1               # injected as captured, like grotool replay does
            frames_out.append(ethernet_frame(linktype, data, f"{reader.name}: record {index + 1}"))
            stamps.append(ts)
            first_ts = ts if first_ts is None else first_ts
            last_ts = ts
        info = {"path": input_path, "format": reader.format, "linktype": linktype, "packets": len(frames_out),
                "fcs_stripped": fcs, "truncated_records": truncated, "first_ts_ns": first_ts, "last_ts_ns": last_ts,
                "output_linktype": LINKTYPE_ETHERNET}
    return frames_out, stamps, info


def run_kernel_replay(input_path: str, output_path: Optional[str], json_path: Optional[str] = None, *,
                      csum: str = DEFAULT_CSUM, udp_gro: Optional[str] = None, host: Optional[HostState] = None,
                      batch: int = BUDGET, max_seconds: float = 300,
                      log: Optional[Callable[[str], None]] = None,
                      rss_key: Optional[bytes] = None, vm=None) -> KernelReplayResult:
    """Replay a capture file through the kernel's GRO; write the delivered pcap
    (``output_path``, ``-`` for stdout, None for none) and the JSON sidecar
    (``json_path``, ``-`` for stdout).  ``rss_key``: give each frame the RSS
    hash grotool computes with that key (``grotool kernel --rss``).  ``vm``: a running
    grotool.oracle.vm.VmSession to replay in (``grotool kernel --vm``) instead of this
    host's kernel (no root needed then).  An unreliable run still writes both
    (``reliable`` false); the caller decides the exit code."""
    if csum not in CSUM_MODES:
        raise InputError(f"--csum must be one of {', '.join(CSUM_MODES)}")
    if udp_gro is not None and udp_gro not in UDP_GRO_MODES:
        raise InputError(f"--udp-gro must be one of {', '.join(UDP_GRO_MODES)}")
    if output_path == "-" and json_path == "-":
        raise InputError("OUTPUT and --json cannot both be standard output")
    from ..io.safe_output import check_outputs

    if vm is None:
        check_environment()             # no root, no tool: nothing else matters (exit 4)
    check_outputs([output_path, json_path], ["output capture", "--json"], [input_path])
    started = time.monotonic()
    frame_list, stamps, info = read_input(input_path)
    left = max_seconds - (time.monotonic() - started)       # the deadline covers reading the input too
    if left <= 0:
        raise EnvironmentProblem(f"kernel replay did not finish within {max_seconds:g} s (--max-seconds)")
    if vm is not None:
        result = vm.replay(frame_list, stamps, csum=csum, udp_gro=udp_gro, host=host, batch=batch,
                           max_seconds=left, rss_key=rss_key)
    else:
        result = kernel_replay(frame_list, stamps, csum=csum, udp_gro=udp_gro, host=host, batch=batch,
                               max_seconds=left, log=log, reported_seconds=max_seconds, rss_key=rss_key)
    if output_path:
        with PcapWriter(output_path, LINKTYPE_ETHERNET, OUTPUT_SNAPLEN) as writer:
            for pkt in result.packets:
                writer.write(pkt.ts, pkt.data)
    if json_path:
        write_json(document(result, info), json_path, indent=1)
    return result
