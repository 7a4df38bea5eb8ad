"""Frames for the host-option tests of the kernel oracle, built with scapy
(independent of grotool's own header code): TCP inside VXLAN and GRE (IPv4
and IPv6 outer), and plain UDP/TCP flows with chosen addresses.

Every frame carries valid checksums (inner and outer) unless told otherwise;
IPv4 IDs go up by one per frame, inner and outer, and DF is set, so that the
kernel's IP-level GRO checks pass.
"""

from __future__ import annotations

from typing import List, Optional

from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import GRE, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

OUTER_MAC_DST, OUTER_MAC_SRC = "02:00:00:00:01:aa", "02:00:00:00:01:bb"
INNER_MAC_DST, INNER_MAC_SRC = "02:00:00:00:02:aa", "02:00:00:00:02:bb"
OUTER4 = ("192.168.50.1", "192.168.50.2")
OUTER6 = ("fd50::1", "fd50::2")
INNER4 = ("10.1.0.1", "10.1.0.2")
INNER6 = ("fd01::1", "fd01::2")
MSS = 1400


def data(n: int, salt: int) -> bytes:
    return bytes(((salt + i) * 13 + 5) & 0xFF for i in range(n))


def inner_tcp(i: int, *, mss: int = MSS, seq0: int = 1000, sport: int = 33000, dport: int = 5201,
              flags: str = "A", family: int = 4):
    """The i-th segment of one inner TCP flow (scapy packet, IPv4 or IPv6)."""
    seq = seq0 + i * mss
    ip = (IP(src=INNER4[0], dst=INNER4[1], id=i, flags="DF", ttl=64) if family == 4
          else IPv6(src=INNER6[0], dst=INNER6[1], hlim=64))
    return ip / TCP(sport=sport, dport=dport, seq=seq, ack=7000, flags=flags, window=1000) / Raw(data(mss, seq))


def _outer_ip(i: int, family: int, proto: Optional[int] = None, *, outer_id0: int = 100):
    if family == 4:
        ip = IP(src=OUTER4[0], dst=OUTER4[1], id=outer_id0 + i, flags="DF", ttl=64)
        if proto is not None:
            ip.proto = proto
        return ip
    ip6 = IPv6(src=OUTER6[0], dst=OUTER6[1], hlim=64)
    if proto is not None:
        ip6.nh = proto
    return ip6


def vxlan_tcp_flow(n: int, *, dport: int = 4789, sport: int = 49152, vni: int = 42, family: int = 4,
                   udp_csum: Optional[bool] = None, mss: int = MSS, inner_sport: int = 33000,
                   inner_family: int = 4, vxlan_flags: int = 0x08) -> List[bytes]:
    """n segments of one TCP flow carried in VXLAN (inner Ethernet + IP).  The outer
    UDP checksum is zero over IPv4 and computed over IPv6 unless udp_csum says.
    vxlan_flags is the header's flags byte (0x08: the I flag alone)."""
    if udp_csum is None:
        udp_csum = family == 6
    out = []
    for i in range(n):
        inner = Ether(dst=INNER_MAC_DST, src=INNER_MAC_SRC) / inner_tcp(i, mss=mss, sport=inner_sport,
                                                                        family=inner_family)
        udp = UDP(sport=sport, dport=dport)
        if not udp_csum:
            udp.chksum = 0
        pkt = (Ether(dst=OUTER_MAC_DST, src=OUTER_MAC_SRC) / _outer_ip(i, family) / udp
               / VXLAN(vni=vni, flags=vxlan_flags) / inner)
        out.append(bytes(pkt))
    return out


def gre_tcp_flow(n: int, *, family: int = 4, key: Optional[int] = None, csum: bool = False,
                 mss: int = MSS, inner_family: int = 4, teb: bool = False) -> List[bytes]:
    """n segments of one inner TCP flow in GRE (protocol 0x0800 or 0x86dd; 0x6558 with an
    inner Ethernet header when teb), optionally with a key and/or the GRE checksum."""
    out = []
    for i in range(n):
        inner = inner_tcp(i, mss=mss, family=inner_family)
        if teb:
            inner = Ether(dst=INNER_MAC_DST, src=INNER_MAC_SRC) / inner
        gre = GRE(proto=0x6558 if teb else 0x0800 if inner_family == 4 else 0x86DD)
        if key is not None:
            gre.key_present = 1
            gre.key = key
        if csum:
            gre.chksum_present = 1
        pkt = Ether(dst=OUTER_MAC_DST, src=OUTER_MAC_SRC) / _outer_ip(i, family, 47) / gre / inner
        out.append(bytes(pkt))
    return out


def udp_flow(n: int, size: int = 1000, *, dport: int = 5202, sport: int = 40001, family: int = 4,
             last: Optional[int] = None) -> List[bytes]:
    """n datagrams of one UDP flow with valid checksums (the last one `last` bytes)."""
    src, dst = ("10.0.0.1", "10.0.0.2") if family == 4 else ("fd00::1", "fd00::2")
    out = []
    for i in range(n):
        length = last if (last is not None and i == n - 1) else size
        ip = IP(src=src, dst=dst, id=i, flags="DF") if family == 4 else IPv6(src=src, dst=dst)
        out.append(bytes(Ether(dst=OUTER_MAC_DST, src=OUTER_MAC_SRC) / ip / UDP(sport=sport, dport=dport)
                         / Raw(data(length, i))))
    return out


def tcp_flow(n: int, *, src: str, dst: str, sport: int, dport: int, mss: int = 1448,
             flags_at: Optional[dict] = None) -> List[bytes]:
    """n in-order segments of one plain TCP flow (IPv4 or IPv6 by the addresses);
    flags_at: {index: scapy flags} overriding "A"."""
    out = []
    for i in range(n):
        seq = 1000 + i * mss
        ip = IP(src=src, dst=dst, id=i, flags="DF") if ":" not in src else IPv6(src=src, dst=dst)
        out.append(bytes(Ether(dst=OUTER_MAC_DST, src=OUTER_MAC_SRC) / ip
                         / TCP(sport=sport, dport=dport, seq=seq, ack=5000, flags=(flags_at or {}).get(i, "A"),
                               window=512)
                         / Raw(data(mss, seq))))
    return out
