"""The replay job: capture in -> engine -> capture out + statistics.

Glue between grotool.io, grotool.engine and grotool.report; no printing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple

from .engine import Engine, Settings
from .engine.skb import FRAMES_IN_PLACE, clear_keeping_room
from .errors import InputError
from .io.capture import CaptureReader, PcapWriter
from .io.safe_output import check_outputs
from .linktypes import LINK_HEADER_BYTES as _LINK_HEADER_BYTES, LINKTYPE_ETHERNET, SUPPORTED_LINKTYPES
from .report.mtu import DEFAULT_MTU, MtuCensus
from .report.stats import StatsCollector

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only: the deliveries copied into the writer's buffer
else:
    from .engine._interpreted import cython


class ReplayResult:
    """What replay() gives back.  ``totals`` are the document's totals; the
    whole grotool.stats/1 ``document`` is made when first read: its per-flow
    list is most of the end-of-run work, and neither a quiet replay nor the
    terminal table (which reads ``collector``) needs it."""

    def __init__(self, input_info: dict, settings: dict, totals: dict, collector: StatsCollector,
                 engine_stats: object, frames: int, truncation: Optional[dict] = None, over_mtu: int = 0,
                 first_over_mtu: Optional[Tuple[int, int]] = None, verify: object = None):
        self.input_info = input_info
        self.settings = settings
        self.totals = totals
        self.collector = collector
        self.engine_stats = engine_stats
        self.frames = frames
        self.truncation = truncation              # the input's last record was cut short: where
        self.over_mtu = over_mtu                  # frames longer than the link MTU (captured on a host)
        self.first_over_mtu = first_over_mtu      # (record number, length) of the first
        self.mtu = input_info.get("mtu", 0)       # the link MTU they were measured against
        self.verify = verify                      # grotool.verify.VerifyResult with verify=True
        self._document: Optional[dict] = None

    @property
    def document(self) -> dict:
        if self._document is None:
            doc = self.collector.document(self.input_info, self.settings, totals=self.totals)
            if self.verify is not None:
                doc["verify"] = self.verify.as_dict()
            self._document = doc
        return self._document


# link header bytes in front of the IP packet, per link type (VLAN tags come on top)
LINK_HEADER_BYTES = dict(_LINK_HEADER_BYTES)
VLAN_ETHERTYPES = (0x8100, 0x88A8, 0x9100)


def output_snaplen(settings: Settings) -> int:
    """Large enough for the largest super-packet the settings allow."""
    return max(262144, max(settings.gro_max_size, settings.gro_ipv4_max_size) + 512)


def _l3_length(linktype: int, data: bytes, wirelen: int) -> int:
    """Bytes on the wire after the link header and any VLAN tags: what the MTU bounds."""
    length = wirelen - LINK_HEADER_BYTES.get(linktype, 0)
    if linktype == LINKTYPE_ETHERNET:
        raw = data      # read in place (a C pointer in the compiled build): each read is checked against len(data)
        at = 12
        while len(data) >= at + 6:
            ethertype = (raw[at] << 8) | raw[at + 1]
            if ethertype not in VLAN_ETHERTYPES:
                break
            length -= 4
            at += 4
    return length


def output_format_for(output_path: Optional[str], output_format: Optional[str] = None) -> str:
    """The explicit format, else pcapng for a name ending in .pcapng (or .pcapng.gz), else pcap."""
    if output_format:
        return output_format
    if output_path and output_path.lower().removesuffix(".gz").endswith(".pcapng"):
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


def _checksum_fixer(linktype: int, settings: Settings, interface_linktypes: dict):
    """--l4-csum full: packets sent up unchanged get valid TCP/UDP checksums
    too (a capture from a sender with offload holds only the pseudo-header
    seed), so that every checksum written is valid on the wire; super-packets
    already got theirs when they were rebuilt.  Output only: no decision
    depends on it.  Returns the function that fixes a delivery in place."""
    from .oracle.frames import fix_checksums

    vxlan = set(settings.vxlan_ports) | {4789}
    geneve = set(settings.geneve_ports) | {6081}

    def fix(d):
        if d.segs == 1 and d.reason != "unknown_link_type":
            d.data = fix_checksums(d.data, ip_header=False, vxlan_ports=vxlan, geneve_ports=geneve,
                                   linktype=interface_linktypes.get(d.interface, linktype))
    return fix


# each line of --packets declares it: `grotool split` and `grotool compare` take
# a file beside a capture as its sidecar only when it does
PACKETS_SCHEMA = "grotool.packets/1"


class PacketLog:
    """--packets FILE: one JSON object per delivered packet (JSON Lines), for
    debugging single flush decisions and for `grotool compare` sidecars."""

    def __init__(self, path: str, describe):
        import json

        from .io.jsonout import JsonLinesWriter

        self._dumps = json.dumps
        self._describe = describe
        self._out = JsonLinesWriter(path, "--packets")
        self._n = 0

    def add(self, d) -> None:
        from .report.flows import flow_label

        entry = {
            "schema": PACKETS_SCHEMA, "index": self._n, "ts_ns": d.ts, "len": d.frame_len, "segs": d.segs,
            "gso_size": d.gso_size, "gso_type": list(d.gso_type), "reason": d.reason, "covers": list(d.indices),
            "flow": flow_label(self._describe(d)), "queue": d.queue, "poll": d.poll,
        }
        if d.interface:
            entry["interface"] = d.interface
        if d.layer:
            entry["layer"] = d.layer
        self._out.write_line(self._dumps(entry))
        self._n += 1

    def close(self) -> None:
        self._out.close()

    def abort(self) -> None:
        self._out.abort()


def _chain(sinks: list):
    """One callable calling each sink in order; None for no sink."""
    if not sinks:
        return None
    if len(sinks) == 1:
        return sinks[0]

    def add(d, _sinks=tuple(sinks)):
        for sink in _sinks:
            sink(d)
    return add


def _deliver(out: list, fix, collector, after, writer) -> None:
    """Each delivery, made valid by ``fix`` first when given (--l4-csum full), to the
    statistics (``collector``), the other sinks (``after``) and the output capture
    (``writer``, a PcapWriter, or None), in this order."""
    for d in out:
        if fix is not None:
            fix(d)
        collector.add(d)
        if after is not None:
            after(d)
        if writer is not None:
            if cython.compiled:
                # copied once, from the frames GRO kept, into the writer's buffer
                at = writer.reserve(d.ts, d.frame_len)
                if at >= 0:
                    if copy_frame(d, cython.cast(cython.p_uchar, writer._buffer) + at):
                        continue
                    writer.unreserve(d.frame_len)
            writer.write_ts(d.ts, d.data)


def _feed_records(records, engine, fix, collector, after, writer, interface, verifier, mtu: int, reader,
                  census, directed: bool = False) -> tuple:
    """Feed every input record (``records``: the reader's _Records) to the
    engine and its deliveries to _deliver: the per-frame loop of replay().
    ``directed``: the records may be marked as sent by the capturing host
    (pcapng epb_flags), which the engine is told (receive_sent).
    ``interface(ifid)`` gives an interface's (link type, FCS bytes, longest
    frame within the MTU ``mtu``); a frame longer goes to ``census`` (a
    report.mtu.MtuCensus).  Returns (first timestamp, last timestamp)."""
    first_ts = None
    last_ts = 0
    last_ifid = -1
    lt, fcs, limit = 0, 0, 0
    # each record read where it lies in the reader's buffer (records.next_view),
    # and the compiled engine takes it there: it copies no frame
    in_place = FRAMES_IN_PLACE
    buf = records.next_view()
    while buf is not None:
        ts, wirelen, ifid = records.ts, records.wirelen, records.interface
        start, end = records.view_start, records.view_end
        if ifid != last_ifid:
            lt, fcs, limit = interface(ifid)
            last_ifid = ifid
        if fcs and end - start >= fcs and wirelen >= end - start:
            # the kernel never sees the FCS: strip it before GRO
            end -= fcs
            wirelen -= fcs
        if wirelen > limit:
            data = buf[start:end]
            l3_length = _l3_length(lt, data, wirelen)
            if l3_length > mtu:
                census.add(lt, data, wirelen, l3_length, reader.records_read)
        if first_ts is None:
            first_ts = ts
        last_ts = ts
        if verifier is not None:
            verifier.add_input(buf[start:end])
        # the readers' timestamps are ints within the engine's clock
        if directed and records.outbound:
            out = engine.receive_sent(ts, buf[start:end], wirelen, ifid)
        elif in_place:
            out = engine.receive_record(ts, buf, wirelen, ifid, start, end)
        else:
            out = engine.receive_record(ts, buf[start:end], wirelen, ifid)
        if out:
            _deliver(out, fix, collector, after, writer)
            if cython.compiled:
                clear_keeping_room(out)          # refilled at every poll: its storage kept
            else:
                out.clear()
        buf = records.next_view()
    return first_ts, last_ts if first_ts is not None else None


def replay(input_path: str, output_path: Optional[str], settings: Settings,
           packets_path: Optional[str] = None, mtu: Optional[int] = None, *, output_format: Optional[str] = None,
           observers: Sequence[Callable] = (), progress: Optional[Callable] = None,
           verify: bool = False, events: Optional[Callable] = None) -> ReplayResult:
    """Replay a capture.  Every output path is checked before the first frame is
    read (OutputError); a last record cut short ends the input early and is
    reported in ``truncation``; frames of link types grotool does not parse
    are passed through (reason unknown_link_type).  ``observers`` are called
    with every Delivery in delivery order (plots, the API); one with a
    ``start(linktype)`` method is told the link type first.  ``progress(frames,
    reader)`` is called every few thousand frames (the CLI's progress bar).
    ``verify``: split every delivery again and compare with its input frames
    (grotool.verify), the result in ``verify`` and the document.
    ``events``: a callable given the engine's decision events (grotool explain).
    ``mtu``: the link MTU; None: the one the capture implies, at least 1500
    (grotool.report.mtu), which ``frames_over_mtu`` counts against."""
    check_outputs([output_path, packets_path], ["output capture", "--packets"], [input_path])
    census = MtuCensus(DEFAULT_MTU if mtu is None else mtu, fixed=mtu is not None,
                       vxlan_ports=settings.vxlan_ports, geneve_ports=settings.geneve_ports)
    mtu = census.floor
    with CaptureReader(input_path, any_linktype=True, tolerate_truncation=True) as reader:
        linktype = reader.linktype if reader.linktype is not None else 1
        engine = Engine(linktype, settings, events=events)
        collector = StatsCollector(linktype, reader.interfaces, layout=settings.layout,
                                   max_skb_frags=settings.max_skb_frags, vxlan_ports=settings.vxlan_ports,
                                   geneve_ports=settings.geneve_ports)
        fmt = output_format_for(output_path, output_format)
        pcapng = None
        writer = None
        log = None
        try:
            if output_path and fmt == "pcapng":
                from .io.pcapng_writer import PcapngFile

                pcapng = writer = PcapngFile(output_path, linktype, output_snaplen(settings),
                                             section_comment=f"grotool replay of {os.path.basename(input_path)}")
            elif output_path:
                writer = PcapWriter(output_path, linktype, output_snaplen(settings))
            log = PacketLog(packets_path, collector.describe) if packets_path else None
            sinks = []                  # after the statistics, in this order
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
            verifier = None
            if verify:
                # --verify: split every delivery again and compare with its input frames
                from .verify import Verifier

                verifier = Verifier(linktype)
                sinks.append(verifier.check)
            after = _chain(sinks)
            fix = _checksum_fixer(linktype, settings, engine.interface_linktypes) \
                if settings.l4_csum == "full" else None
            pcap_writer = writer if writer is not None and pcapng is None else None
            # per interface: (link type, FCS bytes, longest frame within the MTU)
            known = {}

            def interface(ifid: int):
                entry = known.get(ifid)
                if entry is not None:
                    return entry
                info = reader.interfaces[ifid] if ifid < len(reader.interfaces) else {}
                lt = info.get("linktype", linktype)
                fcs = info.get("fcs_len", reader.fcs_len) if info else reader.fcs_len
                if lt != linktype:
                    if writer is not None:
                        raise InputError(
                            f"{reader.name}: interface {ifid} has link type {lt}, interface 0 has {linktype}: "
                            "one pcap file holds one link type (omit OUTPUT for statistics only)")
                    engine.interface_linktypes[ifid] = lt
                limit = mtu + LINK_HEADER_BYTES[lt] if lt in LINK_HEADER_BYTES else \
                    mtu if lt in SUPPORTED_LINKTYPES else 1 << 62
                known[ifid] = entry = (lt, fcs, limit)
                return entry

            first_ts, last_ts = _feed_records(
                reader.records_with_interface(), engine, fix, collector, after, pcap_writer, interface, verifier,
                mtu, reader, census, reader.format == "pcapng")
            _deliver(engine.finish(), fix, collector, after, pcap_writer)
            if writer:
                writer.close()
            if log:
                log.close()
        except BaseException:
            if writer:
                writer.abort()
            if log:
                log.abort()
            raise
        frames = engine.stats.frames
        link_mtu = census.implied
        over_mtu, first_over_mtu = census.over(link_mtu)
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
            "mtu": link_mtu,
            "mtu_from": "option" if census.fixed else "capture",
            "frames_over_mtu": over_mtu,
            "truncated": reader.truncation,
            "invalid_timestamps": reader.invalid_timestamps,
            "first_invalid_timestamp": reader.first_invalid_timestamp,
        }
        if reader.format == "pcapng":
            input_info["interfaces"] = [{"id": i["id"], "name": i["name"], "linktype": i["linktype"]}
                                        for i in reader.interfaces]
        checks = {"tcp_offloaded": st.csum_offloaded, "tcp_verified": st.csum_verified,
                  "tcp_bad": st.csum_bad, "ip_header_bad": st.ip_csum_bad}
        totals = collector.totals(checks)
        totals["polls"] = st.polls
        totals["irqs"] = st.irqs
        totals["timer_polls"] = st.timer_polls
        totals["normal_batches"] = st.normal_batches
        totals["outgoing"] = st.outgoing
        verified = verifier.finish() if verifier is not None else None
        return ReplayResult(input_info, settings.as_dict(), totals, collector, st, frames, reader.truncation,
                            over_mtu, first_over_mtu, verified)
