"""Describe a packet's flow for humans: (proto, src, dst, sport, dport, vlan)."""

from __future__ import annotations

import ipaddress
from struct import unpack_from
from typing import Dict, Optional, Tuple

ETHERTYPE_NAMES = {0x0806: "arp", 0x88CC: "lldp", 0x8035: "rarp", 0x88B5: "local", 0x8863: "pppoe-d",
                   0x8864: "pppoe", 0x8847: "mpls", 0x88E5: "macsec", 0x888E: "eapol", 0x9000: "loop"}
IP_PROTO_NAMES = {6: "tcp", 17: "udp", 1: "icmp", 58: "icmpv6", 2: "igmp", 47: "gre", 50: "esp", 51: "ah",
                  132: "sctp", 4: "ipip", 41: "ipv6", 89: "ospf", 103: "pim", 112: "vrrp"}

FlowTuple = Tuple[str, str, str, Optional[int], Optional[int], Tuple[int, ...], tuple]


def link_offsets(linktype: int, data: bytes) -> Tuple[int, int]:
    """(offset of the network header's ethertype-selected payload, ethertype)."""
    if linktype == 1:
        return (14, (data[12] << 8) | data[13]) if len(data) >= 14 else (len(data), 0)
    if linktype == 113:
        return (16, (data[14] << 8) | data[15]) if len(data) >= 16 else (len(data), 0)
    if linktype == 276:
        return (20, (data[0] << 8) | data[1]) if len(data) >= 20 else (len(data), 0)
    version = data[0] >> 4 if data else 0
    return 0, 0x0800 if version == 4 else 0x86DD if version == 6 else 0


def _ip(data: bytes, off: int, etype: int):
    """(proto, src, dst, l4 offset, is_fragment) of the IP header at off, or None."""
    if etype == 0x0800 and len(data) >= off + 20:
        ihl = (data[off] & 0x0F) * 4
        frag = unpack_from("!H", data, off + 6)[0] & 0x3FFF
        return (data[off + 9], str(ipaddress.IPv4Address(data[off + 12:off + 16])),
                str(ipaddress.IPv4Address(data[off + 16:off + 20])), off + ihl, bool(frag))
    if etype == 0x86DD and len(data) >= off + 40:
        proto = data[off + 6]
        l4 = off + 40
        frag = False
        while proto in (0, 43, 60, 44) and len(data) >= l4 + 8:
            if proto == 44:
                frag = frag or bool(unpack_from("!H", data, l4 + 2)[0] & 0xFFF9)
                proto, l4 = data[l4], l4 + 8
                continue
            proto, l4 = data[l4], l4 + (data[l4 + 1] + 1) * 8
        return (proto, str(ipaddress.IPv6Address(data[off + 8:off + 24])),
                str(ipaddress.IPv6Address(data[off + 24:off + 40])), l4, frag)
    return None


def describe(linktype: int, data: bytes) -> FlowTuple:
    """(proto, src, dst, sport, dport, vlans, tunnel); for IP-in-IP the inner
    header's flow, with tunnel = (kind, outer src, outer dst)."""
    off, etype = link_offsets(linktype, data)
    vlans = []
    while etype in (0x8100, 0x88A8, 0x9100) and len(data) >= off + 4:
        vlans.append(((data[off] << 8) | data[off + 1]) & 0x0FFF)
        etype = (data[off + 2] << 8) | data[off + 3]
        off += 4
    vlan = tuple(vlans)
    ip = _ip(data, off, etype)
    if ip is None:
        name = ETHERTYPE_NAMES.get(etype, f"ethertype-0x{etype:04x}")
        return (name, "", "", None, None, vlan, ())
    proto, src, dst, l4, frag = ip
    tunnel = ()
    if proto in (4, 41) and not frag:
        inner = _ip(data, l4, 0x0800 if proto == 4 else 0x86DD)
        if inner is not None:
            kind = {(0x0800, 4): "ipip", (0x0800, 41): "sit", (0x86DD, 4): "ip4ip6", (0x86DD, 41): "ip6ip6"}
            tunnel = (kind[(etype, proto)], src, dst)
            proto, src, dst, l4, frag = inner
    pname = IP_PROTO_NAMES.get(proto, f"ip-{proto}")
    if proto in (6, 17) and not frag and len(data) >= l4 + 4:
        sport, dport = unpack_from("!HH", data, l4)
        return (pname, src, dst, sport, dport, vlan, tunnel)
    return (pname, src, dst, None, None, vlan, tunnel)


class FlowNamer:
    """Caches descriptions by the engine's flow identity where it has one."""

    def __init__(self, linktype: int):
        self.linktype = linktype
        self._cache: Dict[bytes, FlowTuple] = {}

    def __call__(self, key: bytes, data: bytes) -> FlowTuple:
        if key:
            flow = self._cache.get(key)
            if flow is None:
                flow = describe(self.linktype, data)
                if len(self._cache) < 1_000_000:
                    self._cache[key] = flow
            return flow
        return describe(self.linktype, data)


def flow_json(flow: FlowTuple) -> dict:
    proto, src, dst, sport, dport, vlan, tunnel = flow
    doc = {"proto": proto, "src": src, "dst": dst, "sport": sport, "dport": dport, "vlan": list(vlan)}
    if tunnel:
        doc["tunnel"] = {"kind": tunnel[0], "src": tunnel[1], "dst": tunnel[2]}
    return doc


def flow_label(flow: FlowTuple) -> str:
    proto, src, dst, sport, dport, vlan, tunnel = flow
    tag = "".join(f" vlan {v}" for v in vlan)
    if tunnel:
        tag += f" via {tunnel[0]} {tunnel[1]} > {tunnel[2]}"
    if not src:
        return proto + tag
    def ep(addr, port):
        if port is None:
            return addr
        return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
    return f"{proto} {ep(src, sport)} > {ep(dst, dport)}{tag}"
