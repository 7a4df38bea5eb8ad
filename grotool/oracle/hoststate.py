"""The receiving host's state that a capture cannot show, as the user states it
(`--udp-gro-forwarding`, `--rx-gro-list`, `--udp-gro-socket`, `--vxlan-port`,
`--geneve-port`, `--local-tcp`, and the receiving device's `--gro-max-size` and
`--gro-ipv4-max-size`).  Pure data and parsing, no privileges: the
oracle realises it in its namespace (grotool.oracle.netns), the simulation can
read the same object.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, List, Optional, Sequence, Tuple

from ..engine.config import GRO_MAX_SIZE
from ..engine.hoststate import Endpoint, LocalTcp, parse_endpoint, parse_local_tcp, parse_port

__all__ = ["Endpoint", "LocalTcp", "HostState", "parse_endpoint", "parse_local_tcp", "parse_port",
           "flows_to_local", "UDP_GRO_LEGACY"]

# the old --udp-gro off|forward|fraglist, kept as a deprecated alias
UDP_GRO_LEGACY = {"off": {}, "forward": {"udp_gro_forwarding": True}, "fraglist": {"rx_gro_list": True}}


@dataclass(frozen=True)
class HostState:
    """What the receiving host had configured; the default is a plain host."""

    udp_gro_forwarding: bool = False                 # ethtool rx-udp-gro-forwarding (NETIF_F_GRO_UDP_FWD)
    rx_gro_list: bool = False                        # ethtool rx-gro-list (NETIF_F_GRO_FRAGLIST)
    udp_gro_sockets: Tuple[int, ...] = ()            # UDP sockets with UDP_GRO on these ports
    vxlan_ports: Tuple[int, ...] = ()                # VXLAN devices listening on these ports
    geneve_ports: Tuple[int, ...] = ()               # GENEVE devices listening on these ports
    local_tcp: Tuple[LocalTcp, ...] = field(default=())
    # the receiving device's ip link gro_max_size / gro_ipv4_max_size; None: left as the
    # device came (65536 on veth)
    gro_max_size: Optional[int] = None
    gro_ipv4_max_size: Optional[int] = None

    @classmethod
    def build(cls, *, udp_gro_forwarding: bool = False, rx_gro_list: bool = False,
              udp_gro_sockets: Iterable = (), vxlan_ports: Iterable = (), geneve_ports: Iterable = (),
              local_tcp: Iterable = (), udp_gro: Optional[str] = None, gro_max_size: Optional[int] = None,
              gro_ipv4_max_size: Optional[int] = None) -> "HostState":
        """From option values (ports as int or text, local_tcp as LocalTcp or text);
        ``udp_gro`` is the deprecated off|forward|fraglist.  ValueError on bad values."""
        if udp_gro is not None:
            if udp_gro not in UDP_GRO_LEGACY:
                raise ValueError(f"udp_gro must be one of {', '.join(UDP_GRO_LEGACY)}")
            legacy = UDP_GRO_LEGACY[udp_gro]
            udp_gro_forwarding = udp_gro_forwarding or legacy.get("udp_gro_forwarding", False)
            rx_gro_list = rx_gro_list or legacy.get("rx_gro_list", False)

        def ports(values) -> Tuple[int, ...]:
            return tuple(sorted({parse_port(v) for v in values}))

        flows: List[LocalTcp] = []
        for item in local_tcp:
            lt = item if isinstance(item, LocalTcp) else parse_local_tcp(str(item))
            if lt not in flows:
                flows.append(lt)
        vxlan, geneve = ports(vxlan_ports), ports(geneve_ports)
        both = set(vxlan) & set(geneve)
        if both:
            raise ValueError(f"port {min(both)} cannot be both a VXLAN and a GENEVE port")
        sockets = ports(udp_gro_sockets)
        taken = set(sockets) & (set(vxlan) | set(geneve))
        if taken:
            raise ValueError(f"port {min(taken)} cannot be both a --udp-gro-socket and a tunnel port")
        sizes = []
        for name, value in (("gro_max_size", gro_max_size), ("gro_ipv4_max_size", gro_ipv4_max_size)):
            if value is not None:
                value = int(value)
                if not 0 <= value <= GRO_MAX_SIZE:
                    raise ValueError(f"{name} must be 0..{GRO_MAX_SIZE} (the kernel's GRO_MAX_SIZE)")
            sizes.append(value)
        return cls(bool(udp_gro_forwarding), bool(rx_gro_list), sockets, vxlan, geneve,
                   tuple(flows), *sizes)

    def with_legacy_udp_gro(self, udp_gro: Optional[str]) -> "HostState":
        """This state with the deprecated off|forward|fraglist added to its ethtool part."""
        if udp_gro in (None, "off"):
            return self
        legacy = HostState.build(udp_gro=udp_gro)
        return replace(self, udp_gro_forwarding=self.udp_gro_forwarding or legacy.udp_gro_forwarding,
                       rx_gro_list=self.rx_gro_list or legacy.rx_gro_list)

    @property
    def sets_gro_sizes(self) -> bool:
        return self.gro_max_size is not None or self.gro_ipv4_max_size is not None

    @property
    def legacy_udp_gro(self) -> str:
        """The old --udp-gro name of the ethtool part (for older readers of the sidecar)."""
        if self.rx_gro_list:
            return "fraglist"
        return "forward" if self.udp_gro_forwarding else "off"

    @property
    def needs_sockets(self) -> bool:
        return bool(self.udp_gro_sockets or self.local_tcp)

    def to_json(self) -> dict:
        return {"udp_gro_forwarding": self.udp_gro_forwarding, "rx_gro_list": self.rx_gro_list,
                "udp_gro_sockets": list(self.udp_gro_sockets), "vxlan_ports": list(self.vxlan_ports),
                "geneve_ports": list(self.geneve_ports), "local_tcp": [str(x) for x in self.local_tcp],
                "gro_max_size": self.gro_max_size, "gro_ipv4_max_size": self.gro_ipv4_max_size}


Flow = Tuple[Endpoint, Endpoint]


def flows_to_local(specs: Sequence[LocalTcp], flows: Iterable[Flow]) -> List[Flow]:
    """The (src, dst) TCP flows that end at a local socket: every `A:P>B:P` given,
    and every flow of ``flows`` (those seen in the capture) to a `B:P` given."""
    out: List[Flow] = []
    for lt in specs:
        if lt.src is not None and (lt.src, lt.dst) not in out:
            out.append((lt.src, lt.dst))
    wild = [lt for lt in specs if lt.src is None]
    if wild:
        for src, dst in flows:
            if src != dst and any(lt.matches(src, dst) for lt in wild) and (src, dst) not in out:
                out.append((src, dst))
    return out
