"""Offload tables: how each layer finds the next, as the kernel's
packet_offload list (by ethertype) and inet_offloads / inet6_offloads
(by IP protocol number) do.

Each receive handler has the shape ``handler(bucket, skb, gro) -> held packet
to complete or None``; each complete handler ``complete(gro, p, header,
gso_type, nhoff)`` patches the rebuilt header in place.  The packet_offload
list holds PacketOffload objects (struct packet_offload); IPv4's and IPv6's
call their handlers directly, as dev_gro_receive's INDIRECT_CALL_INET does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython


@cython.cclass
class PacketOffload:
    """struct packet_offload: an ethertype and its GRO callbacks."""

    __slots__ = ("type", "gro_receive", "gro_complete")

    def __init__(self, type_: int, gro_receive: Callable, gro_complete: Callable):
        self.type = type_
        self.gro_receive = gro_receive
        self.gro_complete = gro_complete

    def receive(self, bucket, skb, gro):
        """callbacks.gro_receive"""
        return self.gro_receive(bucket, skb, gro)

    def complete(self, gro, p, header, gso_type, nhoff) -> None:
        """callbacks.gro_complete"""
        self.gro_complete(gro, p, header, gso_type, nhoff)


# ethertype -> its PacketOffload
PACKET_OFFLOADS: Dict[int, PacketOffload] = {}
# IP protocol -> (gro_receive, gro_complete) or None, per family: arrays
# indexed by the protocol byte, as inet_offloads[] and inet6_offloads[] are
MAX_INET_PROTOS = 256
INET_OFFLOADS: List[Optional[Tuple[Callable, Callable]]] = [None] * MAX_INET_PROTOS
INET6_OFFLOADS: List[Optional[Tuple[Callable, Callable]]] = [None] * MAX_INET_PROTOS
VLAN_ETHERTYPES = (0x8100, 0x88A8)
GRO_RECURSION_LIMIT = 15             # include/net/gro.h


def enter_layer(skb) -> bool:
    """gro_recursion_inc_test, as call_gro_receive and its variants run it
    before handing the packet to the next layer: False (and flushed) at the limit."""
    depth = skb.recursion + 1
    skb.recursion = depth
    if depth == GRO_RECURSION_LIMIT:
        skb.flush = skb.flush or "recursion_limit"
        return False
    return True


def packet_offload(offload_list: tuple, ethertype: int):
    """gro_find_receive_by_type / gro_find_complete_by_type: the first
    PacketOffload of a node's packet_offload list (GroNode.packet_offloads)
    for ethertype, or None."""
    for entry in offload_list:
        if entry.type == ethertype:
            return entry
    return None


def _register() -> None:
    from . import ipv4, ipv6, tcp, tunnels, udp, vlan

    PACKET_OFFLOADS[0x0800] = ipv4.InetOffload(0x0800, ipv4.inet_gro_receive, ipv4.inet_gro_complete)
    PACKET_OFFLOADS[0x86DD] = ipv6.Ipv6Offload(0x86DD, ipv6.ipv6_gro_receive, ipv6.ipv6_gro_complete)
    PACKET_OFFLOADS[0x8100] = PacketOffload(0x8100, vlan.vlan_gro_receive, vlan.vlan_gro_complete)
    PACKET_OFFLOADS[0x88A8] = PacketOffload(0x88A8, vlan.vlan_gro_receive, vlan.vlan_gro_complete)
    INET_OFFLOADS[6] = (tcp.tcp4_gro_receive, tcp.tcp4_gro_complete)
    INET6_OFFLOADS[6] = (tcp.tcp6_gro_receive, tcp.tcp6_gro_complete)
    INET_OFFLOADS[4] = (tunnels.ipip_gro_receive, tunnels.ipip_gro_complete)              # ipip
    INET_OFFLOADS[41] = (tunnels.sit_ip6ip6_gro_receive, tunnels.sit_ip6ip6_gro_complete)  # sit
    INET6_OFFLOADS[4] = (tunnels.ipip_gro_receive, tunnels.ipip_gro_complete)             # ip4ip6
    INET6_OFFLOADS[41] = (tunnels.sit_ip6ip6_gro_receive, tunnels.sit_ip6ip6_gro_complete)  # ip6ip6
    INET_OFFLOADS[17] = (udp.udp4_gro_receive, udp.udp4_gro_complete)
    INET6_OFFLOADS[17] = (udp.udp6_gro_receive, udp.udp6_gro_complete)
    INET_OFFLOADS[47] = (tunnels.gre_gro_receive, tunnels.gre_gro_complete)
    INET6_OFFLOADS[47] = (tunnels.gre_gro_receive, tunnels.gre_gro_complete)
    PACKET_OFFLOADS[0x6558] = PacketOffload(0x6558, tunnels.eth_gro_receive, tunnels.eth_gro_complete)  # ETH_P_TEB


_register()
