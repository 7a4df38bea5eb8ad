"""Synthetic traffic for tests, benchmarks and the bundled captures.

Pure Python, ``struct`` only (scapy is never imported here).  Three parts:

* **Frame builders**: :func:`tcp_frame`, :func:`udp_frame`, :func:`icmp_echo_frame`,
  :func:`arp_frame` build Ethernet frames (``bytes``) with correct IPv4 header
  and L4 checksums unless a corruption is asked for.  They cover what GRO looks
  at: 802.1Q/QinQ tags, IPv4 options/ID/DF/fragments, IPv6 extension headers
  and flow label, IPIP/IPv6-in-IPv6 outer headers, TCP options and flags,
  Ethernet padding.
* **The kernel GRO selftest** (``tools/testing/selftests/drivers/net/gro.c``,
  summarised in shared/spec/selftest-gro-cases.md): one function per case,
  ``case_<name>(proto="ipv4", sport=1500)``, returning a :class:`Scenario`
  with the frames in send order (including the closing FIN), per-frame
  timestamps and what Linux 6.18 delivers (:attr:`Scenario.expected_kernel`).
  :func:`all_scenarios` lists them.
* **Bulk traffic**: :func:`bulk_flows` is a fast generator of realistic
  interleaved bulk TCP (header templates patched in place, incremental
  checksums), used by the benchmark and the differential tests.

Expected results
----------------
``expected_kernel`` is the list of TCP payload sizes delivered by a 6.18 kernel
in the oracle's veth conditions (shared/spec/kernel-oracle.md): frames are
replayed back to back, 64 frames per NAPI poll (a case always fits in one
poll, starting from an empty GRO state), every flow in GRO hash bucket 0 (at
most 8 held packets), **pauses not replayed**.  It is in delivery order and
includes the FIN (a 0), so a packet that is still held when the FIN arrives
and does not belong to the FIN's GRO flow comes out *after* it (ip_v6ext_*).
``expected_paused`` is the result under the same single-bucket conditions
when every selftest pause is honoured as a poll boundary with a full flush:
what the selftest itself sees on a quiet veth pair, and what a
timestamp-driven model with the selftest's deferral (gro_flush_timeout
200 us, napi_defer_hard_irqs 1) and no receive hash should give with the
scenario's timestamps.  (With RSS, capacity_9/16 coalesce every flow.)
``expected_selftest`` is the selftest's own list (sizes before the FIN).

Pauses
------
The selftest sleeps 100 ms before the FIN in the tcp_*, ip_csum, ip_opt,
ip_frag4, ip_id_*, ip_frag6, ip_v6ext_* and capacity cases, 100 ms between the
two halves of data_burst, and 1 s before the fragment in ip_frag6.  A veth
replay groups frames 64 per poll and ignores time, so the pause is invisible
there; :attr:`Scenario.timestamps_ns` carries it (frames otherwise back to
back at 10 Gbit/s wire speed) and :attr:`Scenario.pauses` lists it.  Only
three cases give a different result with and without the pause: data_burst
([400] vs [200, 200]), ip_frag6 (order [100, 200, 100] vs [200, 100, 100]) and
ip_v6ext_same/diff (where the FIN overtakes the held aggregate).
"""

from __future__ import annotations

import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

__all__ = [
    "Scenario", "tcp_frame", "udp_frame", "icmp_echo_frame", "arp_frame", "v6_dstopts", "v6_frag",
    "v6_hbh", "ipv4_ts_option", "tcp_opts_ts", "all_scenarios", "selftest_scenarios", "CASES",
    "PROTOS", "case_names", "bulk_flows", "write_pcap", "wire_ns", "large_params", "inet_csum",
]

# --------------------------------------------------------------------------------------------
# constants of the selftest (gro.c)
# --------------------------------------------------------------------------------------------
SPORT = 1500
DPORT = 8000
PAYLOAD_LEN = 100
START_SEQ = 100
START_ACK = 100
NUM_PACKETS = 4
CAPACITY_PAYLOAD_LEN = 200
ASSUMED_MTU = 4096
IP_MAXPACKET = 65535
SELFTEST_SMAC = "aa:00:00:00:00:01"
SELFTEST_DMAC = "aa:00:00:00:00:02"
ADDR4_SRC, ADDR4_DST = "192.168.1.200", "192.168.1.100"
ADDR6_SRC, ADDR6_DST = "fdaa::2", "fdaa::1"
FIN_DELAY_NS = 100_000_000       # usleep(100 ms) before the FIN
BURST_DELAY_NS = 100_000_000     # data_burst: 100 ms between the halves
FRAG6_DELAY_NS = 1_000_000_000   # ip_frag6: sleep(1) before the fragment
DEFAULT_RATE_BPS = 10_000_000_000

ETH_P_IP, ETH_P_IPV6, ETH_P_ARP, ETH_P_8021Q, ETH_P_8021AD = 0x0800, 0x86DD, 0x0806, 0x8100, 0x88A8
IPPROTO_HOPOPTS, IPPROTO_ICMP, IPPROTO_IPIP, IPPROTO_TCP, IPPROTO_UDP = 0, 1, 4, 6, 17
IPPROTO_IPV6, IPPROTO_ROUTING, IPPROTO_FRAGMENT, IPPROTO_ICMPV6, IPPROTO_DSTOPTS = 41, 43, 44, 58, 60

_TCP_FLAG_BITS = {"F": 0x01, "S": 0x02, "R": 0x04, "P": 0x08, "A": 0x10, "U": 0x20, "E": 0x40,
                  "C": 0x80, "N": 0x100}


# --------------------------------------------------------------------------------------------
# checksums and small helpers
# --------------------------------------------------------------------------------------------
def _sum16(data: bytes) -> int:
    """Ones'-complement sum of big-endian 16-bit words, reduced mod 0xFFFF (0 only for zeros).

    2**16 == 1 (mod 0xFFFF), so the end-around-carry sum of the words is the
    value of the byte string modulo 0xFFFF: one C-speed int conversion.
    """
    if len(data) & 1:
        data = data + b"\x00"
    s = int.from_bytes(data, "big") % 0xFFFF
    if s == 0 and any(data):
        s = 0xFFFF
    return s


def _fold(s: int) -> int:
    """Final checksum from a (possibly unreduced) sum: ~fold(s), never 0 for nonzero input."""
    r = s % 0xFFFF
    if r == 0 and s:
        r = 0xFFFF
    return 0xFFFF - r


def inet_csum(data: bytes, initial: int = 0) -> int:
    """RFC 1071 Internet checksum of ``data`` plus an initial partial sum."""
    return _fold(_sum16(data) + initial)


def _mac(mac: Union[str, bytes]) -> bytes:
    if isinstance(mac, (bytes, bytearray)):
        if len(mac) != 6:
            raise ValueError("MAC address must be 6 bytes")
        return bytes(mac)
    parts = mac.split(":")
    if len(parts) != 6:
        raise ValueError(f"bad MAC address {mac!r}")
    return bytes(int(p, 16) for p in parts)


def _addr(family: int, addr: Union[str, bytes]) -> bytes:
    if isinstance(addr, (bytes, bytearray)):
        return bytes(addr)
    return socket.inet_pton(socket.AF_INET if family == 4 else socket.AF_INET6, addr)


def _tcp_flags(flags: Union[str, int]) -> int:
    if isinstance(flags, int):
        return flags
    value = 0
    for ch in flags:
        try:
            value |= _TCP_FLAG_BITS[ch]
        except KeyError:
            raise ValueError(f"unknown TCP flag letter {ch!r} (use F S R P A U E C N)") from None
    return value


def _payload(payload: Union[bytes, int]) -> bytes:
    return b"a" * payload if isinstance(payload, int) else bytes(payload)


def _corrupt16_le(buf: bytearray, off: int, how: Union[bool, int]) -> None:
    """Make the checksum at ``off`` wrong.

    ``True`` does what the selftest does (``check - 1`` on the little-endian
    host value of the network-order field); an int stores that value.
    """
    if how is True:
        v = (int.from_bytes(buf[off:off + 2], "little") - 1) & 0xFFFF
        buf[off:off + 2] = v.to_bytes(2, "little")
    else:
        struct.pack_into("!H", buf, off, int(how) & 0xFFFF)


def wire_ns(frame_len: int, rate_bps: int = DEFAULT_RATE_BPS) -> int:
    """Time a frame occupies an Ethernet link: frame + FCS + preamble + IFG (24 bytes)."""
    return ((max(frame_len, 60) + 24) * 8 * 1_000_000_000) // rate_bps


# --------------------------------------------------------------------------------------------
# option helpers
# --------------------------------------------------------------------------------------------
def tcp_opts_ts(tsval: int, tsecr: int = 0, layout: str = "NNT") -> bytes:
    """12 bytes of TCP timestamp option plus two NOPs: layout NNT, NTN or TNN."""
    ts = struct.pack("!BBII", 8, 10, tsval & 0xFFFFFFFF, tsecr & 0xFFFFFFFF)
    return {"NNT": b"\x01\x01" + ts, "NTN": b"\x01" + ts + b"\x01", "TNN": ts + b"\x01\x01"}[layout]


def ipv4_ts_option() -> bytes:
    """The selftest's 40-byte IPv4 timestamp option (sizeof(struct ip_timestamp) in glibc):
    IPOPT_TS, length 40, pointer 5, flags TSONLY, nine empty slots."""
    return bytes([0x44, 40, 5, 0x00]) + bytes(36)


def v6_dstopts(data: bytes = b"\x00" * 6) -> Tuple[int, bytes]:
    """A Destination Options header; ``data`` is the option area (len % 8 == 6)."""
    if (len(data) + 2) % 8:
        raise ValueError("IPv6 option header data must make the header a multiple of 8 bytes")
    return (IPPROTO_DSTOPTS, bytes([(len(data) + 2) // 8 - 1]) + data)


def v6_hbh(data: bytes = b"\x00" * 6) -> Tuple[int, bytes]:
    """A Hop-by-Hop Options header (same layout as Destination Options)."""
    return (IPPROTO_HOPOPTS, v6_dstopts(data)[1])


def v6_frag(offset: int = 0, more: bool = False, ident: int = 0) -> Tuple[int, bytes]:
    """An IPv6 Fragment header (offset in 8-byte units)."""
    return (IPPROTO_FRAGMENT, b"\x00" + struct.pack("!HI", (offset << 3) | int(more), ident))


# --------------------------------------------------------------------------------------------
# layer builders
# --------------------------------------------------------------------------------------------
def _ipv4_header(src: bytes, dst: bytes, proto: int, payload_len: int, *, ttl: int, tos: int,
                 ip_id: int, df: bool, frag: Optional[Tuple[bool, int]], ip_options: bytes,
                 bad_ip_csum: Union[bool, int], evil: bool = False) -> bytes:
    opts = bytes(ip_options)
    if len(opts) % 4:
        opts += bytes(4 - len(opts) % 4)
    if len(opts) > 40:
        raise ValueError("IPv4 options are at most 40 bytes")
    ihl = 5 + len(opts) // 4
    frag_off = 0x4000 if df else 0
    if evil:
        frag_off |= 0x8000
    if frag is not None:
        more, offset = frag
        frag_off |= (0x2000 if more else 0) | (offset & 0x1FFF)
    hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos & 0xFF, ihl * 4 + payload_len,
                                ip_id & 0xFFFF, frag_off, ttl & 0xFF, proto, 0, src, dst) + opts)
    struct.pack_into("!H", hdr, 10, inet_csum(bytes(hdr)))
    if bad_ip_csum:
        _corrupt16_le(hdr, 10, bad_ip_csum)
    return bytes(hdr)


def _ipv6_header(src: bytes, dst: bytes, nexthdr: int, payload_len: int, *, hop: int, tc: int,
                 flow_label: int) -> bytes:
    first = (6 << 28) | ((tc & 0xFF) << 20) | (flow_label & 0xFFFFF)
    return struct.pack("!IHBB16s16s", first, payload_len, nexthdr, hop & 0xFF, src, dst)


def _v6_chain(l4_proto: int, v6_ext: Optional[Sequence[Tuple[int, bytes]]]) -> Tuple[int, bytes]:
    """First next-header value and the extension header bytes leading to ``l4_proto``."""
    if not v6_ext:
        return l4_proto, b""
    out = b""
    for i, (_typ, rest) in enumerate(v6_ext):
        nxt = v6_ext[i + 1][0] if i + 1 < len(v6_ext) else l4_proto
        hdr = bytes([nxt]) + bytes(rest)
        if len(hdr) % 8:
            raise ValueError("every IPv6 extension header must be a multiple of 8 bytes")
        out += hdr
    return v6_ext[0][0], out


def _pseudo_sum(family: int, src: bytes, dst: bytes, proto: int, length: int) -> int:
    if family == 4:
        return _sum16(src + dst + struct.pack("!BBH", 0, proto, length))
    return _sum16(src + dst + struct.pack("!IxxxB", length, proto))


def _l3_wrap(family: int, src: str, dst: str, proto: int, l4: bytes, *, ttl: int, tos: int,
             ip_id: int, df: bool, frag, ip_options: bytes, bad_ip_csum, flow_label: int,
             v6_ext, evil: bool = False) -> bytes:
    s, d = _addr(family, src), _addr(family, dst)
    if family == 4:
        return _ipv4_header(s, d, proto, len(l4), ttl=ttl, tos=tos, ip_id=ip_id, df=df, frag=frag,
                            ip_options=ip_options, bad_ip_csum=bad_ip_csum, evil=evil) + l4
    first, chain = _v6_chain(proto, v6_ext)
    return _ipv6_header(s, d, first, len(chain) + len(l4), hop=ttl, tc=tos, flow_label=flow_label) + chain + l4


def _ether(l3: bytes, ethertype: int, *, src_mac, dst_mac, vlan, vlan_tpids, pad_to_60: bool) -> bytes:
    tags = b""
    if vlan:
        if vlan_tpids is None:
            vlan_tpids = [ETH_P_8021AD if (len(vlan) > 1 and i == 0) else ETH_P_8021Q for i in range(len(vlan))]
        for tpid, tci in zip(vlan_tpids, vlan):
            tags += struct.pack("!HH", tpid, tci & 0xFFFF)
    frame = _mac(dst_mac) + _mac(src_mac) + tags + struct.pack("!H", ethertype) + l3
    if pad_to_60 and len(frame) < 60:
        frame += bytes(60 - len(frame))
    return frame


def _default_addrs(family: int, src, dst):
    if src is None:
        src = ADDR4_SRC if family == 4 else ADDR6_SRC
    if dst is None:
        dst = ADDR4_DST if family == 4 else ADDR6_DST
    return src, dst


def _outer_wrap(inner_family: int, inner: bytes, outer: dict) -> Tuple[int, bytes]:
    """Put ``inner`` (an IP packet) behind an outer IP header; returns (outer family, bytes)."""
    o = dict(outer)
    ofam = o.pop("family", inner_family)
    osrc, odst = _default_addrs(ofam, o.pop("src", None), o.pop("dst", None))
    args = dict(ttl=8, tos=0, ip_id=0, df=True, frag=None, ip_options=b"", bad_ip_csum=False,
                flow_label=0, v6_ext=None, evil=False)
    unknown = set(o) - set(args)
    if unknown:
        raise ValueError(f"unknown outer header fields: {sorted(unknown)}")
    args.update(o)
    proto = IPPROTO_IPIP if inner_family == 4 else IPPROTO_IPV6
    return ofam, _l3_wrap(ofam, osrc, odst, proto, inner, **args)


def tcp_frame(family: int = 4, src: Optional[str] = None, dst: Optional[str] = None,
              sport: int = SPORT, dport: int = DPORT, seq: int = START_SEQ, ack: int = START_ACK,
              flags: Union[str, int] = "A", window: int = 65535,
              payload: Union[bytes, int] = PAYLOAD_LEN, *, ttl: int = 8, tos: int = 0,
              ip_id: int = 0, df: bool = True, frag: Optional[Tuple[bool, int]] = None,
              evil: bool = False, ip_options: bytes = b"", tcp_options: bytes = b"",
              urg_ptr: int = 0, v6_ext: Optional[Sequence[Tuple[int, bytes]]] = None,
              flow_label: int = 0, vlan: Optional[Sequence[int]] = None,
              vlan_tpids: Optional[Sequence[int]] = None,
              src_mac: Union[str, bytes] = SELFTEST_SMAC, dst_mac: Union[str, bytes] = SELFTEST_DMAC,
              pad_to_60: bool = False, bad_tcp_csum: Union[bool, int] = False,
              bad_ip_csum: Union[bool, int] = False, csum_payload: Optional[bytes] = None,
              outer: Optional[dict] = None) -> bytes:
    """An Ethernet frame carrying one TCP segment.

    Defaults are the kernel selftest's packet: 192.168.1.200:1500 ->
    192.168.1.100:8000 (fdaa::2 -> fdaa::1 for ``family=6``), TTL/hop limit 8,
    DF, IP ID 0, ACK flag, window 65535, 100 bytes of ``'a'``.

    * ``payload``: bytes, or an int for that many ``'a'`` bytes.
    * ``flags``: letters F S R P A U E(CE) C(WR) N(AE), or the 9-bit value.
    * ``tos``: the IPv4 TOS byte, or the IPv6 traffic class. ``ttl`` is the hop limit for v6.
    * ``frag``: ``(more_fragments, offset_in_8_byte_units)`` for an IPv4 fragment;
      ``evil`` sets the reserved IPv4 flag bit.
    * ``ip_options`` (v4) / ``tcp_options``: raw bytes, zero-padded to 4.
    * ``v6_ext``: extension headers as ``(type, bytes after the next-header byte)``;
      see :func:`v6_dstopts`, :func:`v6_hbh`, :func:`v6_frag`.
    * ``vlan``: TCIs, outermost first (802.1ad outer tag for QinQ unless ``vlan_tpids``).
    * ``pad_to_60``: Ethernet minimum-size padding with zeros.
    * ``bad_tcp_csum`` / ``bad_ip_csum``: ``True`` = the selftest's off-by-one, or a value.
    * ``csum_payload``: compute the TCP checksum as if the segment carried these
      bytes (the selftest's ip_frag4 frame); the frame still carries ``payload``.
    * ``outer``: IPIP / IPv6-in-IPv6 / 4in6 / 6in4 encapsulation: a dict with the
      outer header's ``family, src, dst, ttl, tos, ip_id, df, frag, ip_options,
      bad_ip_csum, flow_label, v6_ext, evil`` (selftest defaults).
    """
    src, dst = _default_addrs(family, src, dst)
    s, d = _addr(family, src), _addr(family, dst)
    data = _payload(payload)
    opts = bytes(tcp_options)
    if len(opts) % 4:
        opts += bytes(4 - len(opts) % 4)
    if len(opts) > 40:
        raise ValueError("TCP options are at most 40 bytes")
    fl = _tcp_flags(flags)
    doff = 5 + len(opts) // 4
    hdr = bytearray(struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                                (doff << 4) | (fl >> 8), fl & 0xFF, window & 0xFFFF, 0, urg_ptr) + opts)
    cdata = data if csum_payload is None else bytes(csum_payload)
    pseudo = _pseudo_sum(family, s, d, IPPROTO_TCP, len(hdr) + len(cdata))
    struct.pack_into("!H", hdr, 16, inet_csum(bytes(hdr) + cdata, pseudo))
    if bad_tcp_csum:
        _corrupt16_le(hdr, 16, bad_tcp_csum)
    l3 = _l3_wrap(family, src, dst, IPPROTO_TCP, bytes(hdr) + data, ttl=ttl, tos=tos, ip_id=ip_id, df=df,
                  frag=frag, ip_options=ip_options, bad_ip_csum=bad_ip_csum, flow_label=flow_label,
                  v6_ext=v6_ext, evil=evil)
    fam = family
    if outer is not None:
        fam, l3 = _outer_wrap(family, l3, outer)
    return _ether(l3, ETH_P_IP if fam == 4 else ETH_P_IPV6, src_mac=src_mac, dst_mac=dst_mac,
                  vlan=vlan, vlan_tpids=vlan_tpids, pad_to_60=pad_to_60)


def udp_frame(family: int = 4, src: Optional[str] = None, dst: Optional[str] = None,
              sport: int = 4000, dport: int = 4789, payload: Union[bytes, int] = 100, *,
              ttl: int = 64, tos: int = 0, ip_id: int = 0, df: bool = True,
              frag: Optional[Tuple[bool, int]] = None, ip_options: bytes = b"",
              v6_ext: Optional[Sequence[Tuple[int, bytes]]] = None, flow_label: int = 0,
              vlan: Optional[Sequence[int]] = None, vlan_tpids: Optional[Sequence[int]] = None,
              src_mac: Union[str, bytes] = SELFTEST_SMAC, dst_mac: Union[str, bytes] = SELFTEST_DMAC,
              pad_to_60: bool = False, zero_csum: bool = False, bad_udp_csum: Union[bool, int] = False,
              bad_ip_csum: Union[bool, int] = False, outer: Optional[dict] = None) -> bytes:
    """An Ethernet frame carrying one UDP datagram (checksum computed; 0 -> 0xFFFF).

    ``zero_csum`` sends checksum 0 (no checksum, IPv4 only in practice).
    """
    src, dst = _default_addrs(family, src, dst)
    s, d = _addr(family, src), _addr(family, dst)
    data = _payload(payload)
    hdr = bytearray(struct.pack("!HHHH", sport, dport, 8 + len(data), 0))
    if not zero_csum:
        c = inet_csum(bytes(hdr) + data, _pseudo_sum(family, s, d, IPPROTO_UDP, 8 + len(data)))
        struct.pack_into("!H", hdr, 6, c or 0xFFFF)
        if bad_udp_csum:
            _corrupt16_le(hdr, 6, bad_udp_csum)
    l3 = _l3_wrap(family, src, dst, IPPROTO_UDP, bytes(hdr) + data, ttl=ttl, tos=tos, ip_id=ip_id, df=df,
                  frag=frag, ip_options=ip_options, bad_ip_csum=bad_ip_csum, flow_label=flow_label,
                  v6_ext=v6_ext)
    fam = family
    if outer is not None:
        fam, l3 = _outer_wrap(family, l3, outer)
    return _ether(l3, ETH_P_IP if fam == 4 else ETH_P_IPV6, src_mac=src_mac, dst_mac=dst_mac,
                  vlan=vlan, vlan_tpids=vlan_tpids, pad_to_60=pad_to_60)


def icmp_echo_frame(family: int = 4, src: Optional[str] = None, dst: Optional[str] = None,
                    ident: int = 1, seqno: int = 1, payload: Union[bytes, int] = 56, *,
                    reply: bool = False, ttl: int = 64, ip_id: int = 0,
                    vlan: Optional[Sequence[int]] = None,
                    src_mac: Union[str, bytes] = SELFTEST_SMAC,
                    dst_mac: Union[str, bytes] = SELFTEST_DMAC) -> bytes:
    """ICMP (v4) or ICMPv6 echo request/reply with a correct checksum."""
    src, dst = _default_addrs(family, src, dst)
    data = bytes(range(256))[:payload] if isinstance(payload, int) and payload <= 256 else _payload(payload)
    if family == 4:
        typ, proto, pseudo = (0 if reply else 8), IPPROTO_ICMP, 0
    else:
        typ, proto = (129 if reply else 128), IPPROTO_ICMPV6
        pseudo = _pseudo_sum(6, _addr(6, src), _addr(6, dst), IPPROTO_ICMPV6, 8 + len(data))
    hdr = bytearray(struct.pack("!BBHHH", typ, 0, 0, ident, seqno))
    struct.pack_into("!H", hdr, 2, inet_csum(bytes(hdr) + data, pseudo))
    l3 = _l3_wrap(family, src, dst, proto, bytes(hdr) + data, ttl=ttl, tos=0, ip_id=ip_id, df=(family == 4),
                  frag=None, ip_options=b"", bad_ip_csum=False, flow_label=0, v6_ext=None)
    return _ether(l3, ETH_P_IP if family == 4 else ETH_P_IPV6, src_mac=src_mac, dst_mac=dst_mac,
                  vlan=vlan, vlan_tpids=None, pad_to_60=False)


def arp_frame(op: int = 1, sender_mac: Union[str, bytes] = SELFTEST_SMAC, sender_ip: str = ADDR4_SRC,
              target_mac: Union[str, bytes] = "00:00:00:00:00:00", target_ip: str = ADDR4_DST,
              dst_mac: Optional[Union[str, bytes]] = None, pad_to_60: bool = True) -> bytes:
    """ARP request (op 1, broadcast) or reply (op 2), padded to 60 bytes like a real wire."""
    if dst_mac is None:
        dst_mac = "ff:ff:ff:ff:ff:ff" if op == 1 else target_mac
    body = struct.pack("!HHBBH6s4s6s4s", 1, ETH_P_IP, 6, 4, op, _mac(sender_mac), _addr(4, sender_ip),
                       _mac(target_mac), _addr(4, target_ip))
    return _ether(body, ETH_P_ARP, src_mac=sender_mac, dst_mac=dst_mac, vlan=None, vlan_tpids=None,
                  pad_to_60=pad_to_60)


# --------------------------------------------------------------------------------------------
# Scenario
# --------------------------------------------------------------------------------------------
@dataclass
class Scenario:
    """One selftest case, ready to replay.

    ``expected_order`` pairs every expected delivery with its TCP source port
    (only capacity has several flows); ``expected_kernel`` is its size column.
    ``special`` maps frame indices to deliberate anomalies (``bad_tcp_csum``,
    ``bad_ip_csum``, ``tcp_csum_full_datagram``, ``padded``).
    """

    name: str                              # "ipv4/data_same"
    case: str                              # "data_same"
    proto: str                             # "ipv4" | "ipv6" | "ipip" | "ip6ip6"
    family: int                            # 4 or 6: the inner (TCP-carrying) header
    frames: List[bytes]                    # send order, the closing FIN included
    timestamps_ns: List[int]               # relative send times, pauses included
    expected_order: List[Tuple[int, int]]  # (sport, TCP payload bytes), veth replay, delivery order
    expected_paused: List[int]             # the same with every pause honoured (full flush)
    expected_selftest: List[int]           # the selftest's list (sizes before the FIN)
    pauses: List[Tuple[int, int]] = field(default_factory=list)  # (index of the frame after, ns)
    sport: int = SPORT
    optional: bool = False                 # tunnel variants: the engine may not support them yet
    special: Dict[int, str] = field(default_factory=dict)
    notes: str = ""

    @property
    def expected_kernel(self) -> List[int]:
        """TCP payload sizes Linux 6.18 delivers in a veth replay (FIN = 0), in order."""
        return [n for _, n in self.expected_order]

    def records(self, start_ts_ns: int = 0) -> List[Tuple[int, bytes]]:
        """``(timestamp_ns, frame)`` pairs from ``start_ts_ns``."""
        return [(start_ts_ns + t, f) for t, f in zip(self.timestamps_ns, self.frames)]

    @property
    def duration_ns(self) -> int:
        if not self.frames:
            return 0
        return self.timestamps_ns[-1] + wire_ns(len(self.frames[-1]))


PROTOS = ("ipv4", "ipv6", "ipip", "ip6ip6")


class _Case:
    """Builds one case's frames the way gro.c's create_packet() does for a protocol."""

    def __init__(self, proto: str, sport: int):
        if proto not in PROTOS:
            raise ValueError(f"unknown selftest protocol {proto!r}; one of {PROTOS}")
        self.proto = proto
        self.family = 6 if proto in ("ipv6", "ip6ip6") else 4
        self.tunnel = proto in ("ipip", "ip6ip6")
        self.sport = sport
        self.frames: List[bytes] = []
        self.pauses: List[Tuple[int, int]] = []
        self.special: Dict[int, str] = {}

    @property
    def l3l4_len(self) -> int:
        """total_hdr_len - ETH_HLEN in gro.c: every IP header plus the 20-byte TCP header."""
        ip = 20 if self.family == 4 else 40
        return ip * (2 if self.tunnel else 1) + 20

    def pkt(self, off: int, n: int, *, ack_off: int = 0, flags: str = "A", sport: Optional[int] = None,
            l3: Optional[dict] = None, payload: Optional[bytes] = None, **tcp) -> bytes:
        """P(off, n). ``l3`` modifies the outermost IP header (gro.c edits buf + ETH_HLEN)."""
        l3 = dict(l3 or {})
        kw = dict(family=self.family, sport=self.sport if sport is None else sport,
                  seq=START_SEQ + off, ack=START_ACK + ack_off, flags=flags,
                  payload=n if payload is None else payload)
        kw.update(tcp)
        if self.tunnel:
            outer = {"family": self.family}
            outer.update(l3)
            return tcp_frame(outer=outer, **kw)
        return tcp_frame(**kw, **l3)

    def send(self, frame: bytes, special: Optional[str] = None) -> None:
        if special:
            self.special[len(self.frames)] = special
        self.frames.append(frame)

    def pause(self, ns: int) -> None:
        self.pauses.append((len(self.frames), ns))

    def fin(self, delay: bool = False) -> None:
        """The closing FIN: seq offset 200, no payload (gro.c's fin_pkt)."""
        if delay:
            self.pause(FIN_DELAY_NS)
        self.send(self.pkt(PAYLOAD_LEN * 2, 0, flags="FA"))

    def done(self, case: str, kernel: Sequence, selftest: Sequence[int], paused: Optional[Sequence] = None,
             notes: str = "", optional: Optional[bool] = None) -> Scenario:
        order = [(x if isinstance(x, tuple) else (self.sport, x)) for x in kernel]
        if paused is None:
            paused_sizes = [n for _, n in order]
        else:
            paused_sizes = [x[1] if isinstance(x, tuple) else x for x in paused]
        ts, t = [], 0
        pause_at = dict(self.pauses)
        for i, f in enumerate(self.frames):
            t += pause_at.get(i, 0)
            ts.append(t)
            t += wire_ns(len(f))
        return Scenario(name=f"{self.proto}/{case}", case=case, proto=self.proto, family=self.family,
                        frames=list(self.frames), timestamps_ns=ts, expected_order=order,
                        expected_paused=paused_sizes, expected_selftest=list(selftest),
                        pauses=list(self.pauses), sport=self.sport,
                        optional=self.tunnel if optional is None else optional,
                        special=dict(self.special), notes=notes)


def large_params(proto: str) -> Tuple[int, int, int, int]:
    """(mss, max_payload, full segments, remainder) of the large_* cases for a protocol.

    An aggregate's IP-level length (p->len) must stay below 65536
    (skb_gro_receive refuses p->len + len >= 65536), so it may reach 65535
    bytes from the outermost IP header on: max payload = 65535 - headers.
    The selftest's MSS is 4096 - headers.
    """
    hdrs = _Case(proto, SPORT).l3l4_len
    mss = ASSUMED_MTU - hdrs
    maxpay = IP_MAXPACKET - hdrs
    return mss, maxpay, maxpay // mss, maxpay % mss


# --------------------------------------------------------------------------------------------
# the selftest cases
# --------------------------------------------------------------------------------------------
def _data_pkts(c: _Case, n1: int, n2: int, **kw2) -> None:
    c.send(c.pkt(0, n1))
    c.send(c.pkt(n1, n2, **kw2), kw2.get("pad_to_60") and "padded" or None)


def case_data_same(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _data_pkts(c, PAYLOAD_LEN, PAYLOAD_LEN)
    c.fin()
    return c.done("data_same", [200, 0], [200])


def case_data_lrg_sml(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _data_pkts(c, PAYLOAD_LEN, PAYLOAD_LEN // 2)
    c.fin()
    return c.done("data_lrg_sml", [150, 0], [150], notes="the short last segment joins, then completes p")


def case_data_lrg_1byte(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _data_pkts(c, PAYLOAD_LEN, 1)
    c.fin()
    return c.done("data_lrg_1byte", [101, 0], [101],
                  notes="as the selftest sends it over veth: the 1-byte frame is NOT padded "
                        "(55 bytes for IPv4); see data_lrg_1byte_pad60 for the wire form")


def case_data_lrg_1byte_pad60(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    """Not a selftest case: data_lrg_1byte as it arrives from a real wire (IPv4 only)."""
    if proto != "ipv4":
        raise ValueError("data_lrg_1byte_pad60 exists for plain IPv4 only (other frames exceed 60 bytes)")
    c = _Case(proto, sport)
    _data_pkts(c, PAYLOAD_LEN, 1, pad_to_60=True)
    c.send(c.pkt(PAYLOAD_LEN * 2, 0, flags="FA", pad_to_60=True), "padded")
    return c.done("data_lrg_1byte_pad60", [100, 1, 0], [101],
                  notes="the 1-byte segment padded to 60 bytes (IP length < frame): on 6.18 "
                        "inet_gro_receive flags it, so it cannot merge; it completes the held 100 "
                        "and goes alone (kernel-oracle.md (g)). The newest selftest expects [101] "
                        "from a later kernel that trims the padding")


def case_data_sml_lrg(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _data_pkts(c, PAYLOAD_LEN // 2, PAYLOAD_LEN)
    c.fin()
    return c.done("data_sml_lrg", [50, 100, 0], [50, 100])


def case_data_burst(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN))
    c.pause(BURST_DELAY_NS)
    c.send(c.pkt(PAYLOAD_LEN * 2, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN * 3, PAYLOAD_LEN))
    c.fin()
    return c.done("data_burst", [400, 0], [200, 200], paused=[200, 200, 0],
                  notes="the 100 ms pause makes two polls in the real selftest ([200, 200]); "
                        "replayed without it the four segments are contiguous and merge into 400")


def case_ack(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    pure = c.pkt(0, 0)
    c.send(pure)
    c.send(pure)
    c.send(c.pkt(0, 0, ack_off=1))
    c.fin()
    return c.done("ack", [0, 0, 0, 0], [0, 0, 0], notes="pure ACKs are never held")


def _flags(c: _Case, psh=False, syn=False, rst=False, urg=False, cwr=False) -> None:
    """gro.c send_flags(): 5 packets, #2 (and #1 for CWR) carry the flag."""
    flag_len = PAYLOAD_LEN if (psh or cwr) else 0
    extra = "A" + ("P" if psh else "") + ("S" if syn else "") + ("R" if rst else "") + \
        ("U" if urg else "") + ("C" if cwr else "")
    flag_idx = (NUM_PACKETS // 2, NUM_PACKETS // 2 - 1)
    for i in range(NUM_PACKETS + 1):
        if i == flag_idx[0] or (i == flag_idx[1] and cwr):
            c.send(c.pkt(i * flag_len, flag_len, flags=extra))
        else:
            c.send(c.pkt(i * PAYLOAD_LEN, PAYLOAD_LEN))


def case_flags_psh(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _flags(c, psh=True)
    c.fin()
    return c.done("flags_psh", [300, 200, 0], [300, 200])


def case_flags_syn(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _flags(c, syn=True)
    c.fin()
    return c.done("flags_syn", [200, 0, 200, 0], [200, 0, 200],
                  notes="#2 is a 0-byte SYN at seq offset 0")


def case_flags_rst(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _flags(c, rst=True)
    c.fin()
    return c.done("flags_rst", [200, 0, 200, 0], [200, 0, 200])


def case_flags_urg(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _flags(c, urg=True)
    c.fin()
    return c.done("flags_urg", [200, 0, 200, 0], [200, 0, 200], notes="URG set, urgent pointer 0")


def case_flags_cwr(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _flags(c, cwr=True)
    c.fin()
    return c.done("flags_cwr", [100, 100, 100, 200, 0], [100, 200, 200],
                  notes="6.18: an incoming CWR segment completes p and is held alone; the next "
                        "segment differs in CWR, so each CWR segment goes out alone. The newest "
                        "selftest's [100, 200, 200] belongs to a later kernel")


def case_tcp_csum(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, bad_tcp_csum=True), "bad_tcp_csum")
    c.fin(delay=True)
    return c.done("tcp_csum", [100, 100, 0], [100, 100],
                  notes="the bad segment goes NORMAL at once (before the held first segment); "
                        "held P(0) is completed by the FIN")


def case_tcp_seq(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN + 1, PAYLOAD_LEN))
    c.fin(delay=True)
    return c.done("tcp_seq", [100, 100, 0], [100, 100])


def case_tcp_ts(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    # gro.c stores tsval in host order and, for the last layout, leaves byte 10 of the option
    # area as the previous packet's zero; neither matters to GRO (the bytes differ either way),
    # so the documented layouts with network-order values are built here.
    c = _Case(proto, sport)
    for i, (ts, layout) in enumerate([(0, "NNT"), (0, "NNT"), (100, "NNT"), (100, "NTN"), (100, "TNN")]):
        c.send(c.pkt(i * PAYLOAD_LEN, PAYLOAD_LEN, tcp_options=tcp_opts_ts(ts, 0, layout)))
    c.fin(delay=True)
    return c.done("tcp_ts", [200, 100, 100, 100, 0], [200, 100, 100, 100])


def case_tcp_opt(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    # gro.c writes NOP + window scale at MAX_HDR_LEN, which is past the option area for most
    # protocols (the bytes end up zero); GRO sees a different data offset either way.
    c = _Case(proto, sport)
    ts = tcp_opts_ts(0, 0, "NNT")
    c.send(c.pkt(0, PAYLOAD_LEN, tcp_options=ts))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, tcp_options=ts))
    c.send(c.pkt(PAYLOAD_LEN * 2, PAYLOAD_LEN, tcp_options=b"\x01\x03\x03\x00"))
    c.fin(delay=True)
    return c.done("tcp_opt", [200, 100, 0], [200, 100])


def case_ip_ecn(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, l3={"tos": 0x02}))   # ECN field 10 (ECT(0))
    c.fin()
    return c.done("ip_ecn", [100, 100, 0], [100, 100])


def case_ip_tos(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    # v4: tos = 1; v6: ip6h->priority = 0xf, the traffic class's upper nibble
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, l3={"tos": 0x01 if c.family == 4 else 0xF0}))
    c.fin()
    return c.done("ip_tos", [100, 100, 0], [100, 100])


def _v4_only(c: _Case, case: str) -> None:
    if c.family != 4:
        raise ValueError(f"{case} is an IPv4 case (ipv4, ipip)")


def _v6_only(c: _Case, case: str) -> None:
    if c.proto != "ipv6":
        raise ValueError(f"{case} is a plain IPv6 case")


def case_ip_csum(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _v4_only(c, "ip_csum")
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, l3={"bad_ip_csum": True}), "bad_ip_csum")
    c.send(c.pkt(PAYLOAD_LEN * 2, PAYLOAD_LEN))
    c.fin(delay=True)
    return c.done("ip_csum", [100, 100, 100, 0], [100, 100, 100],
                  notes="the bad-header frame goes NORMAL at once; P(200) then misses seq and "
                        "completes P(0); the FIN completes P(200)")


def case_ip_ttl(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _v4_only(c, "ip_ttl")
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, l3={"ttl": 7}))
    c.fin()
    return c.done("ip_ttl", [100, 100, 0], [100, 100])


def case_ip_opt(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    # ipip: gro.c inserts the option after the inner header while raising the outer IHL
    # (a malformed frame); a well-formed outer option is built instead, same GRO outcome.
    c = _Case(proto, sport)
    _v4_only(c, "ip_opt")
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, l3={"ip_options": ipv4_ts_option()}))
    c.send(c.pkt(PAYLOAD_LEN * 2, PAYLOAD_LEN))
    c.fin(delay=True)
    return c.done("ip_opt", [100, 100, 100, 0], [100, 100, 100],
                  notes="IHL != 5 goes NORMAL without touching the held P(0)")


def case_ip_frag4(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    # ipip: gro.c rewrites the outer header as a plain TCP one; a well-formed outer fragment
    # is built instead, same GRO outcome.
    c = _Case(proto, sport)
    _v4_only(c, "ip_frag4")
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, csum_payload=b"a" * (PAYLOAD_LEN * 2),
                 l3={"frag": (True, 0), "df": True}), "tcp_csum_full_datagram")
    c.fin(delay=True)
    return c.done("ip_frag4", [100, 100, 0], [100, 100],
                  notes="first fragment (MF+DF, offset 0) whose TCP checksum covers 200 bytes "
                        "of which 100 are sent")


_ID_CASES = {
    "ip_id_df1_inc": (True, [8, 9], [200, 0], [200]),
    "ip_id_df1_fixed": (True, [8, 8], [200, 0], [200]),
    "ip_id_df0_inc": (False, [8, 9], [200, 0], [200]),
    "ip_id_df0_fixed": (False, [8, 8], [200, 0], [200]),
    "ip_id_df1_inc_fixed": (True, [8, 9, 9], [200, 100, 0], [200, 100]),
    "ip_id_df1_fixed_inc": (True, [8, 8, 9], [200, 100, 0], [200, 100]),
}


def _ip_id_case(name: str, proto: str, sport: int) -> Scenario:
    df, ids, kernel, selftest = _ID_CASES[name]
    c = _Case(proto, sport)
    _v4_only(c, name)
    for i, ip_id in enumerate(ids):
        c.send(c.pkt(i * PAYLOAD_LEN, PAYLOAD_LEN, l3={"ip_id": ip_id, "df": df}))
    c.fin(delay=True)
    return c.done(name, kernel, selftest,
                  notes="6.18 inet_gro_flush: the second packet picks fixed or incrementing ID "
                        "mode; fixed mode no longer needs DF")


def case_ip_id_df1_inc(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df1_inc", proto, sport)


def case_ip_id_df1_fixed(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df1_fixed", proto, sport)


def case_ip_id_df0_inc(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df0_inc", proto, sport)


def case_ip_id_df0_fixed(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df0_fixed", proto, sport)


def case_ip_id_df1_inc_fixed(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df1_inc_fixed", proto, sport)


def case_ip_id_df1_fixed_inc(proto="ipv4", sport=SPORT):
    return _ip_id_case("ip_id_df1_fixed_inc", proto, sport)


def case_ip_frag6(proto: str = "ipv6", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _v6_only(c, "ip_frag6")
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN))
    c.pause(FRAG6_DELAY_NS)
    c.send(c.pkt(PAYLOAD_LEN * 2, PAYLOAD_LEN, v6_ext=[v6_frag()]))
    c.send(c.pkt(PAYLOAD_LEN * 3, PAYLOAD_LEN))
    c.fin(delay=True)
    return c.done("ip_frag6", [100, 200, 100, 0], [200, 100, 100], paused=[200, 100, 100, 0],
                  notes="without the 1 s pause the fragment (no GRO handler: NORMAL at once) "
                        "overtakes the held 200; P(300) misses seq and completes it")


def _v6ext(c: _Case, data1: bytes, data2: bytes) -> None:
    c.send(c.pkt(0, PAYLOAD_LEN, v6_ext=[v6_dstopts(data1)]))
    c.send(c.pkt(PAYLOAD_LEN, PAYLOAD_LEN, v6_ext=[v6_dstopts(data2)]))


def case_ip_v6ext_same(proto: str = "ipv6", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _v6_only(c, "ip_v6ext_same")
    _v6ext(c, b"\x00" * 6, b"\x00" * 6)
    c.fin(delay=True)
    return c.done("ip_v6ext_same", [0, 200], [200], paused=[200, 0],
                  notes="the FIN has no Destination Options header, so it is another GRO flow "
                        "(nexthdr differs): it goes NORMAL at once and the held 200 comes out "
                        "at the end of the poll, after it")


def case_ip_v6ext_diff(proto: str = "ipv6", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    _v6_only(c, "ip_v6ext_diff")
    _v6ext(c, b"\x00" * 6, b"\x11" * 6)
    c.fin(delay=True)
    return c.done("ip_v6ext_diff", [0, 100, 100], [100, 100], paused=[100, 100, 0],
                  notes="different extension bytes are different GRO flows: both segments are "
                        "held separately until the poll ends (oldest first); the FIN (no "
                        "extension header) overtakes them")


def _large(c: _Case, remainder: int) -> None:
    mss, _maxpay, num, _rem = large_params(c.proto)
    for i in range(num):
        c.send(c.pkt(i * mss, mss))
    c.send(c.pkt(num * mss, remainder))
    c.send(c.pkt((num + 1) * mss, remainder))


def case_large_max(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    mss, maxpay, num, rem = large_params(proto)
    _large(c, rem)
    c.fin()
    return c.done("large_max", [maxpay, rem, 0], [maxpay, rem],
                  notes=f"{num} x {mss} + {rem} fills exactly 65535 bytes of IP length; the last "
                        f"{rem} is not contiguous and goes alone")


def case_large_rem(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    mss, maxpay, num, rem = large_params(proto)
    _large(c, rem + 1)
    c.fin()
    return c.done("large_rem", [maxpay - rem, rem + 1, rem + 1, 0], [maxpay - rem, rem + 1, rem + 1],
                  notes=f"the {rem + 1}-byte segment would make p 65536 bytes: p is completed and "
                        "the segment is held alone; the non-contiguous one completes it")


def case_single(proto: str = "ipv4", sport: int = SPORT) -> Scenario:
    c = _Case(proto, sport)
    c.send(c.pkt(0, PAYLOAD_LEN))
    c.fin()
    return c.done("single", [100, 0], [100])


def case_capacity(proto: str = "ipv4", sport: int = SPORT, num_flows: int = 8) -> Scenario:
    """F flows (sport + i, 200 bytes of 'a' + i): every first segment, then every second (PSH).

    veth: all flows share GRO bucket 0 of at most 8 held packets, so flow j's
    first segment evicts the oldest held one (flow j - 8) once 8 are held.
    """
    c = _Case(proto, sport)
    for pkt_idx in (0, 1):
        for i in range(num_flows):
            c.send(c.pkt(pkt_idx * CAPACITY_PAYLOAD_LEN, CAPACITY_PAYLOAD_LEN, sport=sport + i,
                         flags="AP" if pkt_idx else "A",
                         payload=bytes([(0x61 + i) & 0xFF]) * CAPACITY_PAYLOAD_LEN))
    c.fin(delay=True)
    evicted = max(0, num_flows - 8)
    order: List[Tuple[int, int]] = []
    order += [(sport + i, CAPACITY_PAYLOAD_LEN) for i in range(evicted)]          # evicted firsts
    order += [(sport + i, CAPACITY_PAYLOAD_LEN) for i in range(evicted)]          # lone PSH seconds
    order += [(sport + i, 2 * CAPACITY_PAYLOAD_LEN) for i in range(evicted, num_flows)]
    order += [(sport, 0)]
    return c.done(f"capacity_{num_flows}", order, [2 * CAPACITY_PAYLOAD_LEN] * num_flows,
                  notes=f"{num_flows} flows; at most 8 coalesce on veth (one hash bucket, "
                        "MAX_GRO_SKBS = 8); a NIC with RSS spreads flows over 8 buckets")


def case_capacity_8(proto="ipv4", sport=SPORT):
    return case_capacity(proto, sport, 8)


def case_capacity_9(proto="ipv4", sport=SPORT):
    return case_capacity(proto, sport, 9)


def case_capacity_16(proto="ipv4", sport=SPORT):
    return case_capacity(proto, sport, 16)


COMMON_CASES = ("data_same", "data_lrg_sml", "data_sml_lrg", "data_lrg_1byte", "data_burst", "ack",
                "flags_psh", "flags_syn", "flags_rst", "flags_urg", "flags_cwr",
                "tcp_csum", "tcp_seq", "tcp_ts", "tcp_opt", "ip_ecn", "ip_tos", "large_max", "large_rem",
                "single", "capacity_8", "capacity_9", "capacity_16")
V4_CASES = ("ip_csum", "ip_ttl", "ip_opt", "ip_frag4", "ip_id_df1_inc", "ip_id_df1_fixed",
            "ip_id_df0_inc", "ip_id_df0_fixed", "ip_id_df1_inc_fixed", "ip_id_df1_fixed_inc")
V6_CASES = ("ip_frag6", "ip_v6ext_same", "ip_v6ext_diff")
EXTRA_CASES = {"ipv4": ("data_lrg_1byte_pad60",)}

CASES = {name: globals()["case_" + name]
         for name in COMMON_CASES + V4_CASES + V6_CASES + ("data_lrg_1byte_pad60",)}


def case_names(proto: str) -> List[str]:
    """The cases the selftest runs for a protocol (gro.py order), plus grotool's extras."""
    names = list(COMMON_CASES)
    if proto in ("ipv4", "ipip"):
        names += V4_CASES
    elif proto == "ipv6":
        names += V6_CASES
    names += EXTRA_CASES.get(proto, ())
    return names


def selftest_scenarios(proto: str = "ipv4", sport: Optional[int] = None, sport_step: int = 0) -> List[Scenario]:
    """Every case of one protocol. With ``sport_step``, case k uses ``sport + k * sport_step``."""
    base = SPORT if sport is None else sport
    return [CASES[name](proto, base + k * sport_step) for k, name in enumerate(case_names(proto))]


def all_scenarios(include_optional: bool = False) -> List[Scenario]:
    """IPv4 and IPv6 cases; with ``include_optional`` also the ipip and ip6ip6 variants."""
    out = selftest_scenarios("ipv4") + selftest_scenarios("ipv6")
    if include_optional:
        out += selftest_scenarios("ipip") + selftest_scenarios("ip6ip6")
    return out


# --------------------------------------------------------------------------------------------
# pcap output
# --------------------------------------------------------------------------------------------
Record = Tuple[int, bytes]


def write_pcap(path: str, frames: Iterable[Union[bytes, Record]], start_ts_ns: int = 1_700_000_000_000_000_000,
               gap_ns: int = 1_000, timestamps: Optional[Sequence[int]] = None) -> int:
    """Write an Ethernet nanosecond pcap through grotool.io.capture.PcapWriter (atomic).

    ``frames`` holds ``bytes`` (stamped ``start_ts_ns + i * gap_ns``, or
    ``start_ts_ns + timestamps[i]`` when given) or ``(ts_ns, bytes)`` records
    (absolute; used as they are).  Returns the number of packets written.
    """
    from .io.capture import LINKTYPE_ETHERNET, PcapWriter

    with PcapWriter(path, LINKTYPE_ETHERNET) as w:
        for i, item in enumerate(frames):
            if isinstance(item, tuple):
                ts, data = item
            else:
                data = item
                ts = start_ts_ns + (timestamps[i] if timestamps is not None else i * gap_ns)
            w.write(ts, data)
        return w.packets


# --------------------------------------------------------------------------------------------
# bulk traffic
# --------------------------------------------------------------------------------------------
class _BulkFlow:
    __slots__ = ("hdr", "payload", "ip_off", "tcp_off", "family", "base_sum", "ip_base", "seq", "ack",
                 "ip_id", "tsval", "tsecr", "left", "sent", "burst_left", "ts_every", "frame_len",
                 "sport", "ts_phase")


def _bulk_flow(i: int, family: int, rng: random.Random, mss: int, segs: int, sport_base: int, dport: int,
               ts_every: int, vlan: Optional[Sequence[int]], src_mac: str, dst_mac: str, ttl: int) -> _BulkFlow:
    f = _BulkFlow()
    f.family = family
    if family == 4:
        src, dst = f"10.1.{(i >> 8) & 0xFF}.{(i & 0xFF) + 1}", "10.0.0.1"
    else:
        src, dst = f"fd00:1::{i + 1:x}", "fd00::1"
    f.sport = sport_base + i
    f.payload = rng.randbytes(mss)
    f.seq = rng.getrandbits(32)
    f.ack = rng.getrandbits(32)
    f.ip_id = rng.getrandbits(16)
    f.tsval = rng.getrandbits(32)
    f.tsecr = rng.getrandbits(32)
    f.ts_every = max(1, ts_every)
    f.ts_phase = rng.randrange(f.ts_every)
    f.left = segs
    f.sent = 0
    f.burst_left = 0
    # one template frame; per segment only seq/ack/flags/TS/ID and the checksums change
    tmpl = tcp_frame(family, src, dst, f.sport, dport, 0, 0, "A", 65535, f.payload, ttl=ttl, tos=0,
                     ip_id=0, df=True, tcp_options=tcp_opts_ts(0, 0), vlan=vlan, src_mac=src_mac,
                     dst_mac=dst_mac)
    eth_len = 14 + 4 * len(vlan or ())
    f.ip_off = eth_len
    f.tcp_off = eth_len + (20 if family == 4 else 40)
    hdr = bytearray(tmpl[:f.tcp_off + 32])
    f.frame_len = len(tmpl)
    # zero the varying fields and the checksums, then take the constant sums
    struct.pack_into("!IIH", hdr, f.tcp_off + 4, 0, 0, 0)    # seq, ack, doff/flags
    struct.pack_into("!H", hdr, f.tcp_off + 16, 0)
    struct.pack_into("!II", hdr, f.tcp_off + 24, 0, 0)
    s, d = _addr(family, src), _addr(family, dst)
    f.base_sum = (_pseudo_sum(family, s, d, IPPROTO_TCP, 32 + mss) + _sum16(bytes(hdr[f.tcp_off:]))
                  + _sum16(f.payload))
    if family == 4:
        struct.pack_into("!HH", hdr, f.ip_off + 4, 0, 0x4000)
        struct.pack_into("!H", hdr, f.ip_off + 10, 0)
        f.ip_base = _sum16(bytes(hdr[f.ip_off:f.ip_off + 20]))
    else:
        f.ip_base = 0
    f.hdr = hdr
    return f


def bulk_flows(n_flows: int, segs_per_flow: int, mss: int = 1448, interleave: str = "round_robin",
               seed: int = 1, *, family: Union[int, str] = 4, start_ts_ns: int = 1_700_000_000_000_000_000,
               rate_bps: int = DEFAULT_RATE_BPS, ts_every: int = 8, burst: Tuple[int, int] = (4, 44),
               psh_prob: float = 0.25, ack_change_prob: float = 0.25, sport_base: int = 40000,
               dport: int = 5201, vlan: Optional[Sequence[int]] = None, ttl: int = 64,
               src_mac: str = "02:00:00:00:00:01", dst_mac: str = "02:00:00:00:00:02") -> Iterator[Record]:
    """Yield ``(ts_ns, frame)`` for ``n_flows`` bulk TCP senders of ``segs_per_flow`` full segments.

    Each flow (``10.1.x.y:sport_base+i -> 10.0.0.1:5201``, or ``fd00:1::i -> fd00::1``;
    ``family="mixed"`` alternates v4 and v6) sends ``mss``-byte segments in
    bursts of ``burst`` segments (a TSO super-packet's worth): random ISN, IPv4
    ID +1 per segment with DF, NOP NOP TS options whose TSval ticks every
    ``ts_every`` segments of the flow (random phase), ACK number and TSecr
    constant within a burst and changed between bursts with probability
    ``ack_change_prob``, PSH on a burst's last segment with probability
    ``psh_prob``.  Checksums are correct.

    ``interleave``: ``"round_robin"`` takes one segment from each active flow in
    turn; ``"bursty"`` sends a whole burst of one flow at a time, the next flow
    chosen at random.  Timestamps are back to back at ``rate_bps``.
    Deterministic for a given ``seed``.
    """
    if interleave not in ("round_robin", "bursty"):
        raise ValueError("interleave must be 'round_robin' or 'bursty'")
    if not 1 <= mss <= 9000:
        raise ValueError("mss must be 1..9000")
    rng = random.Random(seed)
    flows = []
    for i in range(n_flows):
        fam = (4 if i % 2 == 0 else 6) if family == "mixed" else int(family)
        flows.append(_bulk_flow(i, fam, rng, mss, segs_per_flow, sport_base, dport, ts_every, vlan,
                                src_mac, dst_mac, ttl))
    bmin, bmax = burst
    pack_into = struct.pack_into
    randrange, rand = rng.randrange, rng.random
    cum_bits = 0

    def new_burst(f: _BulkFlow) -> None:
        f.burst_left = min(f.left, randrange(bmin, bmax + 1))
        if f.sent and rand() < ack_change_prob:
            f.ack = (f.ack + randrange(1, 1500)) & 0xFFFFFFFF
        if f.sent:
            f.tsecr = (f.tsecr + 1) & 0xFFFFFFFF

    def segment(f: _BulkFlow) -> bytes:
        if f.burst_left == 0:
            new_burst(f)
        f.burst_left -= 1
        f.left -= 1
        flags = 0x10
        if f.burst_left == 0 and (f.left == 0 or rand() < psh_prob):
            flags = 0x18
        tsval = (f.tsval + (f.sent + f.ts_phase) // f.ts_every) & 0xFFFFFFFF
        hdr, t = f.hdr, f.tcp_off
        seq, ack, tsecr = f.seq, f.ack, f.tsecr
        flagword = 0x8000 | flags      # doff 8 << 12
        s = (f.base_sum + seq + ack + flagword + tsval + tsecr) % 0xFFFF
        pack_into("!IIH", hdr, t + 4, seq, ack, flagword)
        pack_into("!H", hdr, t + 16, 0xFFFF - (s or 0xFFFF))
        pack_into("!II", hdr, t + 24, tsval, tsecr)
        if f.family == 4:
            ip_id = f.ip_id
            si = (f.ip_base + ip_id) % 0xFFFF
            pack_into("!H", hdr, f.ip_off + 4, ip_id)
            pack_into("!H", hdr, f.ip_off + 10, 0xFFFF - (si or 0xFFFF))
            f.ip_id = (ip_id + 1) & 0xFFFF
        f.seq = (seq + mss) & 0xFFFFFFFF
        f.sent += 1
        return bytes(hdr) + f.payload

    active = [f for f in flows if f.left > 0]
    if interleave == "round_robin":
        while active:
            for f in active:
                frame = segment(f)
                yield start_ts_ns + cum_bits * 1_000_000_000 // rate_bps, frame
                cum_bits += (f.frame_len + 24) * 8
            active = [f for f in active if f.left > 0]
    else:
        while active:
            f = active[randrange(len(active))]
            new_burst(f)
            n = f.burst_left
            for _ in range(n):
                frame = segment(f)
                yield start_ts_ns + cum_bits * 1_000_000_000 // rate_bps, frame
                cum_bits += (f.frame_len + 24) * 8
            if f.left == 0:
                active.remove(f)


# -----------------------------------------------------------------------------
# Tunnel encapsulations: GRE, VXLAN and GENEVE around a frame or packet
# -----------------------------------------------------------------------------
IPPROTO_GRE = 47
ETH_P_TEB = 0x6558
TUNNEL_ADDR4_SRC, TUNNEL_ADDR4_DST = "10.99.0.1", "10.99.0.2"
TUNNEL_ADDR6_SRC, TUNNEL_ADDR6_DST = "fd99::1", "fd99::2"


def _tunnel_ip(family: int, src, dst, proto: int, body: bytes, *, ttl: int, tos: int, ip_id: int,
               df: bool, flow_label: int, src_mac, dst_mac, vlan) -> bytes:
    if src is None:
        src = TUNNEL_ADDR4_SRC if family == 4 else TUNNEL_ADDR6_SRC
    if dst is None:
        dst = TUNNEL_ADDR4_DST if family == 4 else TUNNEL_ADDR6_DST
    l3 = _l3_wrap(family, src, dst, proto, body, ttl=ttl, tos=tos, ip_id=ip_id, df=df, frag=None,
                  ip_options=b"", bad_ip_csum=False, flow_label=flow_label, v6_ext=None)
    return _ether(l3, ETH_P_IP if family == 4 else ETH_P_IPV6, src_mac=src_mac, dst_mac=dst_mac,
                  vlan=vlan, vlan_tpids=None, pad_to_60=False)


def _outer_udp(family: int, src, dst, sport: int, dport: int, body: bytes, zero_csum: bool) -> bytes:
    if src is None:
        src = TUNNEL_ADDR4_SRC if family == 4 else TUNNEL_ADDR6_SRC
    if dst is None:
        dst = TUNNEL_ADDR4_DST if family == 4 else TUNNEL_ADDR6_DST
    hdr = bytearray(struct.pack("!HHHH", sport, dport, 8 + len(body), 0))
    if not zero_csum:
        c = inet_csum(bytes(hdr) + body,
                      _pseudo_sum(family, _addr(family, src), _addr(family, dst), IPPROTO_UDP, 8 + len(body)))
        struct.pack_into("!H", hdr, 6, c or 0xFFFF)
    return bytes(hdr) + body


def vxlan_frame(inner: bytes, vni: int = 42, *, family: int = 4, src: Optional[str] = None,
                dst: Optional[str] = None, sport: int = 49152, dport: int = 4789, flags: int = 0x08,
                zero_csum: bool = True, ttl: int = 64, tos: int = 0, ip_id: int = 0, df: bool = True,
                flow_label: int = 0, src_mac: Union[str, bytes] = "aa:00:00:00:10:01",
                dst_mac: Union[str, bytes] = "aa:00:00:00:10:02", vlan=None) -> bytes:
    """``inner`` (an Ethernet frame) in VXLAN over UDP (outer checksum 0 unless
    ``zero_csum=False``, as Linux sends it over IPv4 by default)."""
    vxlan = struct.pack("!B3xI", flags, (vni & 0xFFFFFF) << 8) + inner
    udp = _outer_udp(family, src, dst, sport, dport, vxlan, zero_csum)
    return _tunnel_ip(family, src, dst, IPPROTO_UDP, udp, ttl=ttl, tos=tos, ip_id=ip_id, df=df,
                      flow_label=flow_label, src_mac=src_mac, dst_mac=dst_mac, vlan=vlan)


def geneve_frame(inner: bytes, vni: int = 42, *, options: bytes = b"", family: int = 4,
                 src: Optional[str] = None, dst: Optional[str] = None, sport: int = 49152,
                 dport: int = 6081, proto: int = ETH_P_TEB, version: int = 0, oam: bool = False,
                 critical: bool = False, zero_csum: bool = True, ttl: int = 64, tos: int = 0,
                 ip_id: int = 0, df: bool = True, src_mac: Union[str, bytes] = "aa:00:00:00:10:01",
                 dst_mac: Union[str, bytes] = "aa:00:00:00:10:02") -> bytes:
    """``inner`` in GENEVE over UDP; ``options`` raw TLV bytes (a multiple of 4)."""
    if len(options) % 4:
        raise ValueError("GENEVE options are a multiple of 4 bytes")
    first = (version << 6) | (len(options) // 4)
    second = (0x80 if oam else 0) | (0x40 if critical else 0)
    geneve = struct.pack("!BBHI", first, second, proto, (vni & 0xFFFFFF) << 8) + options + inner
    udp = _outer_udp(family, src, dst, sport, dport, geneve, zero_csum)
    return _tunnel_ip(family, src, dst, IPPROTO_UDP, udp, ttl=ttl, tos=tos, ip_id=ip_id, df=df,
                      flow_label=0, src_mac=src_mac, dst_mac=dst_mac, vlan=None)


def gre_frame(inner: bytes, *, proto: Optional[int] = None, key: Optional[int] = None,
              checksum: bool = False, seq: Optional[int] = None, version: int = 0, family: int = 4,
              src: Optional[str] = None, dst: Optional[str] = None, ttl: int = 64, tos: int = 0,
              ip_id: int = 0, df: bool = True, bad_gre_csum: bool = False,
              src_mac: Union[str, bytes] = "aa:00:00:00:10:01",
              dst_mac: Union[str, bytes] = "aa:00:00:00:10:02") -> bytes:
    """``inner`` in GRE: an IP packet (``proto`` from its version nibble) or,
    with ``proto=ETH_P_TEB``, an Ethernet frame; optional key, checksum, sequence."""
    if proto is None:
        proto = ETH_P_IP if inner[0] >> 4 == 4 else ETH_P_IPV6
    flags = (0x8000 if checksum else 0) | (0x2000 if key is not None else 0) | \
        (0x1000 if seq is not None else 0) | (version & 7)
    fields = b""
    if checksum:
        fields += b"\x00\x00\x00\x00"
    if key is not None:
        fields += struct.pack("!I", key)
    if seq is not None:
        fields += struct.pack("!I", seq)
    gre = bytearray(struct.pack("!HH", flags, proto) + fields + inner)
    if checksum:
        struct.pack_into("!H", gre, 4, inet_csum(bytes(gre)) ^ (1 if bad_gre_csum else 0))
    return _tunnel_ip(family, src, dst, IPPROTO_GRE, bytes(gre), ttl=ttl, tos=tos, ip_id=ip_id, df=df,
                      flow_label=0, src_mac=src_mac, dst_mac=dst_mac, vlan=None)
