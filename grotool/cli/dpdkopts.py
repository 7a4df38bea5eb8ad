"""The DPDK stack's knobs (`replay --stack dpdk`, `grotool dpdk`): the
application's rte_gro_param and how it drives the library."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..dpdk.params import DEFAULT_BURST, DEFAULT_MAX_FLOWS, DEFAULT_MAX_ITEMS, GRO_TYPES, MODES, VXLAN_PORT

if TYPE_CHECKING:
    from ..dpdk.engine import DpdkSettings

DPDK_KEYS = ("dpdk_mode", "burst", "dpdk_flush_every", "dpdk_max_flows", "dpdk_max_items", "dpdk_gro_types")


def dpdk_options(fn):
    """The application's GRO knobs (rte_gro_param and how it drives the library)."""
    for option in reversed([
        click.option("--dpdk-mode", type=click.Choice(MODES), default="light", show_default=True,
                     help="DPDK stack: light = rte_gro_reassemble_burst per burst; heavy = a GRO context, "
                          "rte_gro_reassemble per burst and rte_gro_timeout_flush (docs/dpdk.md)."),
        click.option("--burst", type=click.IntRange(1, 65535), default=DEFAULT_BURST, show_default=True,
                     help="DPDK stack: frames per rx burst."),
        click.option("--dpdk-flush-every", type=click.IntRange(1, 1 << 30), default=1, show_default=True,
                     help="DPDK stack, heavy mode: flush the GRO context after every N bursts."),
        click.option("--dpdk-max-flows", type=click.IntRange(1, 65535), default=DEFAULT_MAX_FLOWS,
                     show_default=True, help="DPDK stack: rte_gro_param.max_flow_num."),
        click.option("--dpdk-max-items", type=click.IntRange(1, 65535), default=DEFAULT_MAX_ITEMS,
                     show_default=True, help="DPDK stack: rte_gro_param.max_item_per_flow."),
        click.option("--dpdk-gro-types", default="tcp4", show_default=True, metavar="LIST",
                     help=f"DPDK stack: the GRO types on, comma-separated (modelled: {', '.join(GRO_TYPES)})."),
    ]):
        fn = option(fn)
    return fn


def vxlan_port_option(fn):
    """--vxlan-port for commands without the host options (which carry their own, shared with Linux)."""
    return click.option("--vxlan-port", "vxlan_ports", multiple=True, type=click.IntRange(1, 65535),
                        metavar="PORT", help=f"UDP destination port the application classifies as VXLAN "
                                             f"(repeatable; default {VXLAN_PORT}).")(fn)


def dpdk_settings(options: dict) -> DpdkSettings:
    """DpdkSettings from a command's keyword arguments; consumes the DPDK keys."""
    from ..dpdk.engine import DpdkSettings

    types = tuple(t.strip() for t in options.pop("dpdk_gro_types").split(",") if t.strip())
    # --vxlan-port: what the application classifies as VXLAN (the host options' own, left for them)
    ports = tuple(options.get("vxlan_ports") or ()) or (VXLAN_PORT,)
    return DpdkSettings(vxlan_ports=ports, mode=options.pop("dpdk_mode"), burst=options.pop("burst"),
                        flush_every=options.pop("dpdk_flush_every"), max_flows=options.pop("dpdk_max_flows"),
                        max_items=options.pop("dpdk_max_items"), gro_types=types)
