"""`grotool sweep`: replay captures under every combination of some settings
and measure, per combination, what GRO gains (coalescing) and what it costs
(added latency in the simulated NAPI model).

The work is one replay per (combination, capture) pair; pairs run on any
``grotool.executor`` executor and come back in a fixed order, so the
document is the same whoever ran it.  No printing here (grotool.cli does it).

Added latency: a segment's delivery time minus its arrival time (its capture
timestamp).  The delivery time is ``Delivery.delivered_ns``: the simulated
clock of the nic device when GRO hands the batch holding the segment to the
stack (gro_normal_list: a full gro_normal_batch, or the end of a poll).  The
veth device has no clock (the kernel oracle's polls are paced by the sender):
there latency is null.  Nor has the DPDK stack (``--stack dpdk``: a
DpdkSettings combination replays through the model of DPDK's lib/gro, whose
knobs are the axes); its ``polls`` are the rx bursts.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections import Counter
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import __version__
from .dpdk.engine import DpdkSettings
from .engine import Engine, Settings
from .engine.config import ipv4_max_size_for
from .errors import EnvironmentProblem, GrotoolError, InputError

SCHEMA = "grotool.sweep/1"
PERCENTILES = (50, 90, 99)


StackSettings = Union[Settings, DpdkSettings]


@dataclass(frozen=True)
class Axis:
    """One swept setting: its replay option, Settings (or DpdkSettings) field and values in the order given."""
    option: str
    field: str
    values: Tuple


@dataclass(frozen=True)
class SweepTask:
    """One replay: combination ``point`` on capture ``capture``."""
    point: int
    capture: int
    path: str
    settings: StackSettings


def combinations(base: StackSettings, axes: Sequence[Axis], explicit_ipv4_max_size: Optional[int] = None
                 ) -> List[Tuple[Dict[str, object], StackSettings]]:
    """Every combination of the axes' values (first axis slowest), as (the swept
    values by field, the full Settings, or DpdkSettings for the DPDK stack).
    Sweeping gro_max_size moves gro_ipv4_max_size with it unless that was given
    (netif_set_gro_max_size).  ValueError for a combination the engine refuses."""
    out = []
    for values in itertools.product(*(axis.values for axis in axes)):
        point = {axis.field: value for axis, value in zip(axes, values)}
        changes = dict(point)
        if "gro_max_size" in point and "gro_ipv4_max_size" not in point:
            changes["gro_ipv4_max_size"] = ipv4_max_size_for(point["gro_max_size"], explicit_ipv4_max_size)
        settings = replace(base, **changes)
        if isinstance(settings, DpdkSettings):
            problem = settings.problem()
            if problem:
                raise ValueError(problem)
        else:
            settings.validate()
        out.append((point, settings))
    return out


# ----------------------------------------------------------------------------
# one replay, measured (runs in a worker)
# ----------------------------------------------------------------------------
def measure_capture(task: SweepTask) -> dict:
    """Replay one capture with one combination's settings; the counts a sweep
    reports, in plain types (they travel between processes and machines).  A
    user-facing error comes back as ``{"error": [exit code, message]}``."""
    try:
        return _measure(task)
    except GrotoolError as exc:
        return {"point": task.point, "capture": task.capture, "error": [exc.exit_code, str(exc)]}


def _measure_dpdk(task: SweepTask) -> dict:
    """One capture through the DPDK model: the same counts as _measure, no latency
    (the model has no clock), the rx bursts as polls."""
    from .dpdk.engine import simulate
    from .oracle import read_input

    settings = task.settings
    frames, _stamps, _info = read_input(task.path)
    packets = simulate(frames, settings)
    segs_hist = Counter(len(p.covers) for p in packets)
    if sum(s * n for s, n in segs_hist.items()) != len(frames):
        raise RuntimeError(f"accounting error: {len(frames)} frames in, {len(packets)} packets out")
    return {
        "point": task.point, "capture": task.capture, "error": None,
        "frames": len(frames), "packets_out": len(packets), "polls": -(-len(frames) // settings.burst),
        "segs": dict(segs_hist), "bytes": dict(Counter(len(p.data) for p in packets)),
        "reasons": dict(Counter(p.reason for p in packets)),
        "latencies": None, "unmeasured": None, "truncated": None,
    }


def _measure(task: SweepTask) -> dict:
    from .io.capture import CaptureReader

    if isinstance(task.settings, DpdkSettings):
        return _measure_dpdk(task)
    settings = task.settings
    segs_hist: Counter = Counter()
    bytes_hist: Counter = Counter()
    reasons: Counter = Counter()
    latencies = array("q")
    arrivals = array("q")
    unmeasured = 0
    timed = settings.device == "nic"

    with CaptureReader(task.path, any_linktype=True, tolerate_truncation=True) as reader:
        linktype = reader.linktype if reader.linktype is not None else 1
        engine = Engine(linktype, settings)
        known: Dict[int, int] = {}

        def take(out) -> None:
            nonlocal unmeasured
            for d in out:
                segs_hist[d.segs] += 1
                bytes_hist[d.frame_len] += 1
                reasons[d.reason] += 1
                at = d.delivered_ns
                if at is None:
                    unmeasured += d.segs
                    continue
                for index in d.indices:
                    latencies.append(at - arrivals[index])

        records = reader.records_with_interface()
        for ts, data, wirelen, ifid in records:
            fcs = known.get(ifid)
            if fcs is None:
                # as grotool.replay: per interface link type, FCS stripped before GRO
                info = reader.interfaces[ifid] if ifid < len(reader.interfaces) else {}
                lt = info.get("linktype", linktype)
                if lt != linktype:
                    engine.interface_linktypes[ifid] = lt
                fcs = known[ifid] = info.get("fcs_len", reader.fcs_len) if info else reader.fcs_len
            if fcs and len(data) >= fcs and wirelen >= len(data):
                data = data[:-fcs]
                wirelen -= fcs
            arrivals.append(ts)
            # a reader's timestamp: in range; a packet the capture marks as sent is the engine's to place
            if records.outbound:
                out = engine.receive_sent(ts, data, wirelen, ifid)
            else:
                out = engine.receive_record(ts, data, wirelen, ifid)
            if out:
                take(out)
                out.clear()
        take(engine.finish())
        truncation = reader.truncation

    frames = engine.stats.frames
    packets_out = sum(segs_hist.values())
    if sum(s * n for s, n in segs_hist.items()) != frames:
        raise RuntimeError(f"accounting error: {frames} frames in, {packets_out} packets out")
    return {
        "point": task.point, "capture": task.capture, "error": None,
        "frames": frames, "packets_out": packets_out, "polls": engine.stats.polls,
        "segs": dict(segs_hist), "bytes": dict(bytes_hist), "reasons": dict(reasons),
        "latencies": sorted(latencies) if timed else None,
        "unmeasured": unmeasured if timed else None,
        "truncated": truncation,
    }


# ----------------------------------------------------------------------------
# summaries
# ----------------------------------------------------------------------------
def nearest_rank(sorted_values: Sequence[int], p: float) -> int:
    """The p-th percentile by nearest rank: the value at rank ceil(p/100 * n)."""
    n = len(sorted_values)
    return sorted_values[max(1, math.ceil(p * n / 100)) - 1]


def _hist_summary(hist: Dict[int, int]) -> dict:
    """mean, p50/p90/p99 (nearest rank) and max of a value -> count histogram."""
    total = sum(hist.values())
    if not total:
        return {"mean": 0.0, **{f"p{p}": 0 for p in PERCENTILES}, "max": 0}
    values = sorted(hist)
    summary = {"mean": round(sum(v * n for v, n in hist.items()) / total, 4)}
    for p in PERCENTILES:
        rank = max(1, math.ceil(p * total / 100))
        seen = 0
        for v in values:
            seen += hist[v]
            if seen >= rank:
                summary[f"p{p}"] = v
                break
    summary["max"] = values[-1]
    return summary


def latency_summary(sorted_ns: Sequence[int]) -> dict:
    n = len(sorted_ns)
    if not n:
        return {"segments": 0, "mean": 0.0, "median": 0, "p90": 0, "p99": 0, "max": 0}
    return {"segments": n, "mean": round(sum(sorted_ns) / n, 1), "median": nearest_rank(sorted_ns, 50),
            "p90": nearest_rank(sorted_ns, 90), "p99": nearest_rank(sorted_ns, 99), "max": sorted_ns[-1]}


def _merge(hists) -> Dict[int, int]:
    total: Counter = Counter()
    for h in hists:
        total.update(h)
    return dict(total)


def _reason_mix(reasons: Dict[str, int]) -> Dict[str, int]:
    return dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))


def _json_value(value):
    return value.hex() if isinstance(value, bytes) else list(value) if isinstance(value, tuple) else value


def _ratio(frames: int, packets: int) -> float:
    return round(frames / packets, 4) if packets else 0.0


def run_sweep(paths: Sequence[str], base: StackSettings, axes: Sequence[Axis], executor,
              explicit_ipv4_max_size: Optional[int] = None,
              progress: Optional[Callable[[int, int], None]] = None) -> dict:
    """Replay every capture under every combination on ``executor``; the
    ``grotool.sweep/1`` document (docs/sweep.md).  ``progress(done, total)``
    is called as replays complete (grotool.executor); it changes nothing in
    the document."""
    points = combinations(base, axes, explicit_ipv4_max_size)
    tasks = [SweepTask(p, c, path, settings)
             for p, (_, settings) in enumerate(points) for c, path in enumerate(paths)]
    measures = executor.map(measure_capture, tasks, progress=progress)
    by_task = {(m["point"], m["capture"]): m for m in measures}
    for task in tasks:      # the first error in task order, whichever finished first
        m = by_task[task.point, task.capture]
        if m["error"]:
            code, message = m["error"]
            error = {3: InputError, 4: EnvironmentProblem}.get(code, GrotoolError)(message)
            error.exit_code = code
            raise error
    from .check import stack_settings_to_args

    results = []
    for p, (point, settings) in enumerate(points):
        ms = [by_task[p, c] for c in range(len(paths))]
        frames = sum(m["frames"] for m in ms)
        packets_out = sum(m["packets_out"] for m in ms)
        segs = _merge(m["segs"] for m in ms)
        timed = isinstance(settings, Settings) and settings.device == "nic"
        latency = None
        if timed:
            latency = latency_summary(sorted(itertools.chain.from_iterable(m["latencies"] for m in ms)))
            latency["unmeasured_segments"] = sum(m["unmeasured"] for m in ms)
        captures = []
        for path, m in zip(paths, ms):
            entry = {"path": path, "packets_in": m["frames"], "packets_out": m["packets_out"],
                     "coalescing_ratio": _ratio(m["frames"], m["packets_out"])}
            if timed:
                lat = latency_summary(m["latencies"])
                entry["added_latency_ns"] = {k: lat[k] for k in ("median", "p99", "max")}
            captures.append(entry)
        results.append({
            "setting": {field: _json_value(value) for field, value in point.items()},
            "replay_args": stack_settings_to_args(settings),
            "packets_in": frames,
            "packets_out": packets_out,
            "super_packets": sum(n for s, n in segs.items() if s > 1),
            "coalescing_ratio": _ratio(frames, packets_out),
            "polls": sum(m["polls"] for m in ms),
            "segments_per_packet": _hist_summary(segs),
            "bytes_per_packet": _hist_summary(_merge(m["bytes"] for m in ms)),
            "flush_reasons": _reason_mix(_merge(m["reasons"] for m in ms)),
            "added_latency_ns": latency,
            "captures": captures,
        })
    first = [by_task[0, c] for c in range(len(paths))] if points else []
    return {
        "schema": SCHEMA,
        "grotool_version": __version__,
        "inputs": [{"path": path, "packets": m["frames"], "truncated": m["truncated"]}
                   for path, m in zip(paths, first)],
        "stack": "dpdk" if isinstance(base, DpdkSettings) else "linux",
        "base_settings": base.as_json() if isinstance(base, DpdkSettings) else base.as_dict(),
        "axes": [{"option": a.option, "field": a.field, "values": [_json_value(v) for v in a.values]}
                 for a in axes],
        "results": results,
    }


# ----------------------------------------------------------------------------
# picture (the 'plot' extra)
# ----------------------------------------------------------------------------
def setting_label(result: dict, axes: Sequence[dict]) -> str:
    return " ".join(f"{a['option'].lstrip('-')}={_label_value(result['setting'][a['field']])}" for a in axes) \
        or "base"


def _label_value(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def render_plot(doc: dict, path: str) -> None:
    """Four panels over the combinations: coalescing ratio, added latency
    (median, p99, max), segments per packet, flush-reason mix."""
    from .report.plot import _colormap, _save, require_matplotlib

    require_matplotlib()
    import matplotlib.pyplot as plt

    results = doc["results"]
    labels = [setting_label(r, doc["axes"]) for r in results]
    xs = list(range(len(results)))
    fig, axes = plt.subplots(4, 1, figsize=(max(10, 0.55 * len(results) + 4), 16), sharex=True)
    ax_ratio, ax_lat, ax_segs, ax_reason = axes
    fig.suptitle(f"grotool sweep: {len(doc['inputs'])} capture(s), {len(results)} settings",
                 fontsize=14, fontweight="bold")

    ax_ratio.bar(xs, [r["coalescing_ratio"] for r in results], color="tab:green")
    ax_ratio.set_ylabel("frames in / packets out")
    ax_ratio.set_title("Coalescing ratio", loc="left")

    if all(r["added_latency_ns"] for r in results):
        for key, style in (("median", "o-"), ("p99", "s--"), ("max", "^:")):
            ax_lat.plot(xs, [r["added_latency_ns"][key] / 1000 for r in results], style, label=key)
        ax_lat.set_ylabel("µs")
        ax_lat.legend(loc="upper left", fontsize=8)
        ax_lat.set_title("Added latency per segment (arrival to delivery, simulated NAPI)", loc="left")
    else:
        where = "the DPDK stack" if doc.get("stack") == "dpdk" else "the veth device"
        ax_lat.text(0.5, 0.5, f"latency not defined for {where}", ha="center", va="center",
                    transform=ax_lat.transAxes)

    for key, style in (("p50", "o-"), ("p99", "s--"), ("max", "^:")):
        ax_segs.plot(xs, [r["segments_per_packet"][key] for r in results], style, label=key)
    ax_segs.set_ylabel("segments")
    ax_segs.legend(loc="upper left", fontsize=8)
    ax_segs.set_title("Segments per delivered packet", loc="left")

    reasons = sorted({name for r in results for name in r["flush_reasons"]},
                     key=lambda name: (-sum(r["flush_reasons"].get(name, 0) for r in results), name))
    cmap = _colormap(len(reasons))
    bottoms = [0.0] * len(results)
    for k, name in enumerate(reasons):
        shares = [r["flush_reasons"].get(name, 0) / (r["packets_out"] or 1) for r in results]
        ax_reason.bar(xs, shares, bottom=bottoms, color=cmap(k), label=name)
        bottoms = [b + s for b, s in zip(bottoms, shares)]
    ax_reason.set_ylabel("share of packets")
    ax_reason.set_title("Flush-reason mix", loc="left")
    ax_reason.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7)
    ax_reason.set_xticks(xs)
    ax_reason.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    _save(fig, plt, path)
