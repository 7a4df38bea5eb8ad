"""`grotool dpdk` (the real librte_gro as an oracle) and the DPDK stack's knobs,
shared with `replay --stack dpdk`."""

from __future__ import annotations

import click

from . import EXIT_CODES_HELP, _stderr_console, make_console, user_errors
from .dpdkopts import dpdk_options, dpdk_settings, vxlan_port_option


def render_summary(run, console) -> None:
    doc = run.document()["summary"]
    console.print(f"{run.source} (DPDK 22.11, {run.settings.mode} mode, burst {run.settings.burst}): "
                  f"{doc['frames_in']} frames in, {doc['packets_out']} packets out, "
                  f"{doc['merged_packets']} merged packets covering {doc['frames_merged']} frames")
    if doc["reasons"]:
        console.print("reasons: " + ", ".join(f"{k} {v}" for k, v in doc["reasons"].items()))


def replay_dpdk(input_path, output_path, json_path, quiet, options: dict) -> None:
    """`replay --stack dpdk`: the capture through the DPDK model."""
    from ..dpdk.run import run_dpdk

    run = run_dpdk(input_path, output_path, json_path, dpdk_settings(options))
    if not quiet:
        to_stdout = output_path == "-" or json_path == "-"
        render_summary(run, _stderr_console() if to_stdout else make_console())


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("input_path", metavar="INPUT")
@click.argument("output_path", metavar="[OUTPUT]", required=False)
@click.option("--json", "json_path", metavar="FILE", default=None,
              help="Write the sidecar (schema grotool.dpdk/1): per packet the input frames it covers.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
@dpdk_options
@vxlan_port_option
@user_errors
def dpdk(input_path, output_path, json_path, quiet, **options):
    """Replay INPUT through the real librte_gro (Debian's DPDK 22.11, fetched and a
    harness built on first use; no root needed); write the packets it returned, in
    its order, to OUTPUT (pcap, '-' for stdout)."""
    from ..dpdk.run import run_dpdk

    settings = dpdk_settings(options)
    run = run_dpdk(input_path, output_path, json_path, settings, library=True)
    if not quiet:
        to_stdout = output_path == "-" or json_path == "-"
        render_summary(run, _stderr_console() if to_stdout else make_console())
