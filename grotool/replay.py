"""The replay job: capture in -> engine -> capture out + statistics.

Glue between grotool.io, grotool.engine and grotool.report; no printing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .engine import Engine, Settings
from .errors import InputError
from .io.capture import CaptureReader, PcapWriter
from .report.stats import StatsCollector


@dataclass
class ReplayResult:
    document: dict
    collector: StatsCollector
    engine_stats: object
    frames: int


def output_snaplen(settings: Settings) -> int:
    """Large enough for the largest super-packet the settings allow."""
    return max(262144, max(settings.gro_max_size, settings.gro_ipv4_max_size) + 512)


class PacketLog:
    """--packets FILE: one JSON object per delivered packet (JSON Lines), for
    debugging single flush decisions and for `grotool compare` sidecars."""

    def __init__(self, path: str, namer):
        import json

        self._dumps = json.dumps
        self._namer = namer
        self._tmp = f"{path}.grotool-tmp"
        self._path = path
        try:
            self._f = open(self._tmp, "w")
        except OSError as exc:
            raise InputError(f"{path}: cannot write: {exc.strerror}") from None
        self._n = 0

    def add(self, d) -> None:
        from .report.flows import flow_label

        self._f.write(self._dumps({
            "index": self._n, "ts_ns": d.ts, "len": len(d.data), "segs": d.segs, "gso_size": d.gso_size,
            "gso_type": list(d.gso_type), "reason": d.reason, "covers": list(d.indices),
            "flow": flow_label(self._namer(d.key, d.data)), "queue": d.queue, "poll": d.poll,
            **({"layer": d.layer} if d.layer else {}),
        }) + "\n")
        self._n += 1

    def close(self) -> None:
        import os

        self._f.close()
        os.replace(self._tmp, self._path)

    def abort(self) -> None:
        import os

        self._f.close()
        try:
            os.unlink(self._tmp)
        except OSError:
            pass


def output_format_for(output_path: Optional[str], output_format: Optional[str] = None) -> str:
    """The explicit format, else pcapng for a name ending in .pcapng, else pcap."""
    if output_format:
        return output_format
    if output_path and output_path.lower().endswith(".pcapng"):
        return "pcapng"
    return "pcap"


def _progress_sink(progress: Callable, reader, every: int = 2048):
    """A delivery sink that reports progress every ``every`` input frames."""
    state = {"frames": 0, "next": every}

    def sink(d):
        state["frames"] += d.segs
        if state["frames"] >= state["next"]:
            state["next"] = state["frames"] + every
            progress(state["frames"], reader)
    return sink


def replay(input_path: str, output_path: Optional[str], settings: Settings,
           packets_path: Optional[str] = None, *, output_format: Optional[str] = None,
           observers: Sequence[Callable] = (), progress: Optional[Callable] = None) -> ReplayResult:
    """Replay a capture file.  ``observers`` are called with every Delivery in
    delivery order (plots, the API); one with a ``start(linktype)`` method is
    told the link type first.  ``progress(frames, reader)`` is called every
    few thousand frames (the CLI's progress bar)."""
    with CaptureReader(input_path) as reader:
        linktype = reader.linktype if reader.linktype is not None else 1
        engine = Engine(linktype, settings)
        collector = StatsCollector(linktype, settings.layout, settings.max_skb_frags,
                                   vxlan_ports=settings.vxlan_ports, geneve_ports=settings.geneve_ports)
        fmt = output_format_for(output_path, output_format)
        pcapng = None
        writer = None
        if output_path and fmt == "pcapng":
            from .io.pcapng_writer import PcapngFile

            pcapng = writer = PcapngFile(output_path, linktype, output_snaplen(settings),
                                         section_comment=f"grotool replay of {os.path.basename(input_path)}")
        elif output_path:
            writer = PcapWriter(output_path, linktype, output_snaplen(settings))
        log = PacketLog(packets_path, collector.namer) if packets_path else None
        sinks = [collector.add]
        if log is not None:
            sinks.append(log.add)
        if pcapng is not None:
            l4_csum = settings.l4_csum
            sinks.append(lambda d, _w=pcapng.write_delivery: _w(d, l4_csum))
        for observer in observers:
            start = getattr(observer, "start", None)
            if start is not None:
                start(linktype)
            sinks.append(observer)
        if progress is not None:
            sinks.append(_progress_sink(progress, reader))
        if len(sinks) == 1:
            add = collector.add
        else:
            def add(d, _sinks=tuple(sinks)):
                for sink in _sinks:
                    sink(d)
        fcs = reader.fcs_len
        first_ts = last_ts = None
        try:
            feed = engine.feed
            write = writer.write if writer is not None and pcapng is None else None
            for ts, data, wirelen in reader:
                if fcs and len(data) >= fcs and wirelen >= len(data):
                    # the kernel never sees the FCS: strip it before GRO
                    data = data[:-fcs]
                    wirelen -= fcs
                if first_ts is None:
                    first_ts = ts
                last_ts = ts
                out = feed(ts, data, wirelen)
                if out:
                    for d in out:
                        add(d)
                        if write:
                            write(d.ts, d.data)
            for d in engine.finish():
                add(d)
                if write:
                    write(d.ts, d.data)
        except BaseException:
            if writer:
                writer.abort()
            if log:
                log.abort()
            raise
        if writer:
            writer.close()
        if log:
            log.close()
        frames = engine.stats.frames
        if collector.packets_in != frames:
            raise RuntimeError(f"accounting error: {frames} frames in, {collector.packets_in} accounted for")
        st = engine.stats
        input_info = {
            "path": input_path,
            "format": reader.format,
            "linktype": linktype,
            "nanosecond": reader.nanosecond if reader.format == "pcap" else True,
            "packets": frames,
            "first_ts_ns": first_ts,
            "last_ts_ns": last_ts,
        }
        checks = {"tcp_offloaded": st.csum_offloaded, "tcp_verified": st.csum_verified,
                  "tcp_bad": st.csum_bad, "ip_header_bad": st.ip_csum_bad}
        doc = collector.document(input_info, settings.as_dict(), checks)
        doc["totals"]["polls"] = st.polls
        doc["totals"]["irqs"] = st.irqs
        doc["totals"]["timer_polls"] = st.timer_polls
        doc["totals"]["normal_batches"] = st.normal_batches
        return ReplayResult(doc, collector, st, frames)
