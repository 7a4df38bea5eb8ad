"""`grotool explain`: the engine's decisions, frame by frame (debugging flush decisions)."""

from __future__ import annotations

import json
import os
import sys
from typing import List

from typing import TYPE_CHECKING

import click

from .. import __version__
from ..engine.reasons import REASONS
from ..errors import EXIT_INPUT_TRUNCATED
from . import EXIT_CODES_HELP, make_console, user_errors
from .dpdkopts import DPDK_KEYS, dpdk_options, dpdk_settings
from .options import explicit_settings, replay_settings_options, settings_from_options

if TYPE_CHECKING:
    from rich.console import Console

OUTCOME_STYLE = {"merged": "green", "held": "cyan", "sent_up": "yellow",
                 "completed_held": "bold magenta", "evicted": "bold red", "flushed": "bold blue"}


def device_summary(settings) -> str:
    """One line: the device model and the settings that shape decisions."""
    if settings.device == "veth":
        model = (f"veth (the kernel oracle's conditions: polls of {settings.budget} frames, "
                 f"HZ {settings.hz}{', RSS hash' if settings.veth_rss else ', one GRO bucket'})")
    else:
        model = (f"nic ({settings.rx_queues} RX queue{'s' if settings.rx_queues > 1 else ''}, "
                 f"budget {settings.budget}, rx-usecs {settings.rx_usecs}, rx-frames {settings.rx_frames}, "
                 f"HZ {settings.hz}, gro_flush_timeout {settings.gro_flush_timeout}, "
                 f"napi_defer_hard_irqs {settings.napi_defer_hard_irqs})")
    return model


def settings_summary(settings) -> str:
    from ..engine.kernels import cached_profile

    parts = [f"kernel {cached_profile(settings.kernel).description}",
             f"csum {settings.csum}", f"gro {'on' if settings.gro else 'off'}",
             f"gro_max_size {settings.gro_max_size}", f"gro_ipv4_max_size {settings.gro_ipv4_max_size}"]
    host = []
    if settings.udp_gro_forwarding:
        host.append("rx-udp-gro-forwarding")
    if settings.rx_gro_list:
        host.append("rx-gro-list")
    host += [f"UDP_GRO socket :{p}" for p in settings.udp_gro_sockets]
    host += [f"vxlan :{p}" for p in settings.vxlan_ports]
    host += [f"geneve :{p}" for p in settings.geneve_ports]
    host += [f"local tcp {t}" for t in settings.local_tcp]
    parts.append("host: " + (", ".join(host) if host else "no UDP GRO sockets, no tunnel devices"))
    return "; ".join(parts)


@click.command("explain", epilog=EXIT_CODES_HELP)
@click.argument("input_path", metavar="INPUT")
@click.option("--frame", "frame_range", metavar="N[-M]", default=None,
              help="Only frames N to M (1-based, as tshark numbers them), and the completions they caused "
                   "or took part in.")
@click.option("--flow", "flow_filter", metavar="FILTER", default=None,
              help="Only one flow: a flow number of replay's table (e.g. 2), a flow as replay prints it, or "
                   "[PROTO] [ADDR[:PORT]] [> ADDR[:PORT]] (e.g. 'tcp 10.0.0.1:5201'; a port alone: ':5201').")
@click.option("--reason", "reason_name", metavar="NAME", default=None,
              help="Only decisions with this reason (`grotool reasons` lists them).")
@click.option("--jsonl", "jsonl_path", metavar="FILE", default=None,
              help="Write the events as JSON Lines, schema grotool.events/1 (docs/events.md); '-': stdout "
                   "instead of the text.")
@replay_settings_options
@click.option("--mtu", type=click.IntRange(68, 1 << 20), default=None,
              help="Link MTU (as replay) [default: the MTU the capture implies, at least 1500].")
@click.option("--stack", type=click.Choice(["linux", "dpdk"]), default="linux", show_default=True,
              help="Whose GRO: Linux's, or DPDK's lib/gro (22.11) with the --dpdk-* and --burst knobs "
                   "(docs/dpdk.md; --frame and --reason apply, --flow and --jsonl do not).")
@dpdk_options
@click.pass_context
@user_errors
def explain(ctx, input_path, frame_range, flow_filter, reason_name, jsonl_path, mtu, stack, **options):
    """Replay INPUT as `grotool replay` does (same options) and show every GRO
    decision: one line per frame (frame number, time, flow, outcome, reason,
    evidence), grouped by NAPI poll, and one line per delivered aggregate.

    Outcomes: merged, held, sent_up (the frame went up alone); completed_held
    (an arriving frame completed a held aggregate), evicted (its bucket was
    full), flushed (the poll loop flushed it)."""
    from ..io.safe_output import check_outputs
    from ..replay import replay as run_replay
    from ..report.events import FlowFilter, parse_frame_range

    if stack == "dpdk":
        if flow_filter is not None or jsonl_path is not None:
            raise click.UsageError("--flow and --jsonl do not apply with --stack dpdk")
        return explain_dpdk(input_path, frame_range, reason_name, dpdk_settings(options))
    for name in DPDK_KEYS:
        options.pop(name)
    given = explicit_settings(ctx)
    settings = settings_from_options(options)
    frames = None
    if frame_range is not None:
        try:
            frames = parse_frame_range(frame_range)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--frame") from None
    if reason_name is not None and reason_name not in REASONS:
        raise click.BadParameter(f"{reason_name!r} is not a reason (see `grotool reasons`)", param_hint="--reason")
    flow = None
    if flow_filter is not None:
        try:
            flow = FlowFilter(flow_filter)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--flow") from None
    check_outputs([jsonl_path], ["--jsonl"], [input_path])

    kept: List = []
    if frames is None:
        def sink(event, _keep=kept.append):
            if reason_name is None or event.reason == reason_name:
                _keep(event)
    else:
        first, last = frames

        def sink(event, _keep=kept.append):
            if reason_name is not None and event.reason != reason_name:
                return
            if first <= event.frame <= last or (event.cause is not None and first <= event.cause <= last) \
                    or any(first <= f <= last for f in event.frames):
                _keep(event)

    result = run_replay(input_path, None, settings, mtu=mtu, events=sink)
    collector = result.collector
    table = collector.sorted_flows()
    numbers = {(fs.interface, fs.flow): n for n, fs in enumerate(table, 1)}
    rows = []
    for event in kept:
        described = collector.describe(event)
        number = numbers.get((event.interface, described))
        if flow is not None:
            if flow.number is not None:
                if number != flow.number:
                    continue
            elif not flow.matches(described):
                continue
        rows.append((event, described, number))
    if flow is not None and flow.number is not None and not 1 <= flow.number <= len(table):
        raise click.BadParameter(f"flow {flow.number}: the replay table has {len(table)} flows", param_hint="--flow")

    first_ts = result.document["input"]["first_ts_ns"] or 0
    if jsonl_path:
        _write_jsonl(jsonl_path, rows, result, settings, given)
    if jsonl_path != "-":
        _print_text(make_console(), rows, result, settings, first_ts)
    if result.truncation:
        t = result.truncation
        click.echo(f"grotool: warning: record {t['record']} cut short ({t['detail']}); the {result.frames} "
                   f"complete records before it were explained (exit {EXIT_INPUT_TRUNCATED})", err=True)
        sys.exit(EXIT_INPUT_TRUNCATED)


def _write_jsonl(path: str, rows, result, settings, given) -> None:
    from ..io.jsonout import JsonLinesWriter
    from ..report.events import SCHEMA, event_record

    out = JsonLinesWriter(path, "--jsonl")
    try:
        doc = result.document["input"]
        out.write_line(json.dumps({"schema": SCHEMA, "grotool": __version__,
                                   "input": os.path.basename(doc["path"]), "frames": result.frames,
                                   "linktype": doc["linktype"], "settings": settings.as_dict(),
                                   "settings_given": sorted(given)}))
        for event, described, number in rows:
            out.write_line(json.dumps(event_record(event, described, number)))
        out.close()
    except BaseException:
        out.abort()
        raise


def _format_ts(ns: int, first: int) -> str:
    return f"{(ns - first) / 1e9:.6f}"


def _print_text(console: Console, rows, result, settings, first_ts: int) -> None:
    from rich.text import Text

    from ..report.flows import flow_label

    doc = result.document
    console.print(Text(f"{os.path.basename(doc['input']['path'])}: {result.frames} frames, "
                       f"{doc['totals']['packets_out']} packets delivered"), style="bold")
    console.print(Text(f"device {device_summary(settings)}"))
    console.print(Text(f"settings: {settings_summary(settings)}"))
    if not rows:
        console.print("no decision matches the filters")
        return
    labels = [flow_label(described) for _, described, _ in rows]
    lines = _decision_lines(rows, labels, first_ts)
    if console.color_system is None:
        _write_plain(console, lines)
    else:
        _print_styled(console, lines)
    console.print(Text(f"{len(rows)} decisions shown"), style="dim")


# Decisions printed per console.print call with colour: one call per line
# costs rich about a millisecond (its render pipeline and buffer handling).
STYLED_LINES_PER_PRINT = 500
# Lines gathered per write of the plain text.
PLAIN_LINES_PER_WRITE = 2000


def _decision_lines(rows, labels, first_ts: int):
    """Per poll header and per decision, the line as (text, style) pieces
    (style None: plain); the caller strips trailing blanks."""
    from ..report.events import compress_frames

    flow_width = min(max(len(s) for s in labels), 72)
    frame_width = max(2, max(len(str(e.frame)) for e, _, _ in rows))
    outcome_width = max(len(e.outcome) for e, _, _ in rows)
    reason_width = max(len(e.reason or "-") for e, _, _ in rows)
    several_queues = len({e.queue for e, _, _ in rows}) > 1 or len({e.interface for e, _, _ in rows}) > 1
    poll = None
    for (event, _described, number), label in zip(rows, labels):
        here = (event.interface, event.queue, event.poll)
        if here != poll:
            poll = here
            where = f"poll {event.poll}"
            if several_queues:
                where += f", queue {event.queue}" + (f", interface {event.interface}" if event.interface else "")
            yield [(where, "bold underline")]
        if event.kind == "completion":
            frame = f"{'->':>{frame_width}}"       # a delivery, not a frame
        else:
            frame = f"{event.frame:>{frame_width}}"
        line = [("  ", None), (frame, "bold"), (f"  {_format_ts(event.ts, first_ts)}  {label:<{flow_width}}  ", None),
                (f"{event.outcome:<{outcome_width}}", OUTCOME_STYLE.get(event.outcome))]
        details = []
        if event.evidence:
            details.append(event.evidence)
        if event.kind == "completion":
            plural = "s" if event.segs > 1 else ""
            details.append(f"delivered frame{plural} {compress_frames(event.frames)} ({event.segs} seg{plural})")
        elif event.held_frame is not None:
            plural = "s" if event.held_segs != 1 else ""
            details.append(f"held: frame {event.held_frame}, {event.held_segs} seg{plural}")
        if event.layer:
            details.append(f"{event.layer} header")
        if event.row:
            details.append(event.row)
        if event.reason or details:
            line.append(("  ", None))
            reason = event.reason or "-"
            line.append((f"{reason:<{reason_width}}" if details else reason, "bold" if event.reason else "dim"))
        if details:
            line.append(("  " + "; ".join(details), None))
        if event.function:
            line.append((f"  [{event.function}]", "dim"))
        yield line


def _write_plain(console: Console, lines) -> None:
    """The lines without styles, written straight to the console's file: what
    rich prints for them without colour (control codes stripped as rich's Text
    does, trailing blanks stripped, no wrapping), without its per-line cost."""
    from rich.control import strip_control_codes

    out = console.file
    chunk = []
    for pieces in lines:
        chunk.append(strip_control_codes("".join(text for text, _ in pieces)).rstrip())
        if len(chunk) >= PLAIN_LINES_PER_WRITE:
            out.write("\n".join(chunk) + "\n")
            chunk.clear()
    if chunk:
        out.write("\n".join(chunk) + "\n")
    out.flush()


def _print_styled(console: Console, lines) -> None:
    """The lines with their styles, STYLED_LINES_PER_PRINT per console.print."""
    from rich.text import Text

    batch = Text()
    count = 0
    for pieces in lines:
        line = Text()
        for text, style in pieces:
            line.append(text, style=style)
        line.rstrip()
        if count:
            batch.append("\n")
        batch.append_text(line)
        count += 1
        if count >= STYLED_LINES_PER_PRINT:
            console.print(batch, soft_wrap=True)
            batch = Text()
            count = 0
    if count:
        console.print(batch, soft_wrap=True)


def explain_dpdk(input_path, frame_range, reason_name, settings) -> None:
    """explain --stack dpdk: each frame's fate in DPDK's GRO model, burst by burst,
    and each packet the library returns, with its reason and DPDK function."""
    from ..dpdk.engine import simulate
    from ..oracle import read_input
    from ..oracle.frames import flow_json, parse
    from ..report.events import parse_frame_range

    first, last = 1, 1 << 62
    if frame_range is not None:
        try:
            first, last = parse_frame_range(frame_range)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--frame") from None
    if reason_name is not None and reason_name not in REASONS:
        raise click.BadParameter(f"{reason_name!r} is not a reason (see `grotool reasons`)", param_hint="--reason")
    frames, _, _ = read_input(input_path)
    lines: List[tuple] = []
    packets = simulate(frames, settings, lambda *d: lines.append(("frame",) + d))
    # the returned packets go after the decisions of the burst that returned them
    by_burst = {}
    for number, p in enumerate(packets):
        by_burst.setdefault(p.burst, []).append((number, p))

    def flow_of(data) -> str:
        f = flow_json(parse(data))
        if f is None:
            return "(not TCP/UDP over IP)"
        return f"{f['proto']} {f['src']}:{f['sport']} > {f['dst']}:{f['dport']}"

    def spans(indices) -> str:
        runs = []
        for i in indices:
            if runs and i == runs[-1][1] + 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        return ", ".join(f"{a + 1}" if a == b else f"{a + 1}-{b + 1}" for a, b in runs)

    out = []
    mode = "rte_gro_reassemble_burst" if settings.mode == "light" else "rte_gro_reassemble + rte_gro_timeout_flush"
    out.append(f"DPDK 22.11 lib/gro model, {settings.mode} mode ({mode}), bursts of {settings.burst}"
               + (f", flush every {settings.flush_every} bursts" if settings.mode == "heavy" else "")
               + f", max {settings.max_flows} flows x {settings.max_items} items, types {','.join(settings.gro_types)}")
    burst_shown = None

    def header(burst):
        nonlocal burst_shown
        if burst_shown != burst:
            out.append(f"burst {burst + 1}")
            burst_shown = burst

    def emit_packets(burst):
        for number, p in by_burst.pop(burst, []):
            if not any(first <= i + 1 <= last for i in p.covers):
                continue
            if reason_name is not None and p.reason != reason_name:
                continue
            header(burst)
            n = len(p.covers)
            out.append(f"  -> packet {number + 1}: frame{'s' if n > 1 else ''} {spans(p.covers)} "
                       f"({n} segment{'s' if n > 1 else ''}, {len(p.data)} bytes), {p.reason} [{REASONS[p.reason][1]}]")

    previous = None
    for _, frame, burst, outcome, reason in lines:
        if previous is not None and burst != previous:
            emit_packets(previous)
        previous = burst
        if not first <= frame + 1 <= last or (reason_name is not None and reason != reason_name):
            continue
        header(burst)
        text = f"  frame {frame + 1}  {flow_of(frames[frame])}  {outcome}"
        if reason:
            text += f": {reason} [{REASONS[reason][1]}]"
        out.append(text)
    for burst in sorted(by_burst):
        emit_packets(burst)
    click.echo("\n".join(out))
