"""The host-state options shared by `replay` and `kernel`: what the receiving
host had configured, which a capture does not carry."""

from __future__ import annotations

import click

from ..engine.hoststate import parse_local_tcp
from ..engine.layout import LAYOUTS


def _check_local_tcp(_ctx, _param, values):
    for value in values:
        try:
            parse_local_tcp(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return tuple(values)


HOST_OPTIONS = (
    click.option("--udp-gro-forwarding", is_flag=True,
                 help="ethtool rx-udp-gro-forwarding: UDP segment GRO for datagrams no local socket takes."),
    click.option("--rx-gro-list", is_flag=True,
                 help="ethtool rx-gro-list: fraglist GRO for UDP without a UDP_GRO socket and for TCP "
                      "flows no local established socket terminates."),
    click.option("--udp-gro-socket", "udp_gro_sockets", multiple=True, type=click.IntRange(1, 65535),
                 metavar="PORT", help="A local UDP socket with the UDP_GRO option on PORT (repeatable)."),
    click.option("--vxlan-port", "vxlan_ports", multiple=True, type=click.IntRange(1, 65535), metavar="PORT",
                 help="A VXLAN device listening on PORT, usually 4789 (repeatable)."),
    click.option("--geneve-port", "geneve_ports", multiple=True, type=click.IntRange(1, 65535), metavar="PORT",
                 help="A GENEVE device listening on PORT, usually 6081 (repeatable)."),
    click.option("--local-tcp", "local_tcp", multiple=True, callback=_check_local_tcp, metavar="A:P>B:P|B:P",
                 help="An established local TCP socket for the flow A:P>B:P, or for every flow to local "
                      "B:P (IPv6 in brackets; repeatable): with --rx-gro-list, such flows use normal GRO."),
)


def host_options(fn):
    for option in reversed(HOST_OPTIONS):
        fn = option(fn)
    return fn


def host_settings(kwargs: dict) -> dict:
    """Pop the host-state options out of a command's keyword arguments, as Settings fields."""
    return {name: kwargs.pop(name) for name in
            ("udp_gro_forwarding", "rx_gro_list", "udp_gro_sockets", "vxlan_ports", "geneve_ports", "local_tcp")}


layout_option = click.option(
    "--layout", type=click.Choice(list(LAYOUTS)), default=None,
    help="Model how the driver hands frames to GRO (the skb layout: frags vs frag_list, truesize) and report "
         "it in the statistics (skb_layout); it never changes a decision.")


def _check_kernel(ctx, _param, value):
    from ..engine.kernels import cached_profile
    from ..errors import EXIT_USAGE

    try:
        cached_profile(value)
    except ValueError as exc:
        click.echo(f"grotool: error: --kernel: {exc}", err=True)
        ctx.exit(EXIT_USAGE)
    return value


kernel_option = click.option(
    "--kernel", default="6.18", show_default=True, callback=_check_kernel, metavar="VERSION",
    help="The kernel whose GRO is modelled: a long-term series (5.10, 5.15, 6.1, 6.6, 6.12, 6.18: its "
         "current stable release), a mainline release 5.10.0 to 6.18.0, or a stable release of a long-term "
         "series (`grotool kernels` lists them and what differs).")
