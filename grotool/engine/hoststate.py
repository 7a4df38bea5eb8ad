"""What the receiving host had configured, which a capture does not carry:
local sockets (UDP_GRO, UDP tunnels, established TCP) and device features.

The GRO layers ask this module the questions the kernel answers with socket
lookups: udp4/6_gro_lookup_skb (only when udp_encap_needed_key is on) and
__inet(6)_lookup_established in tcp4/6_check_fraglist_gro.
"""

from __future__ import annotations

from typing import Dict, Optional, Set, Tuple

# What a UDP socket lookup finds
UDP_GRO_SOCKET = "udp_gro"      # a socket with the UDP_GRO option (udp_gro_receive: GRO_ENABLED)
VXLAN_SOCKET = "vxlan"          # a UDP tunnel socket whose gro_receive is vxlan_gro_receive
GENEVE_SOCKET = "geneve"        # ... geneve_gro_receive


def _address(text: str) -> bytes:
    import socket                # only when a --local-tcp is given: replay's start-up stays lean
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return socket.inet_pton(socket.AF_INET6, text[1:-1])
    return socket.inet_pton(socket.AF_INET, text)


def _endpoint(text: str) -> Tuple[Optional[bytes], int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: expected ADDRESS:PORT (IPv6 in brackets)")
    if host in ("*", ""):
        return None, int(port)
    try:
        return _address(host), int(port)
    except OSError:
        raise ValueError(f"{text!r}: {host!r} is not an IPv4 address or a bracketed IPv6 address") from None


def parse_local_tcp(spec: str) -> Tuple[Optional[bytes], Optional[int], Optional[bytes], int]:
    """ "A:P>B:P" (one flow, A:P -> B:P) or "B:P" (every flow to local B:P;
    "*:P" for any local address) as (saddr, sport, daddr, dport), None = any."""
    if ">" in spec:
        left, right = spec.split(">", 1)
        saddr, sport = _endpoint(left)
        daddr, dport = _endpoint(right)
        if saddr is None or daddr is None:
            raise ValueError(f"{spec!r}: a flow needs both addresses")
        if len(saddr) != len(daddr):
            raise ValueError(f"{spec!r}: both ends must be the same IP version")
        return saddr, sport, daddr, dport
    daddr, dport = _endpoint(spec)
    return None, None, daddr, dport


class HostState:
    """The sockets and features of the simulated receiving host."""

    def __init__(self, settings):
        self.udp_gro_forwarding = settings.udp_gro_forwarding
        self.rx_gro_list = settings.rx_gro_list
        ports: Dict[int, str] = {}
        for port in settings.udp_gro_sockets:
            ports[port] = UDP_GRO_SOCKET
        for port in settings.geneve_ports:
            ports[port] = GENEVE_SOCKET
        for port in settings.vxlan_ports:
            ports[port] = VXLAN_SOCKET
        self.udp_ports = ports
        # udp_encap_needed_key: any UDP_GRO or tunnel socket turns the lookups on
        self.udp_lookup = bool(ports)
        self.tcp_flows: Set[Tuple[bytes, int, bytes, int]] = set()
        self.tcp_local_ports: Set[Tuple[Optional[bytes], int]] = set()
        for spec in settings.local_tcp:
            saddr, sport, daddr, dport = parse_local_tcp(spec)
            if saddr is None:
                self.tcp_local_ports.add((daddr, dport))
            else:
                self.tcp_flows.add((saddr, sport, daddr, dport))

    def udp_socket(self, dport: int) -> Optional[str]:
        """udp4/6_gro_lookup_skb: the kind of socket bound (any address) to dport,
        or None; nothing is looked up while udp_encap_needed_key is off."""
        if not self.udp_lookup:
            return None
        return self.udp_ports.get(dport)

    def tcp_established(self, saddr: bytes, sport: int, daddr: bytes, dport: int) -> bool:
        """__inet(6)_lookup_established for skb's 4-tuple."""
        if (saddr, sport, daddr, dport) in self.tcp_flows:
            return True
        ports = self.tcp_local_ports
        return (daddr, dport) in ports or (None, dport) in ports
