"""Name a packet's flow for humans and JSON, from grotool.dissect.

A flow is ``(proto, src, dst, sport, dport, vlans, tunnels)``: the innermost
packet's protocol name, addresses and ports (None when not TCP/UDP or a
fragment), the link-layer VLAN IDs, and one identity per tunnel crossed,
outermost first: ``(kind, outer src, outer dst, key or VNI, outer sport,
outer dport, inner VLAN IDs)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, Optional, Tuple

from ..dissect import DEFAULT_GENEVE_PORTS, DEFAULT_VXLAN_PORTS, _Walk, addr_text, ip_address_text, walk_frame
from ..linktypes import LINKTYPE_ETHERNET

if TYPE_CHECKING:
    from ..dissect_records import Dissection

ETHERTYPE_NAMES = {0x0806: "arp", 0x88CC: "lldp", 0x8035: "rarp", 0x88B5: "local", 0x8863: "pppoe-d",
                   0x8864: "pppoe", 0x8847: "mpls", 0x88E5: "macsec", 0x888E: "eapol", 0x9000: "loop"}
IP_PROTO_NAMES = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmpv6", 2: "igmp", 47: "gre", 50: "esp", 51: "ah",
                  132: "sctp", 4: "ipip", 41: "ipv6", 89: "ospf", 103: "pim", 112: "vrrp"}

# IP_PROTO_NAMES by protocol number (None: unnamed): an index, not a hash look-up, per new flow
_PROTO_NAME_OF = tuple([IP_PROTO_NAMES.get(number) for number in range(256)])

TunnelId = Tuple[str, str, str, Optional[int], Optional[int], Optional[int], Tuple[int, ...]]
FlowTuple = Tuple[str, str, str, Optional[int], Optional[int], Tuple[int, ...], Tuple[TunnelId, ...]]


def flow_of(d: Dissection) -> FlowTuple:
    """The flow tuple of a dissected packet."""
    src = dst = None
    if d.src is not None:
        src, dst = addr_text(d.src), addr_text(d.dst)
    return _flow(src, dst, d.ip_proto, d.fragment, d.sport, d.dport, d.vlans, d.ethertype, d.problem, d.tunnels)


def _flow(src, dst, proto, fragment, sport, dport, vlans, ethertype, problem, tunnels) -> FlowTuple:
    """The flow tuple of a packet dissected into these fields (a Dissection's,
    with the addresses as text; None without an IP header)."""
    tunnel_ids = tuple([t.identity() for t in tunnels]) if tunnels else ()
    if src is None:
        if ethertype is None:
            name = "truncated" if problem and problem.startswith("truncated") else "unparsed"
        else:
            names = ETHERTYPE_NAMES            # a dict local: a C look-up in the compiled build
            name = names.get(ethertype)
            if name is None:
                name = f"ethertype-0x{ethertype:04x}"
        return (name, "", "", None, None, vlans, tunnel_ids)
    number = proto                        # an IP header's protocol byte: 0-255 (a C index when compiled)
    name = _PROTO_NAME_OF[number]
    if name is None:
        name = f"ip-{proto}"
    if (proto == 6 or proto == 17) and not fragment and sport is not None:
        return (name, src, dst, sport, dport, vlans, tunnel_ids)
    return (name, src, dst, None, None, vlans, tunnel_ids)


def describe(linktype: int, data: bytes, *, vxlan_ports: Iterable[int] = DEFAULT_VXLAN_PORTS,
             geneve_ports: Iterable[int] = DEFAULT_GENEVE_PORTS) -> FlowTuple:
    """The flow tuple of one captured frame (never raises)."""
    vxlan = vxlan_ports if isinstance(vxlan_ports, (set, frozenset)) else frozenset(vxlan_ports)
    geneve = geneve_ports if isinstance(geneve_ports, (set, frozenset)) else frozenset(geneve_ports)
    return _describe(linktype, data, vxlan, geneve)


def _describe(linktype: int, data, vxlan, geneve, walk: Optional[_Walk] = None) -> FlowTuple:
    """describe() on sets of ports: dissect() without the per-layer records
    (in ``walk``, reused, when given)."""
    data = data if type(data) is bytes else bytes(data)
    w = walk_frame(data, LINKTYPE_ETHERNET if linktype is None else linktype, len(data), vxlan, geneve, False, walk)
    src = dst = None
    if w.l3 is not None:                # an IP header (the walk keeps no address bytes: l3 says)
        family, l3 = w.family, w.l3
        src, dst = ip_address_text(data, l3, family, False), ip_address_text(data, l3, family, True)
    return _flow(src, dst, w.ip_proto, w.fragment, w.sport, w.dport, w.vlans, w.ethertype, w.problem, w.tunnels)


class FlowNamer:
    """Caches descriptions by the engine's flow identity where it has one.

    The identity must hold every byte the description is made of: give the
    namer the same VXLAN/GENEVE ports the engine looks into, so that it does
    not name a flow by headers the engine did not compare.
    """

    def __init__(self, linktype: int, *, vxlan_ports: Iterable[int] = DEFAULT_VXLAN_PORTS,
                 geneve_ports: Iterable[int] = DEFAULT_GENEVE_PORTS):
        self.linktype = linktype
        self.vxlan_ports = frozenset(vxlan_ports)
        self.geneve_ports = frozenset(geneve_ports)
        self._cache: Dict[bytes, FlowTuple] = {}
        # one walk for every name: a new flow costs no walk object (nor freeing one)
        self._walk = _Walk(b"", 0, False)

    def describe(self, data: bytes) -> FlowTuple:
        """The flow tuple of these bytes, uncached."""
        return _describe(self.linktype, data, self.vxlan_ports, self.geneve_ports, self._walk)

    def __call__(self, key: bytes, data: bytes) -> FlowTuple:
        return self.name(key, data)

    def name(self, key: bytes, data: bytes) -> FlowTuple:
        """The flow tuple of a packet with this engine flow identity (``key``,
        b"" when it has none) and these bytes; a C call in the compiled build."""
        if key:
            flow = self._cache.get(key)
            if flow is None:
                flow = self.describe(data)
                if len(self._cache) < 1_000_000:
                    self._cache[key] = flow
            return flow
        return self.describe(data)


def _tunnel_json(tunnels: Tuple[TunnelId, ...]) -> dict:
    kind, src, dst, key, sport, dport, vlans = tunnels[0]
    doc = {"kind": kind, "src": src, "dst": dst, "key": key, "sport": sport, "dport": dport, "vlan": list(vlans)}
    if len(tunnels) > 1:
        doc["inner"] = _tunnel_json(tunnels[1:])
    return doc


def flow_json(flow: FlowTuple) -> dict:
    proto, src, dst, sport, dport, vlan, tunnels = flow
    doc = {"proto": proto, "src": src, "dst": dst, "sport": sport, "dport": dport, "vlan": list(vlan)}
    if tunnels:
        doc["tunnel"] = _tunnel_json(tunnels)
    return doc


def _tunnels_from_json(doc: Optional[dict]) -> Tuple[TunnelId, ...]:
    tunnels = []
    while doc:
        tunnels.append((doc["kind"], doc["src"], doc["dst"], doc["key"], doc["sport"], doc["dport"],
                        tuple(doc["vlan"])))
        doc = doc.get("inner")
    return tuple(tunnels)


def flow_from_json(doc: dict) -> FlowTuple:
    """The flow tuple flow_json() made ``doc`` from (flow_label names either alike)."""
    return (doc["proto"], doc["src"], doc["dst"], doc["sport"], doc["dport"], tuple(doc["vlan"]),
            _tunnels_from_json(doc.get("tunnel")))


def _endpoint(addr: str, port: Optional[int]) -> str:
    if port is None:
        return addr
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def tunnel_label(tunnel: TunnelId) -> str:
    kind, src, dst, key, sport, dport, vlans = tunnel
    text = f"{kind} {_endpoint(src, sport)} > {_endpoint(dst, dport)}"
    if key is not None:
        text += f" {'vni' if kind in ('vxlan', 'geneve') else 'key'} {key}"
    return text + "".join(f" inner vlan {v}" for v in vlans)


def flow_label(flow: FlowTuple) -> str:
    """One line naming the flow (plain text: escape it before printing as rich markup)."""
    proto, src, dst, sport, dport, vlan, tunnels = flow
    tag = "".join(f" vlan {v}" for v in vlan)
    tag += "".join(f" via {tunnel_label(t)}" for t in tunnels)
    if not src:
        return proto + tag
    return f"{proto} {_endpoint(src, sport)} > {_endpoint(dst, dport)}{tag}"
