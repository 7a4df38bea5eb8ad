"""`grotool check`: replay captures against their goldens (CI regression)."""

from __future__ import annotations

import os
import sys

from typing import TYPE_CHECKING

import click

from ..errors import EXIT_BAD_INPUT, EXIT_DIFFERENT, EXIT_OK
from . import user_errors
from .dpdkopts import DPDK_KEYS, dpdk_options, dpdk_settings
from .options import explicit_settings, replay_settings_options, settings_from_options
from .progress import ProgressBar, RunsBar, input_size, progress_wanted, reader_position

if TYPE_CHECKING:
    from rich.console import Console

_STYLE = {"pass": "green", "unchanged": "green", "written": "cyan", "updated": "cyan",
          "fail": "bold red", "kept": "bold red", "error": "bold magenta", "no golden": "bold magenta"}


@click.command("check")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True)
@click.option("--update", is_flag=True,
              help="Write missing goldens and rewrite the others from this replay (after reviewing the change). "
                   "Replay options given here are recorded in every golden written; without any, an existing "
                   "golden keeps its settings.")
@click.option("--from-kernel", is_flag=True,
              help="With --update: take the expectation from the real kernel (grotool kernel; root, "
                   "--device veth settings) and record that origin.")
@click.option("--from-library", is_flag=True,
              help="With --update and --stack dpdk settings: take the expectation from the real librte_gro "
                   "(grotool dpdk: Debian's DPDK 22.11, fetched and a harness built on first use; no root) "
                   "and record that origin.")
@click.option("--vm", "vm_image", metavar="IMAGE", default=None,
              help="With --from-kernel: take the expectation from the kernel IMAGE booted in a VM (grotool kernel "
                   "--vm: debian:6.1, debian:6.12 or a vmlinuz with --vm-modules; no root), booted once for every "
                   "capture; the goldens record that kernel's --kernel profile.")
@click.option("--vm-modules", metavar="DIR", default=None, help="With --vm VMLINUZ: its /lib/modules/RELEASE.")
@click.option("--junit", "junit_path", metavar="FILE", default=None, help="Write a JUnit XML report.")
@click.option("--max-differences", type=click.IntRange(1, 1 << 20), default=10, show_default=True,
              help="Differences explained per capture.")
@replay_settings_options
@click.option("--stack", type=click.Choice(["linux", "dpdk"]), default="linux", show_default=True,
              help="With --update: whose GRO the goldens record, Linux's or DPDK's lib/gro (22.11) with the "
                   "--dpdk-* and --burst knobs (docs/dpdk.md); recorded in each golden, so a check replays "
                   "under the same stack.")
@dpdk_options
@click.option("--quiet", "-q", is_flag=True, help="Only the summary line and the exit code (no progress bar).")
@click.option("--jobs", "-j", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Check captures in this many local processes.")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Check captures on a Dask distributed cluster (needs the 'dask' extra; workers read the "
                   "captures and goldens at the same paths).")
@click.pass_context
@user_errors
def check(ctx, paths, update, from_kernel, from_library, vm_image, vm_modules, junit_path, max_differences, quiet,
          jobs, scheduler, stack, **options):
    """Replay each capture (files or folders) with its golden's settings and
    compare with the golden (x.pcap + x.gro).

    Exit 0 when all pass, 1 when any differs, 3 when a capture or golden is
    unreadable or missing.

    On a terminal, a progress bar on standard error shows the frames replayed
    (one process) or the captures completed (--jobs, --scheduler); never with
    -q.  Results, goldens and the JUnit report are the same either way."""
    from ..check import describe_difference, find_targets

    given = explicit_settings(ctx)
    knobs = [name for name in DPDK_KEYS + ("stack",) if _given(ctx, name)]
    if (given or knobs) and not update:
        raise click.UsageError("replay options are for --update; a check replays with each golden's settings")
    if from_kernel and not update:
        raise click.UsageError("--from-kernel goes with --update")
    if from_library and not update:
        raise click.UsageError("--from-library goes with --update")
    if from_kernel and from_library:
        raise click.UsageError("--from-kernel (Linux) and --from-library (DPDK) are exclusive")
    if stack == "dpdk":
        linux_only = sorted(name for name in given if name != "vxlan_ports")
        if linux_only:
            raise click.UsageError(f"--{linux_only[0].replace('_', '-')} is a Linux replay option: with --stack dpdk "
                                   "only the --dpdk-* knobs, --burst and --vxlan-port apply")
        if from_kernel:
            raise click.UsageError("--from-kernel takes Linux's expectation: with --stack dpdk, --from-library "
                                   "takes the real librte_gro's")
        settings = dpdk_settings(options)
        given = given + knobs
    else:
        if [name for name in knobs if name != "stack"]:
            raise click.UsageError("the --dpdk-* knobs and --burst are DPDK's: add --stack dpdk")
        if from_library and "stack" in knobs:
            raise click.UsageError("--from-library takes the real librte_gro's expectation: it goes with "
                                   "--stack dpdk")
        for name in DPDK_KEYS:
            options.pop(name)
        settings = settings_from_options(options)
        given = given + knobs
    if vm_image and not from_kernel:
        raise click.UsageError("--vm goes with --update --from-kernel")
    if vm_image and (jobs > 1 or scheduler):
        raise click.UsageError("--vm checks captures one after another in one guest (no --jobs, --scheduler)")
    if from_kernel and given:
        from ..check import kernel_settings_problem

        problem = kernel_settings_problem(settings)
        if problem:
            raise click.UsageError(problem)
    targets = find_targets(paths)
    if update:
        # a golden that is its capture (x.gro a link to x.pcap) would be written over it
        from ..io.safe_output import check_outputs

        with_capture = [t for t in targets if t.capture and not t.problem]
        check_outputs([t.golden for t in with_capture], ["golden"] * len(with_capture),
                      [t.capture for t in with_capture])
    from rich.console import Console

    console = Console(highlight=False)
    if jobs > 1 and scheduler:
        raise click.UsageError("--jobs and --scheduler are exclusive")
    if jobs > 1 or scheduler:
        from ..check import check_all
        from ..executor import make_executor

        with make_executor(jobs, scheduler) as executor:
            # completed captures out of all, counted here from the executor's futures
            bar = RunsBar(progress_wanted(quiet), len(targets), "check", unit="captures")
            try:
                results = check_all(targets, executor, update=update, settings=settings if given else None,
                                    from_kernel=from_kernel, progress=bar.update if bar.enabled else None,
                                    from_library=from_library)
            finally:
                bar.close()
        _finish(console, results, update, junit_path, max_differences, quiet, describe_difference)
        return
    vm = None
    if vm_image:
        from ..oracle.vm import VmSession

        vm = VmSession(vm_image, modules=vm_modules, log=None if quiet else _log_line)
        vm.__enter__()
    try:
        _check_here(console, targets, update, settings if given else None, from_kernel, vm, junit_path,
                    max_differences, quiet, from_library)
    finally:
        if vm is not None:
            vm.close()


def _given(ctx: click.Context, name: str) -> bool:
    from click.core import ParameterSource

    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


def _log_line(text: str) -> None:
    click.echo(f"grotool: {text}", err=True)


def _check_here(console, targets, update, settings, from_kernel, vm, junit_path, max_differences, quiet,
                from_library=False) -> None:
    """check in this process, one capture after another."""
    from ..check import check_target, describe_difference

    sizes = [input_size(t.capture) if t.capture else 0 for t in targets]
    bar = ProgressBar(progress_wanted(quiet), sum(s or 0 for s in sizes) or None, "check")
    results = []
    frames_done = bytes_done = 0
    try:
        for target, size in zip(targets, sizes):
            bar.next_input(frames_done, bytes_done, f"check {os.path.basename(target.capture or target.golden)}")
            progress = (lambda frames, reader: bar.update(frames, reader_position(reader))) if bar.enabled else None
            result = check_target(target, update=update, settings=settings, from_kernel=from_kernel,
                                  progress=progress, vm=vm, from_library=from_library)
            results.append(result)
            frames_done += result.frames
            bytes_done += size or 0
    finally:
        bar.close()
    _finish(console, results, update, junit_path, max_differences, quiet, describe_difference)


def _finish(console: Console, results, update: bool, junit_path, max_differences: int, quiet: bool,
            describe_difference) -> None:
    from ..check import junit_xml

    if junit_path:
        _write_bytes(junit_xml(results, max_differences), junit_path)
    if not quiet:
        _render(console, results, max_differences, describe_difference)
    failed = sum(1 for r in results if r.failed)
    broken = sum(1 for r in results if r.broken)
    passed = len(results) - failed - broken
    verb = "ok" if update else "passed"
    summary = f"{len(results)} capture{'s' if len(results) != 1 else ''}: {passed} {verb}, {failed} failed, " \
              f"{broken} unreadable or missing"
    click.echo(summary, err=quiet)
    sys.exit(EXIT_BAD_INPUT if broken else EXIT_DIFFERENT if failed else EXIT_OK)


def _render(console: Console, results, max_differences: int, describe_difference) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="grotool check", header_style="bold")
    table.add_column("capture", overflow="fold")
    table.add_column("origin", overflow="fold")
    table.add_column("packets", justify="right")
    table.add_column("result", overflow="fold")
    for r in results:
        status = r.status
        if r.failed:
            status += f" ({len(r.differences)} difference{'s' if len(r.differences) != 1 else ''})"
        origin = (r.origin or "-").split(" --")[0].replace("grotool ", "")
        table.add_row(r.capture or r.golden, origin, str(r.packets) if r.packets else "-",
                      Text(status, style=_STYLE.get(r.status, "")))
    console.print(table)
    for r in results:
        if r.broken:
            console.print(Text(f"{r.capture or r.golden}: {r.message}", style="magenta"), soft_wrap=True)
            continue
        if not r.differences and not r.message:
            continue
        if not r.failed and not r.differences:
            continue
        console.print(Text(f"{r.capture}: {r.status} against {r.golden} (origin {r.origin})", style="bold"), soft_wrap=True)
        if r.message:
            console.print(Text(f"  {r.message}"), soft_wrap=True)
        if r.cause:
            console.print(Text(f"  {r.cause}"), soft_wrap=True)
        for d in r.differences[:max_differences]:
            for line in describe_difference(r.capture, d, r.settings_args):
                console.print(Text("  " + line), soft_wrap=True)
        if len(r.differences) > max_differences:
            console.print(f"  ... {len(r.differences) - max_differences} more differences (--max-differences)")


def _write_bytes(data: bytes, path: str) -> None:
    """The JUnit report, through grotool's safe opener (an OutputError, exit 5, on failure)."""
    from ..io.safe_output import open_output

    with open_output(path, "--junit") as out:
        out.write(data)
