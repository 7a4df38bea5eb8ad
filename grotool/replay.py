"""The replay job: capture in -> engine -> capture out + statistics.

Glue between grotool.io, grotool.engine and grotool.report; no printing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
    verify: object = None        # grotool.verify.VerifyResult with verify=True


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


def replay(input_path: str, output_path: Optional[str], settings: Settings,
           packets_path: Optional[str] = None, verify: bool = False) -> ReplayResult:
    with CaptureReader(input_path) as reader:
        linktype = reader.linktype if reader.linktype is not None else 1
        engine = Engine(linktype, settings)
        collector = StatsCollector(linktype)
        writer = PcapWriter(output_path, linktype, output_snaplen(settings)) if output_path else None
        log = PacketLog(packets_path, collector.namer) if packets_path else None
        if log is not None:
            def add(d, _stats=collector.add, _log=log.add):
                _stats(d)
                _log(d)
        else:
            add = collector.add
        verifier = None
        if verify:
            # --verify: split every delivery again and compare with its input frames
            from .verify import Verifier

            verifier = Verifier(linktype)
            def add(d, _add=add, _check=verifier.check):
                _add(d)
                _check(d)
        fcs = reader.fcs_len
        first_ts = last_ts = None
        try:
            feed = engine.feed
            write = writer.write if writer else None
            for ts, data, wirelen in reader:
                if fcs and len(data) >= fcs and wirelen >= len(data):
                    # the kernel never sees the FCS: strip it before GRO
                    data = data[:-fcs]
                    wirelen -= fcs
                if first_ts is None:
                    first_ts = ts
                last_ts = ts
                if verifier is not None:
                    verifier.add_input(data)
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
        verified = verifier.finish() if verifier is not None else None
        if verified is not None:
            doc["verify"] = verified.as_dict()
        return ReplayResult(doc, collector, st, frames, verified)
