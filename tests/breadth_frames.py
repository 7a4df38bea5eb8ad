"""Crafted traffic for UDP GRO, fraglist GRO and tunnels, shared by the
engine rule tests and the real-kernel differential tests."""

from __future__ import annotations

import struct
from typing import List

from grotool import scenarios as S

SEQ = 1000


def set_reserved_flag(frame: bytes) -> bytes:
    """The IPv4 'evil' bit on an Ethernet/IPv4 frame, header checksum fixed."""
    b = bytearray(frame)
    b[20] |= 0x80
    b[24] = b[25] = 0
    b[24:26] = struct.pack("!H", S.inet_csum(bytes(b[14:34])))
    return bytes(b)


def udp_mixed() -> List[bytes]:
    """Per family: equal datagrams then a shorter one (merged, closes), a
    larger one (new aggregate), a TTL change, zero checksums, Ethernet padding,
    IP options; then 70 equal datagrams (64 at most per aggregate)."""
    fr = []
    for fam in (4, 6):
        u = lambda **kw: S.udp_frame(family=fam, sport=1000, dport=5000, **kw)  # noqa: E731
        fr += [u(payload=1000, ip_id=i) for i in range(5)]
        fr.append(u(payload=400, ip_id=5))
        fr.append(u(payload=1000, ip_id=6))
        fr.append(u(payload=1200, ip_id=7))
        fr.append(u(payload=1200, ip_id=8, ttl=7))
        fr.append(u(payload=1200, ip_id=9, ttl=7))
        fr += [S.udp_frame(family=fam, sport=1001, dport=5000, payload=500, ip_id=i, zero_csum=True)
               for i in range(2)]
        fr.append(S.udp_frame(family=fam, sport=1002, dport=5000, payload=50, ip_id=0))
        fr.append(S.udp_frame(family=fam, sport=1002, dport=5000, payload=2, ip_id=1, pad_to_60=True))
        fr.append(S.udp_frame(family=fam, sport=1002, dport=5000, payload=50, ip_id=2,
                              ip_options=b"\x01\x01\x01\x01" if fam == 4 else b""))
    fr += [S.udp_frame(sport=3000, dport=5001, payload=100, ip_id=i) for i in range(70)]
    return fr


def tcp_for_fraglist() -> List[bytes]:
    """Per family: a PSH in the middle, a short segment, a window change;
    then 70 small segments of one flow (64 at most per fraglist aggregate)."""
    fr = []
    for fam in (4, 6):
        seq = SEQ
        for i in range(11):
            size = 500 if i == 8 else 1000
            fr.append(S.tcp_frame(family=fam, seq=seq, payload=size, ip_id=i, flags="PA" if i == 4 else "A",
                                  window=100 if i >= 9 else 65535))
            seq += size
    fr += [S.tcp_frame(sport=2222, seq=SEQ + i * 100, payload=100, ip_id=i) for i in range(70)]
    return fr


def flagged_for_fraglist() -> List[bytes]:
    """Packets flagged at L3 (reserved bit, Ethernet padding) inside flows."""
    fr = []
    for fam in (4, 6):
        seq = SEQ
        for i in range(6):
            f = S.tcp_frame(family=fam, seq=seq, payload=1000, ip_id=i)
            fr.append(set_reserved_flag(f) if (i == 3 and fam == 4) else f)
            seq += 1000
        fr.append(S.tcp_frame(family=fam, seq=seq, payload=2, ip_id=6, pad_to_60=True))
    for i in range(6):
        f = S.udp_frame(sport=9, dport=10, payload=800, ip_id=i)
        fr.append(set_reserved_flag(f) if i == 3 else f)
    return fr


def gre_mixed() -> List[bytes]:
    """GRE over IPv4 and IPv6, with and without key and checksum; sequence
    numbers (unsupported), transparent Ethernet bridging, a bad GRE checksum."""
    fr = []
    for ofam in (4, 6):
        for key in (None, 7):
            for checksum in (False, True):
                fr += [S.gre_frame(S.tcp_frame(seq=SEQ + i * 1000, payload=1000, ip_id=i)[14:], key=key,
                                   checksum=checksum, family=ofam, ip_id=i) for i in range(5)]
    fr += [S.gre_frame(S.tcp_frame(seq=SEQ + i * 1000, payload=1000, ip_id=i)[14:], seq=i, ip_id=i)
           for i in range(3)]
    fr += [S.gre_frame(S.tcp_frame(seq=SEQ + i * 1000, payload=1000, ip_id=i), proto=S.ETH_P_TEB, ip_id=i)
           for i in range(3)]
    fr += [S.gre_frame(S.tcp_frame(seq=SEQ + i * 1000, payload=1000, ip_id=i)[14:], checksum=True,
                       bad_gre_csum=(i == 1), ip_id=i) for i in range(3)]
    return fr


def vxlan_mixed() -> List[bytes]:
    """VXLAN over IPv4 and IPv6 with zero and real outer checksums, inner and
    outer TTL changes; UDP inside VXLAN."""
    fr = []
    for zero in (True, False):
        for ofam in (4, 6):
            seq = SEQ
            for i in range(8):
                inner_ttl = 3 if i >= 5 else 8
                outer_ttl = 5 if i >= 6 else 64
                outer_id = i + 1 if i == 7 else i
                fr.append(S.vxlan_frame(S.tcp_frame(seq=seq, payload=1000, ip_id=i, ttl=inner_ttl), family=ofam,
                                        zero_csum=zero, ip_id=outer_id, ttl=outer_ttl))
                seq += 1000
    fr += [S.vxlan_frame(S.udp_frame(sport=7, dport=9, payload=500, ip_id=i), ip_id=i) for i in range(4)]
    return fr
