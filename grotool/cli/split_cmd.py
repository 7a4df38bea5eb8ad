"""`grotool split`: re-segment super-packets as Linux GSO would."""

from __future__ import annotations

import click

from . import _check_outputs, _warn_invalid_timestamps, _write_json, user_errors


@click.command("split")
@click.argument("input_path", metavar="INPUT")
@click.argument("output_path", metavar="[OUTPUT]", required=False)
@click.option("--mss", type=click.IntRange(1, 65535), default=None,
              help="gso_size for super-packets when no sidecar gives one (default: the flow's largest "
                   "ordinary segment, else what fills a 1500-byte MTU).")
@click.option("--segs", "segs_path", metavar="FILE", default=None,
              help="Per-packet sidecar of INPUT (replay --packets JSON lines, or kernel --json): which records "
                   "are super-packets, their gso_size and gso_type.")
@click.option("--no-sidecar", is_flag=True, help="Do not look for a sidecar next to INPUT.")
@click.option("--mtu", type=click.IntRange(68, 1 << 20), default=None,
              help="Without a sidecar: the link MTU; a frame whose packet is longer is a super-packet "
                   "[default: the MTU the capture implies, at least 1500; docs/mtu.md].")
@click.option("--json", "json_path", metavar="FILE", default=None, help="Write the split counts as JSON ('-': stdout).")
@click.option("--quiet", "-q", is_flag=True, help="No summary line.")
@user_errors
def split(input_path, output_path, mss, segs_path, no_sidecar, mtu, json_path, quiet):
    """Re-segment the super-packets of INPUT as Linux GSO would (TCP, UDP GSO,
    fraglist, IP-in-IP, GRE, VXLAN, GENEVE) and write every frame to OUTPUT
    (pcap, '-' for stdout; without OUTPUT only the counts are reported).

    A frame is a super-packet when the sidecar says it covers 2+ segments, or,
    without a sidecar, when its packet (the innermost IP packet: link header,
    VLAN tags and tunnel headers counted off) is longer than the link MTU
    (--mtu, else the MTU the capture implies).  Other frames pass through
    unchanged."""
    from ..split import split_capture

    if output_path == "-" and json_path == "-":
        raise click.UsageError("OUTPUT and --json cannot both be standard output")
    _check_outputs([input_path, segs_path], **{"output capture": output_path, "--json": json_path})
    result = split_capture(input_path, output_path, mss=mss, segs_path=segs_path, auto_sidecar=not no_sidecar,
                           mtu=mtu)
    if json_path:
        _write_json({"schema": "grotool.split/1", **result.as_dict()}, json_path)
    for note in result.ignored:
        click.echo(f"grotool: warning: {note}", err=True)
    _warn_invalid_timestamps({"path": input_path, "invalid_timestamps": result.invalid_timestamps,
                              "first_invalid_timestamp": result.first_invalid_timestamp})
    for reason, n in sorted(result.not_segmentable.items()):
        click.echo(f"grotool: warning: {n} super-packets not split (written unchanged): {reason}", err=True)
    if not quiet:
        source = f" (gso_size from {result.sidecar})" if result.sidecar else ""
        click.echo(f"split: {result.frames_in} frames in, {result.frames_out} out, {result.super_packets} "
                   f"super-packets split, {result.passed} passed unchanged{source}", err=True)
