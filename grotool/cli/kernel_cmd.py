"""`grotool kernel`: a capture through the real kernel's GRO (veth in a private
network namespace, or a VM running another kernel)."""

from __future__ import annotations

import sys

import click

from ..errors import EXIT_ENVIRONMENT
from . import EXIT_CODES_HELP, _check_outputs, _parse_rss_key, user_errors


def _local_tcp_values(ctx, param, values):
    """--local-tcp values parsed (A:P>B:P or B:P); a bad one is a usage error (exit 2)."""
    from ..oracle.hoststate import parse_local_tcp

    try:
        return tuple(parse_local_tcp(v) for v in values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command("kernel", epilog=EXIT_CODES_HELP)
@click.argument("input_path", metavar="INPUT")
@click.argument("output_path", metavar="[OUTPUT]", required=False)
@click.option("--json", "json_path", metavar="FILE", default=None,
              help="Sidecar: per packet gso_type/gso_size/gso_segs and the input frames it covers; batches; drops.")
@click.option("--csum", type=click.Choice(["auto", "fix", "trust", "verify"]), default="auto", show_default=True,
              help="auto: a TCP/UDP checksum holding the pseudo-header seed (sender offload) is recomputed, "
                   "as replay's auto takes it as valid; other frames as they are, so bad ones stay bad; "
                   "fix: recompute every IPv4/TCP/UDP checksum; trust: TCP/UDP frames injected as "
                   "CHECKSUM_PARTIAL (vnet NEEDS_CSUM); verify: as they are.")
@click.option("--udp-gro-forwarding", is_flag=True,
              help="ethtool rx-udp-gro-forwarding on: UDP GRO for datagrams with no local socket.")
@click.option("--rx-gro-list", is_flag=True,
              help="ethtool rx-gro-list on: fraglist GRO for UDP without a UDP_GRO socket and for TCP flows "
                   "with no local established socket.")
@click.option("--udp-gro-socket", "udp_gro_sockets", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="A UDP socket with UDP_GRO on PORT (any address, IPv4 and IPv6). Repeatable.")
@click.option("--vxlan-port", "vxlan_ports", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="A VXLAN device listening on PORT (e.g. 4789). Repeatable.")
@click.option("--geneve-port", "geneve_ports", type=click.IntRange(1, 65535), multiple=True, metavar="PORT",
              help="A GENEVE device listening on PORT; exit 4 on a kernel without GENEVE. Repeatable.")
@click.option("--local-tcp", "local_tcp", multiple=True, metavar="A:P>B:P|B:P", callback=_local_tcp_values,
              help="The TCP flow A:P>B:P (IPv6 in brackets) ends at a local established socket; B:P: every "
                   "flow to B:P in the capture does. Decides TCP fraglist GRO. Repeatable.")
@click.option("--udp-gro", type=click.Choice(["off", "forward", "fraglist"]), default=None, hidden=True,
              help="Deprecated: forward = --udp-gro-forwarding, fraglist = --rx-gro-list.")
@click.option("--gro-max-size", type=click.IntRange(0, 524280), default=None,
              help="ip link gro_max_size of the receiving veth (IPv6; above 65536 is BIG TCP) [default: the "
                   "device's, 65536]. At most 65536 sets gro_ipv4_max_size too, as in replay.")
@click.option("--gro-ipv4-max-size", type=click.IntRange(0, 524280), default=None,
              help="ip link gro_ipv4_max_size of the receiving veth (Linux 6.3+; exit 4 on an older kernel).")
@click.option("--batch", type=click.IntRange(1, 64), default=64, show_default=True,
              help="Frames per NAPI poll (at most the budget, 64).")
@click.option("--max-seconds", type=click.FloatRange(1, 86400), default=300, show_default=True,
              help="Bound on the whole run.")
@click.option("--rss", is_flag=True,
              help="Give each frame the RSS hash grotool computes (Toeplitz of the 4-tuple; 2-tuple for other IP "
                   "and fragments; 0 for non-IP), so the kernel spreads flows over its 8 GRO buckets as on a NIC "
                   "(an eBPF program sets skb->hash; Linux 6.6+). Compare with replay --device veth --rss.")
@click.option("--rss-key", "rss_key_hex", default=None, metavar="HEX",
              help="With --rss: the Toeplitz key in hex (default: the common 40-byte key).")
@click.option("--vm", "vm_image", metavar="IMAGE", default=None,
              help="Replay in a VM booted with another kernel (qemu; no root needed): debian:6.1, debian:6.12 "
                   "(downloaded once into the cache), or a vmlinuz path with --vm-modules. See docs/kernel-vm.md.")
@click.option("--vm-modules", "vm_modules", metavar="DIR", default=None,
              help="With --vm VMLINUZ: that kernel's /lib/modules/RELEASE directory.")
@click.option("--vm-boot-timeout", type=click.FloatRange(5, 3600), default=180, show_default=True,
              help="With --vm: seconds the guest may take to come up.")
@click.option("--quiet", "-q", is_flag=True)
@user_errors
def kernel(input_path, output_path, json_path, csum, udp_gro_forwarding, rx_gro_list, udp_gro_sockets, vxlan_ports,
           geneve_ports, local_tcp, udp_gro, gro_max_size, gro_ipv4_max_size, batch, max_seconds, rss, rss_key_hex,
           vm_image, vm_modules, vm_boot_timeout, quiet):
    """Replay INPUT through the real kernel's GRO (veth in a private network
    namespace; root) and write what it delivered to OUTPUT.  The host options
    create what they describe inside the namespace.  With --vm IMAGE, the same
    happens inside a VM running that kernel."""
    from ..oracle import HostState, run_kernel_replay

    if output_path == "-" and json_path == "-":
        raise click.UsageError("OUTPUT and --json cannot both be standard output")
    _check_outputs([input_path], **{"output capture": output_path, "--json": json_path})
    if udp_gro is not None:
        click.echo("grotool: warning: --udp-gro is deprecated: use --udp-gro-forwarding (forward) or "
                   "--rx-gro-list (fraglist)", err=True)
    try:
        host = HostState.build(udp_gro_forwarding=udp_gro_forwarding, rx_gro_list=rx_gro_list,
                               udp_gro_sockets=udp_gro_sockets, vxlan_ports=vxlan_ports,
                               geneve_ports=geneve_ports, local_tcp=local_tcp, udp_gro=udp_gro,
                               gro_max_size=gro_max_size, gro_ipv4_max_size=gro_ipv4_max_size)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if rss_key_hex is not None and not rss:
        raise click.UsageError("--rss-key needs --rss")
    rss_key = _parse_rss_key(None, None, rss_key_hex) if rss else None
    if vm_modules and not vm_image:
        raise click.UsageError("--vm-modules needs --vm")
    if vm_image:
        from ..oracle import read_input
        from ..oracle.vm import VmSession

        read_input(input_path)            # a bad input fails before the boot, not after it

        log = None if quiet else (lambda msg: click.echo(f"grotool: {msg}", err=True))
        with VmSession(vm_image, modules=vm_modules, boot_timeout=vm_boot_timeout, log=log) as vm:
            run = run_kernel_replay(input_path, output_path, json_path, csum=csum, host=host, batch=batch,
                                    max_seconds=max_seconds, rss_key=rss_key, vm=vm)
    else:
        run = run_kernel_replay(input_path, output_path, json_path, csum=csum, host=host, batch=batch,
                                max_seconds=max_seconds, rss_key=rss_key)
    for w in run.warnings:
        click.echo(f"grotool: warning: {w}", err=True)
    if not quiet and run.hint:
        click.echo(f"grotool: hint: {run.hint}", err=True)
    if not quiet:
        frames = sum(b.frames for b in run.batches)
        supers = sum(1 for p in run.packets if p.segs > 1)
        drops = sum(run.drops.values())
        click.echo(f"kernel {run.settings.get('kernel')}: {frames} frames in, {len(run.packets)} packets out, "
                   f"{supers} super-packets, {len(run.batches)} polls, {drops} drops", err=True)
    if not run.reliable:
        click.echo("grotool: error: the kernel run was unreliable (drops or unaccounted segments); see warnings",
                   err=True)
        sys.exit(EXIT_ENVIRONMENT)
