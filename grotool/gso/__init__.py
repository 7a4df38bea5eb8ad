"""GSO: the inverse of GRO.  Sans-IO: a super-packet (frame bytes, link type,
gso_size, gso_type) in, the frames Linux would send on the wire out.

    from grotool.gso import segment
    frames = segment(super_packet, linktype=1, gso_size=1448, gso_type=("tcpv4",))

Covers tcp_gso_segment (IPv4/IPv6, BIG TCP), __udp_gso_segment (UDP_L4),
fraglist segmentation, IP-in-IP, GRE and UDP tunnels (VXLAN, GENEVE).
"""

from .layers import Chain, Layer, NotSegmentable, flow_key, parse
from .segment import KNOWN_GSO_TYPES, RULES, segment

__all__ = ["segment", "parse", "flow_key", "Chain", "Layer", "NotSegmentable", "RULES", "KNOWN_GSO_TYPES"]
