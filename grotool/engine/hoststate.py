"""What the receiving host had configured, which a capture does not carry:
local sockets (UDP_GRO, UDP tunnels, established TCP) and device features.

The GRO layers ask this module the questions the kernel answers with socket
lookups: udp4/6_gro_lookup_skb (only when udp_encap_needed_key is on) and
__inet(6)_lookup_established in tcp4/6_check_fraglist_gro.
"""

from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Set, Tuple

# What a UDP socket lookup finds
UDP_GRO_SOCKET = "udp_gro"      # a socket with the UDP_GRO option (udp_gro_receive: GRO_ENABLED)
VXLAN_SOCKET = "vxlan"          # a UDP tunnel socket whose gro_receive is vxlan_gro_receive
GENEVE_SOCKET = "geneve"        # ... geneve_gro_receive


# named tuples, not dataclasses: every start-up imports this module, and making
# a dataclass costs about ten times as much (1 ms for Endpoint)
class Endpoint(NamedTuple):
    addr: str                  # canonical text form (ipaddress)
    port: int

    @property
    def family(self) -> int:
        return 6 if ":" in self.addr else 4

    def packed(self) -> bytes:
        import ipaddress
        return ipaddress.ip_address(self.addr).packed

    def __str__(self) -> str:
        return f"[{self.addr}]:{self.port}" if self.family == 6 else f"{self.addr}:{self.port}"


class LocalTcp(NamedTuple):
    """`A:P>B:P` (src set): that one flow ends at a local established socket;
    `B:P` (src None): every TCP flow to B:P does."""

    dst: Endpoint
    src: Optional[Endpoint] = None

    def __str__(self) -> str:
        return f"{self.src}>{self.dst}" if self.src else str(self.dst)

    def matches(self, src: Endpoint, dst: Endpoint) -> bool:
        return dst == self.dst and (self.src is None or self.src == src)


def parse_port(text) -> int:
    try:
        port = int(str(text), 10)
    except ValueError:
        raise ValueError(f"'{text}' is not a port number") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is outside 1..65535")
    return port


def parse_endpoint(text: str) -> Endpoint:
    """`10.0.0.2:5201` or `[fd00::2]:5201`."""
    import ipaddress             # only when a --local-tcp is given: start-up stays lean
    text = text.strip()
    if text.startswith("["):
        addr, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise ValueError(f"'{text}': an IPv6 endpoint is written [ADDRESS]:PORT")
        port = rest[1:]
    else:
        addr, sep, port = text.rpartition(":")
        if not sep or ":" in addr:
            raise ValueError(f"'{text}' is not ADDRESS:PORT (IPv6 in brackets: [fd00::2]:5201)")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        raise ValueError(f"'{addr}' is not an IP address") from None
    if text.startswith("[") and ip.version != 6:
        raise ValueError(f"'{text}': brackets are for IPv6 addresses")
    if ip.is_unspecified or ip.is_multicast:
        raise ValueError(f"'{addr}' cannot be the address of an established TCP socket")
    return Endpoint(str(ip), parse_port(port))


def parse_local_tcp(text: str) -> LocalTcp:
    """`A:P>B:P` or `B:P`."""
    src, sep, dst = text.partition(">")
    if not sep:
        return LocalTcp(parse_endpoint(text))
    a, b = parse_endpoint(src), parse_endpoint(dst)
    if a.family != b.family:
        raise ValueError(f"'{text}': both ends must be IPv4 or both IPv6")
    if a == b:
        raise ValueError(f"'{text}': a TCP connection needs two different endpoints")
    return LocalTcp(b, a)


class HostSockets:
    """The sockets and features of the simulated receiving host, for the lookups GRO makes."""

    def __init__(self, settings, kernel):
        # row U2: before 5.12 rx-udp-gro-forwarding did nothing
        self.udp_gro_forwarding = settings.udp_gro_forwarding and kernel.holds("U2")
        self.rx_gro_list = settings.rx_gro_list
        # row U3: before 5.13, under rx-gro-list a tunnel socket's packets were fraglisted at L4
        self.tunnel_skips_l4 = kernel.holds("U3")
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
        self.tcp_local_ports: Set[Tuple[bytes, int]] = set()
        for spec in settings.local_tcp:
            local = parse_local_tcp(spec)
            dst = (local.dst.packed(), local.dst.port)
            if local.src is None:
                self.tcp_local_ports.add(dst)
            else:
                self.tcp_flows.add((local.src.packed(), local.src.port) + dst)

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
        return (daddr, dport) in self.tcp_local_ports
