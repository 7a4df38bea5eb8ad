"""`grotool sweep`: every combination of some replay settings, measured."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_USAGE
from . import EXIT_CODES_HELP, make_console, user_errors
from .dpdkopts import DPDK_KEYS, dpdk_options, dpdk_settings
from .options import SETTINGS_FIELDS, explicit_settings, replay_settings_options, settings_from_options

# the DPDK knobs a sweep varies (--stack dpdk): option name -> DpdkSettings field
DPDK_AXES = {"dpdk_mode": "mode", "burst": "burst", "dpdk_flush_every": "flush_every",
             "dpdk_max_flows": "max_flows", "dpdk_max_items": "max_items"}


class SetSyntaxError(Exception):
    pass


def _sweepable_params() -> dict:
    """Replay's settings options and DPDK knobs by every name they answer to
    (--rx-usecs, rx-usecs, --no-gro, burst ...)."""
    from . import replay

    by_name = {}
    for param in replay.params:
        if isinstance(param, click.Option) and (param.name in SETTINGS_FIELDS or param.name in DPDK_KEYS):
            for opt in param.opts:
                by_name[opt] = param
                by_name[opt.lstrip("-")] = param
    return by_name


def parse_set(text: str, ctx: click.Context, stack: str = "linux"):
    """``NAME=V1,V2,...`` -> Axis; SetSyntaxError with a one-line reason.  With
    ``stack`` "dpdk" the axes are DPDK's knobs, else Linux's replay settings."""
    from ..sweep import Axis

    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise SetSyntaxError(f"--set {text!r}: expected NAME=V1,V2,... (e.g. rx-usecs=8,32)")
    param = _sweepable_params().get(name)
    if param is None:
        raise SetSyntaxError(f"--set {text!r}: {name!r} is not a replay setting (see grotool replay -h)")
    if param.name in DPDK_KEYS and stack != "dpdk":
        raise SetSyntaxError(f"--set {text!r}: {param.opts[0]} is a DPDK knob: add --stack dpdk")
    if param.name == "dpdk_gro_types":
        raise SetSyntaxError(f"--set {text!r}: {param.opts[0]} (a list itself) cannot be swept; give it as a "
                             "fixed option")
    if stack == "dpdk" and param.name not in DPDK_KEYS and param.name != "vxlan_ports":
        raise SetSyntaxError(f"--set {text!r}: {param.opts[0]} is a Linux replay setting: with --stack dpdk the "
                             f"axes are the DPDK knobs ({', '.join(n.replace('_', '-') for n in DPDK_AXES)})")
    if param.multiple:
        raise SetSyntaxError(f"--set {text!r}: {param.opts[0]} is repeatable and cannot be swept; give it as a "
                             "fixed option")
    items = [item.strip() for item in raw.split(",")]
    if not raw.strip() or any(not item for item in items):
        raise SetSyntaxError(f"--set {text!r}: empty value (expected NAME=V1,V2,...)")
    values = []
    for item in items:
        try:
            value = param.type.convert(item, param, ctx)
            if param.callback is not None:
                value = param.callback(ctx, param, value)
        except click.BadParameter as exc:
            raise SetSyntaxError(f"--set {text!r}: {item!r}: {exc.format_message()}") from None
        if param.name == "hz":
            value = int(value)
        if value in values:
            raise SetSyntaxError(f"--set {text!r}: {item!r} given twice")
        values.append(value)
    return Axis(param.opts[0], DPDK_AXES.get(param.name, param.name), tuple(values))


def _usage_error(message: str) -> None:
    click.echo(f"grotool: usage error: {message}", err=True)
    sys.exit(EXIT_USAGE)


@click.command("sweep", epilog=EXIT_CODES_HELP)
@click.argument("paths", metavar="CAPTURE...", nargs=-1, required=True)
@click.option("--set", "sets", multiple=True, metavar="NAME=V1,V2,...",
              help="A replay setting and the values to try (e.g. gro-flush-timeout=0,20000). Repeatable: every "
                   "combination is replayed, the first --set varying slowest.")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Local worker processes.")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Run on a Dask distributed cluster (tcp://host:8786; needs the 'dask' extra). Workers read "
                   "the captures at the same paths.")
@click.option("--json", "json_path", metavar="FILE", default=None,
              help="Write the grotool.sweep/1 document (docs/sweep.md; '-': stdout).")
@click.option("--plot", "plot_path", metavar="FILE", default=None,
              help="Draw ratio, latency, segments and reasons per setting (needs the 'plot' extra).")
@click.option("--quiet", "-q", is_flag=True, help="No table and no progress bar.")
@replay_settings_options
@click.option("--stack", type=click.Choice(["linux", "dpdk"]), default="linux", show_default=True,
              help="Whose GRO: Linux's, or DPDK's lib/gro (22.11) with the --dpdk-* and --burst knobs, which "
                   "--set then sweeps (e.g. burst=8,32 dpdk-mode=light,heavy; docs/sweep.md).")
@dpdk_options
@click.pass_context
@user_errors
def sweep(ctx, paths, sets, jobs, scheduler, json_path, plot_path, quiet, stack, **options):
    """Replay each CAPTURE under every combination of the --set values (the
    other replay options fixed) and report per combination: coalescing ratio,
    super-packet sizes, flush reasons, and the latency GRO adds per segment
    (arrival to delivery in the simulated NAPI model; nic device only).

    Results are the same whether they ran here, in --jobs processes or on a
    Dask cluster (--scheduler).  On a terminal, a progress bar on standard
    error counts the completed runs (captures x settings)."""
    from ..executor import make_executor
    from ..sweep import combinations, run_sweep
    from . import _check_outputs, _write_json
    from .progress import RunsBar, progress_wanted

    if jobs > 1 and scheduler:
        _usage_error("--jobs and --scheduler exclusive: the Dask cluster decides how many workers run")
    if "-" in paths:
        _usage_error("a sweep reads each capture once per setting: give files, not standard input")
    from click.core import ParameterSource

    fixed = set(explicit_settings(ctx))
    explicit_ipv4 = options.get("gro_ipv4_max_size")
    knobs = [name for name in DPDK_KEYS if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]
    if stack == "dpdk":
        linux_only = sorted(name for name in fixed if name != "vxlan_ports")
        if linux_only:
            _usage_error(f"--{linux_only[0].replace('_', '-')} is a Linux replay option: with --stack dpdk only "
                         "the --dpdk-* knobs, --burst and --vxlan-port apply")
        fixed = {DPDK_AXES.get(name, name) for name in knobs}
        base = dpdk_settings(options)
    else:
        if knobs:
            _usage_error("the --dpdk-* knobs and --burst are DPDK's: add --stack dpdk")
        for name in DPDK_KEYS:
            options.pop(name)
        base = settings_from_options(options)
    axes = []
    for text in sets:
        try:
            axis = parse_set(text, ctx, stack)
        except SetSyntaxError as exc:
            _usage_error(str(exc))
        if axis.field in fixed:
            _usage_error(f"--set {text!r}: {axis.option} is also given as a fixed option")
        if any(a.field == axis.field for a in axes):
            _usage_error(f"--set {text!r}: {axis.option} is swept twice")
        axes.append(axis)
    try:
        runs = len(combinations(base, axes, explicit_ipv4)) * len(paths)
    except ValueError as exc:
        _usage_error(f"--set: a combination is not a valid setting: {exc}")
    _check_outputs(paths, **{"--json": json_path, "--plot": plot_path})
    if plot_path:
        from ..report.plot import check_plot_path, require_matplotlib

        require_matplotlib()
        check_plot_path(plot_path)
    # completed runs out of captures x settings, counted here from the executor's futures
    bar = RunsBar(progress_wanted(quiet), runs)
    try:
        with make_executor(jobs, scheduler) as executor:
            doc = run_sweep(list(paths), base, axes, executor, explicit_ipv4,
                            progress=bar.update if bar.enabled else None)
    finally:
        bar.close()
    if json_path:
        _write_json(doc, json_path)
    if plot_path:
        from ..sweep import render_plot

        render_plot(doc, plot_path)
    for item in doc["inputs"]:
        if item["truncated"]:
            click.echo(f"grotool: warning: {item['path']}: last record cut short; the {item['packets']} complete "
                       "records before it were replayed", err=True)
    if not quiet:
        render_table(doc, make_console(stderr=json_path == "-"))


def _us(ns) -> str:
    return f"{ns / 1000:.1f}"


def render_table(doc: dict, console) -> None:
    from rich.table import Table
    from rich.text import Text

    axes = doc["axes"]
    captures = len(doc["inputs"])
    frames = sum(item["packets"] for item in doc["inputs"])
    settings = len(doc["results"])
    table = Table(title=f"grotool sweep: {captures} capture{'s' if captures != 1 else ''}, {frames} frames, "
                        f"{settings} setting{'s' if settings != 1 else ''}", header_style="bold")
    for a in axes:
        table.add_column(a["option"].lstrip("-"), justify="right")
    table.add_column("packets out", justify="right")
    table.add_column("ratio", justify="right")
    table.add_column("segs p50/p99/max", justify="right")
    table.add_column("bytes p50/max", justify="right")
    table.add_column("latency µs med/p99/max", justify="right")
    table.add_column("top flush reasons", overflow="fold")
    for r in doc["results"]:
        segs = r["segments_per_packet"]
        size = r["bytes_per_packet"]
        lat = r["added_latency_ns"]
        latency = f"{_us(lat['median'])}/{_us(lat['p99'])}/{_us(lat['max'])}" if lat else "-"
        total = r["packets_out"] or 1
        reasons = ", ".join(f"{name} {100 * n / total:.0f}%" for name, n in list(r["flush_reasons"].items())[:3])
        cells = [Text(_cell(r["setting"][a["field"]])) for a in axes]
        table.add_row(*cells, str(r["packets_out"]), f"{r['coalescing_ratio']:.2f}",
                      f"{segs['p50']}/{segs['p99']}/{segs['max']}", f"{size['p50']}/{size['max']}",
                      latency, Text(reasons))
    if doc["results"] and doc["results"][0]["added_latency_ns"] is None:
        where = "the DPDK stack" if doc.get("stack") == "dpdk" else "the veth device"
        table.caption = f"latency: not defined for {where} (no clock)"
    console.print(table)


def _cell(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)
