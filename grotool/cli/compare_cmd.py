"""`grotool compare`: two captures as GRO results, one capture under two kernel
profiles or two stacks, or a capture through a VM's kernel against grotool."""

from __future__ import annotations

import sys

import click

from ..engine.config import Settings
from . import EXIT_CODES_HELP, _check_outputs, _stderr_console, _write_json, make_console, user_errors
from .dpdkopts import DPDK_KEYS, dpdk_options
from .hostopts import host_options, host_settings


@click.command("compare", epilog=EXIT_CODES_HELP)
@click.argument("path_a", metavar="A")
@click.argument("path_b", metavar="[B]", required=False)
@click.option("--kernel", "kernels", multiple=True, metavar="VERSION",
              help="Given twice (--kernel A --kernel B) with one capture: replay it under both kernel profiles "
                   "and compare the results, naming the kernel history rows that decided differently.")
@click.option("--device", type=click.Choice(["nic", "veth"]), default="nic", show_default=True,
              help="With --kernel: the device model of both replays.")
@click.option("--vm", "vm_image", metavar="IMAGE", default=None,
              help="Compare each capture given (A, and B if given) as the kernel IMAGE booted in a VM delivers it "
                   "(grotool kernel --vm, booted once) with grotool's replay under that kernel's profile "
                   "(--device veth --kernel SERIES); exit 1 when any differs.")
@click.option("--stack", type=click.Choice(["dpdk"]), default=None,
              help="With one capture: replay it through Linux (A; --kernel VERSION once, default 6.18) and "
                   "through DPDK's GRO (B; the --dpdk-* and --burst knobs) and compare (docs/dpdk.md).")
@dpdk_options
@host_options
@click.option("--order", "require_order", is_flag=True, help="Also require the same global delivery order.")
@click.option("--segs-a", "sidecar_a", metavar="FILE", default=None,
              help="Per-packet sidecar of A (grotool kernel --json, or replay --packets).")
@click.option("--segs-b", "sidecar_b", metavar="FILE", default=None, help="Per-packet sidecar of B.")
@click.option("--no-sidecar", is_flag=True, help="Do not look for sidecars next to the captures.")
@click.option("--json", "json_path", metavar="FILE", default=None, help="Write the comparison ('-': stdout).")
@click.option("--max-flows", type=click.IntRange(1, 1 << 30), default=20, show_default=True)
@click.option("--quiet", "-q", is_flag=True, help="No summary, only the exit code.")
@user_errors
def compare(path_a, path_b, kernels, device, vm_image, stack, require_order, sidecar_a, sidecar_b, no_sidecar,
            json_path, max_flows, quiet, **host):
    """Compare two captures A and B as GRO results, flow by flow; or, with
    --kernel A --kernel B, one capture replayed under two kernel profiles.

    Exit 0 when identical, 1 when different, 3 when an input is unreadable."""
    from ..compare import compare_captures
    from .compare_view import render_compare

    if vm_image and (kernels or stack):
        raise click.UsageError("--vm takes the guest's own profile: no --kernel, no --stack")
    if stack:
        _compare_stacks(path_a, path_b, kernels, device, host, require_order, json_path, max_flows, quiet)
        return
    for name in DPDK_KEYS:
        host.pop(name)
    if kernels:
        _compare_kernels(path_a, path_b, kernels, device, host, require_order, json_path, max_flows, quiet)
        return
    if vm_image:
        _compare_vm(vm_image, [p for p in (path_a, path_b) if p is not None], host, require_order, json_path,
                    max_flows, quiet)
        return
    if path_b is None:
        raise click.UsageError("compare takes two captures, or one capture with --kernel A --kernel B")
    _check_outputs([path_a, path_b, sidecar_a, sidecar_b], **{"--json": json_path})
    result = compare_captures(path_a, path_b, require_order=require_order, sidecar_a=sidecar_a,
                              sidecar_b=sidecar_b, auto_sidecar=not no_sidecar)
    if json_path:
        _write_json(result.to_json(), json_path)
    if not quiet:
        console = _stderr_console() if json_path == "-" else make_console()
        render_compare(result, console, max_flows=max_flows)
    sys.exit(0 if result.identical else 1)


def _compare_vm(image, paths, host, require_order, json_path, max_flows, quiet) -> None:
    """compare --vm IMAGE A [B]: each capture through the guest's kernel against grotool."""
    from ..kernel_compare import compare_with_vm
    from ..oracle.vm import VmSession
    from .compare_view import render_compare

    if json_path and len(paths) > 1:
        raise click.UsageError("--json with --vm takes one capture")
    _check_outputs(paths, **{"--json": json_path})
    settings = Settings(device="veth", **host_settings(host))
    identical = True
    with VmSession(image, log=None if quiet else (lambda text: click.echo(f"grotool: {text}", err=True))) as vm:
        for path in paths:
            result = compare_with_vm(path, vm, settings, require_order=require_order)
            identical = identical and result.identical
            if json_path:
                _write_json(result.to_json(), json_path)
            if not quiet:
                render_compare(result, _stderr_console() if json_path == "-" else make_console(), max_flows=max_flows)
    sys.exit(0 if identical else 1)


def _compare_stacks(path, extra, kernels, device, host, require_order, json_path, max_flows, quiet) -> None:
    """compare INPUT --stack dpdk: Linux (A) against DPDK (B)."""
    from ..engine.kernels import cached_profile
    from ..stack_compare import compare_stacks
    from .compare_view import render_compare
    from .dpdkopts import dpdk_settings

    if extra is not None or len(kernels) > 1:
        raise click.UsageError("--stack dpdk takes one capture and at most one --kernel (Linux's side)")
    kernel = kernels[0] if kernels else "6.18"
    try:
        cached_profile(kernel)
    except ValueError as exc:
        raise click.UsageError(f"--kernel: {exc}") from None
    dpdk = dpdk_settings(host)
    _check_outputs([path], **{"--json": json_path})
    settings = Settings(device=device, kernel=kernel, **host_settings(host))
    result = compare_stacks(path, settings, dpdk, require_order=require_order)
    if json_path:
        _write_json(result.to_json(), json_path)
    if not quiet:
        render_compare(result, _stderr_console() if json_path == "-" else make_console(), max_flows=max_flows)
    sys.exit(0 if result.identical else 1)


def _compare_kernels(path, extra, kernels, device, host, require_order, json_path, max_flows, quiet) -> None:
    """compare --kernel A --kernel B INPUT."""
    from ..engine.kernels import BY_ID, cached_profile
    from ..kernel_compare import compare_kernels
    from .compare_view import render_compare

    if len(kernels) != 2 or extra is not None:
        raise click.UsageError("--kernel A --kernel B takes exactly two kernels and one capture")
    for kernel in kernels:
        try:
            cached_profile(kernel)
        except ValueError as exc:
            raise click.UsageError(f"--kernel: {exc}") from None
    _check_outputs([path], **{"--json": json_path})
    settings = Settings(device=device, **host_settings(host))
    comparison = compare_kernels(path, kernels[0], kernels[1], settings, require_order=require_order)
    if json_path:
        _write_json(comparison.to_json(), json_path)
    if not quiet:
        console = _stderr_console() if json_path == "-" else make_console()
        render_compare(comparison.result, console, max_flows=max_flows)
        a, b = comparison.releases
        if comparison.rows_differing:
            console.print(f"rows that differ between Linux {a} and {b}: "
                          + ", ".join(comparison.rows_differing))
        for row_id in comparison.rows_deciding:
            console.print(f"  decided in this capture: {BY_ID[row_id].label()}")
        if not comparison.rows_deciding and not comparison.result.identical:
            console.print("  (no decision in this capture names a row: the difference comes from the rows' "
                          "effect on later packets)")
    sys.exit(0 if comparison.result.identical else 1)
