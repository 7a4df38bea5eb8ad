"""Self-checks of grotool.scenarios: the frames are what they claim to be.

scapy is the independent judge: every frame is dissected, and its IP and L4
checksums are recomputed by scapy and compared with ours (they must agree
unless the scenario corrupts them on purpose, in which case they must not).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

scapy_all = pytest.importorskip("scapy.all")
from scapy.all import (ARP, ICMP, IP, TCP, UDP, Dot1AD, Dot1Q, Ether, ICMPv6EchoReply,  # noqa: E402
                       ICMPv6EchoRequest, IPOption_Timestamp, IPv6, IPv6ExtHdrDestOpt,
                       IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, Padding, Raw)

from grotool import scenarios as S  # noqa: E402
from grotool.io.capture import read_capture  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ALL = S.all_scenarios(include_optional=True)
BY_NAME = {sc.name: sc for sc in ALL}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def ip_layers(pkt):
    out, layer = [], pkt
    while layer is not None and not isinstance(layer, (Raw, Padding)):
        if isinstance(layer, (IP, IPv6)):
            out.append(layer)
        layer = layer.payload if layer.payload else None
    return out


def ipv4_csum_ok(layer) -> bool:
    hdr = layer.copy()
    hdr.remove_payload()
    orig = layer.chksum
    del hdr.chksum
    return IP(bytes(hdr)).chksum == orig


def l4_csum_ok(frame: bytes, cls) -> bool:
    pkt = Ether(frame)
    name = "chksum" if any(f.name == "chksum" for f in cls.fields_desc) else "cksum"
    orig = getattr(pkt[cls], name)
    again = pkt.copy()
    delattr(again[cls], name)
    return getattr(Ether(bytes(again))[cls], name) == orig


def seg_len(pkt) -> int:
    """TCP payload length from the innermost IP header's length field."""
    t = pkt[TCP]
    inner = ip_layers(pkt)[-1]
    if isinstance(inner, IP):
        return inner.len - inner.ihl * 4 - t.dataofs * 4
    hdrs, layer = 0, inner.payload
    while not isinstance(layer, TCP):
        hdrs += len(layer) - len(layer.payload)
        layer = layer.payload
    return inner.plen - hdrs - t.dataofs * 4


def tcp_payload(pkt) -> bytes:
    """The TCP payload by IP length (Ethernet padding excluded)."""
    t = pkt[TCP]
    return bytes(t)[t.dataofs * 4:][:seg_len(pkt)]


# ------------------------------------------------------------------------------------------
# builders
# ------------------------------------------------------------------------------------------
def test_tcp_frame_defaults_are_the_selftest_packet():
    f = S.tcp_frame()
    p = Ether(f)
    assert p.dst == "aa:00:00:00:00:02" and p.src == "aa:00:00:00:00:01" and p.type == 0x0800
    ip = p[IP]
    assert (ip.src, ip.dst, ip.ttl, ip.id, ip.tos, ip.ihl) == ("192.168.1.200", "192.168.1.100", 8, 0, 0, 5)
    assert int(ip.flags) == 2 and ip.frag == 0 and ip.proto == 6 and ip.len == 140
    t = p[TCP]
    assert (t.sport, t.dport, t.seq, t.ack, t.window, t.dataofs, t.urgptr) == (1500, 8000, 100, 100, 65535, 5, 0)
    assert t.flags == "A"
    assert tcp_payload(p) == b"a" * 100
    assert len(f) == 14 + 20 + 20 + 100
    assert ipv4_csum_ok(ip) and l4_csum_ok(f, TCP)


def test_tcp_frame_ipv6_fields():
    f = S.tcp_frame(6, flow_label=0x12345, tos=0xB8, ttl=3, payload=b"xyz", flags="PA", window=123)
    p = Ether(f)
    v6 = p[IPv6]
    assert (v6.src, v6.dst, v6.fl, v6.tc, v6.hlim, v6.nh, v6.plen) == ("fdaa::2", "fdaa::1", 0x12345, 0xB8, 3, 6, 23)
    assert p[TCP].flags == "PA" and p[TCP].window == 123 and tcp_payload(p) == b"xyz"
    assert l4_csum_ok(f, TCP)


@pytest.mark.parametrize("flags", ["F", "S", "R", "P", "A", "U", "E", "C", "FSRPAUEC"])
def test_tcp_flag_letters(flags):
    p = Ether(S.tcp_frame(flags=flags))
    assert p[TCP].flags == flags
    assert l4_csum_ok(bytes(S.tcp_frame(flags=flags)), TCP)


def test_ae_flag_is_the_reserved_bit_next_to_cwr():
    f = S.tcp_frame(flags="NA")
    doff_byte = f[14 + 20 + 12]
    assert doff_byte == 0x51 and f[14 + 20 + 13] == 0x10
    assert l4_csum_ok(f, TCP)


def test_vlan_and_qinq():
    p = Ether(S.tcp_frame(vlan=[100]))
    assert p.type == 0x8100 and p[Dot1Q].vlan == 100 and p[Dot1Q].type == 0x0800 and IP in p
    f = S.tcp_frame(6, vlan=[0x2000 | 10, 20])
    p = Ether(f)
    assert p.type == 0x88A8 and p[Dot1AD].vlan == 10 and p[Dot1AD].prio == 1 and p[Dot1AD].type == 0x8100
    inner = p[Dot1AD].payload
    assert inner.vlan == 20 and inner.type == 0x86DD and l4_csum_ok(f, TCP)
    p = Ether(S.tcp_frame(vlan=[5, 6], vlan_tpids=[0x8100, 0x8100]))
    assert p.type == 0x8100 and p[Dot1Q].payload.vlan == 6


def test_ipv4_options_fragment_and_flags():
    f = S.tcp_frame(ip_options=S.ipv4_ts_option())
    p = Ether(f)
    assert p[IP].ihl == 15 and p[IP].len == 180 and isinstance(p[IP].options[0], IPOption_Timestamp)
    assert ipv4_csum_ok(p[IP]) and l4_csum_ok(f, TCP)
    p = Ether(S.tcp_frame(frag=(True, 0), df=False, ip_id=77))
    assert int(p[IP].flags) == 1 and p[IP].frag == 0 and p[IP].id == 77 and ipv4_csum_ok(p[IP])
    p = Ether(S.tcp_frame(frag=(False, 185), evil=True))
    assert int(p[IP].flags) == 6 and p[IP].frag == 185 and ipv4_csum_ok(p[IP])


def test_tcp_options():
    for layout, kinds in (("NNT", ["NOP", "NOP", "Timestamp"]), ("NTN", ["NOP", "Timestamp", "NOP"]),
                          ("TNN", ["Timestamp", "NOP", "NOP"])):
        f = S.tcp_frame(tcp_options=S.tcp_opts_ts(1234, 99, layout))
        p = Ether(f)
        assert p[TCP].dataofs == 8 and [o[0] for o in p[TCP].options] == kinds
        assert dict(p[TCP].options)["Timestamp"] == (1234, 99)
        assert l4_csum_ok(f, TCP)
    # odd-sized options are zero padded to a 4-byte multiple
    p = Ether(S.tcp_frame(tcp_options=b"\x01\x03\x03\x07"[:3]))
    assert p[TCP].dataofs == 6


def test_ipv6_extension_headers():
    f = S.tcp_frame(6, v6_ext=[S.v6_hbh(), S.v6_dstopts(b"\x01\x04" + bytes(4)), S.v6_frag(0, False, 7)])
    p = Ether(f)
    assert p[IPv6].nh == 0 and p[IPv6ExtHdrHopByHop].nh == 60 and p[IPv6ExtHdrDestOpt].nh == 44
    assert p[IPv6ExtHdrFragment].nh == 6 and p[IPv6ExtHdrFragment].id == 7
    assert p[IPv6].plen == 24 + 20 + 100 and l4_csum_ok(f, TCP)
    with pytest.raises(ValueError):
        S.v6_dstopts(b"\x00" * 5)


def test_padding_and_corruptions():
    f = S.tcp_frame(payload=1, pad_to_60=True)
    assert len(f) == 60 and f[-5:] == bytes(5)
    p = Ether(f)
    assert p[IP].len == 41 and tcp_payload(p) == b"a" and l4_csum_ok(f, TCP)
    assert not l4_csum_ok(S.tcp_frame(bad_tcp_csum=True), TCP)
    assert not ipv4_csum_ok(Ether(S.tcp_frame(bad_ip_csum=True))[IP])
    f = S.tcp_frame(bad_tcp_csum=0x1234)
    assert Ether(f)[TCP].chksum == 0x1234


def test_selftest_style_off_by_one_is_on_the_little_endian_value():
    good = S.tcp_frame(seq=5)
    bad = S.tcp_frame(seq=5, bad_tcp_csum=True)
    g = int.from_bytes(good[50:52], "little")
    assert int.from_bytes(bad[50:52], "little") == (g - 1) & 0xFFFF


@pytest.mark.parametrize("inner,outer", [(4, 4), (6, 6), (4, 6), (6, 4)])
def test_tunnels(inner, outer):
    f = S.tcp_frame(inner, outer={"family": outer, "ttl": 9, "tos": 4})
    p = Ether(f)
    layers = ip_layers(p)
    assert len(layers) == 2
    o, i = layers
    assert isinstance(o, IP if outer == 4 else IPv6) and isinstance(i, IP if inner == 4 else IPv6)
    if outer == 4:
        assert o.proto == (4 if inner == 4 else 41) and o.ttl == 9 and o.tos == 4 and ipv4_csum_ok(o)
        assert o.len == len(f) - 14
    else:
        assert o.nh == (4 if inner == 4 else 41) and o.hlim == 9 and o.tc == 4 and o.plen == len(f) - 54
    if inner == 4:
        assert ipv4_csum_ok(i) and i.ttl == 8
    assert l4_csum_ok(f, TCP)
    with pytest.raises(ValueError):
        S.tcp_frame(outer={"bogus": 1})


def test_udp_icmp_arp():
    f = S.udp_frame(4, payload=1000, ip_id=3)
    p = Ether(f)
    assert p[UDP].len == 1008 and p[IP].id == 3 and l4_csum_ok(f, UDP) and ipv4_csum_ok(p[IP])
    f = S.udp_frame(6, payload=b"q" * 33, vlan=[7])
    assert Ether(f)[UDP].len == 41 and l4_csum_ok(f, UDP)
    assert Ether(S.udp_frame(zero_csum=True))[UDP].chksum == 0
    for fam, cls in ((4, ICMP), (6, ICMPv6EchoRequest)):
        f = S.icmp_echo_frame(fam, ident=5, seqno=9)
        assert l4_csum_ok(f, cls)
    f = S.icmp_echo_frame(6, reply=True)
    assert ICMPv6EchoReply in Ether(f) and l4_csum_ok(f, ICMPv6EchoReply)
    assert Ether(S.icmp_echo_frame(4, reply=True))[ICMP].type == 0
    a = Ether(S.arp_frame(1, sender_ip="10.0.0.9", target_ip="10.0.0.1"))
    assert len(bytes(a)) == 60 and a.dst == "ff:ff:ff:ff:ff:ff" and a[ARP].op == 1
    assert a[ARP].psrc == "10.0.0.9" and a[ARP].pdst == "10.0.0.1"
    r = Ether(S.arp_frame(2, "02:00:00:00:00:02", "10.0.0.1", "02:00:00:00:00:01", "10.0.0.9"))
    assert r[ARP].op == 2 and r.dst == "02:00:00:00:00:01"


def test_inet_csum_matches_rfc1071_edge_cases():
    assert S.inet_csum(b"") == 0xFFFF
    assert S.inet_csum(b"\x00\x01\xf2\x03\xf4\xf5\xf6\xf7") == 0x220D    # RFC 1071 example sum 0xDDF2
    assert S.inet_csum(b"\xff\xff") == 0x0000
    assert S.inet_csum(b"\x01") == 0xFEFF


# ------------------------------------------------------------------------------------------
# the selftest scenarios
# ------------------------------------------------------------------------------------------
FRAME_COUNTS = {
    "data_same": 3, "data_lrg_sml": 3, "data_sml_lrg": 3, "data_lrg_1byte": 3, "data_lrg_1byte_pad60": 3,
    "data_burst": 5, "ack": 4, "flags_psh": 6, "flags_syn": 6, "flags_rst": 6, "flags_urg": 6,
    "flags_cwr": 6, "tcp_csum": 3, "tcp_seq": 3, "tcp_ts": 6, "tcp_opt": 4, "ip_ecn": 3, "ip_tos": 3,
    "large_max": 19, "large_rem": 19, "single": 2, "capacity_8": 17, "capacity_9": 19, "capacity_16": 33,
    "ip_csum": 4, "ip_ttl": 3, "ip_opt": 4, "ip_frag4": 3, "ip_id_df1_inc": 3, "ip_id_df1_fixed": 3,
    "ip_id_df0_inc": 3, "ip_id_df0_fixed": 3, "ip_id_df1_inc_fixed": 4, "ip_id_df1_fixed_inc": 4,
    "ip_frag6": 5, "ip_v6ext_same": 3, "ip_v6ext_diff": 3,
}


def test_case_lists():
    names = {sc.name for sc in S.all_scenarios()}
    assert len(names) == len(S.all_scenarios())
    v4 = {n.split("/")[1] for n in names if n.startswith("ipv4/")}
    v6 = {n.split("/")[1] for n in names if n.startswith("ipv6/")}
    assert v4 == set(S.COMMON_CASES) | set(S.V4_CASES) | {"data_lrg_1byte_pad60"}
    assert v6 == set(S.COMMON_CASES) | set(S.V6_CASES)
    assert not any(sc.optional for sc in S.all_scenarios())
    optional = [sc for sc in ALL if sc.optional]
    assert optional and all(sc.proto in ("ipip", "ip6ip6") for sc in optional)
    with pytest.raises(ValueError):
        S.case_ip_frag6("ipv4")
    with pytest.raises(ValueError):
        S.case_ip_ttl("ipv6")


@pytest.mark.parametrize("sc", ALL, ids=lambda sc: sc.name)
def test_scenario_frames(sc):
    assert len(sc.frames) == FRAME_COUNTS[sc.case] == len(sc.timestamps_ns)
    assert sc.expected_kernel and sc.expected_paused and sc.expected_selftest
    assert sc.name == f"{sc.proto}/{sc.case}"
    sent = 0
    sports = set()
    for i, frame in enumerate(sc.frames):
        p = Ether(frame)
        assert p.dst == "aa:00:00:00:00:02" and p.src == "aa:00:00:00:00:01"
        layers = ip_layers(p)
        assert len(layers) == (2 if sc.proto in ("ipip", "ip6ip6") else 1), (i, p.summary())
        want_v = 4 if sc.family == 4 else 6
        assert all(isinstance(layer, IP if want_v == 4 else IPv6) for layer in layers)
        for layer in layers:
            if isinstance(layer, IP):
                assert ipv4_csum_ok(layer) == (sc.special.get(i) != "bad_ip_csum" or layer is not layers[0])
                assert layer.src == "192.168.1.200" and layer.dst == "192.168.1.100"
            else:
                assert layer.src == "fdaa::2" and layer.dst == "fdaa::1" and layer.fl == 0
        assert TCP in p, (i, p.summary())
        t = p[TCP]
        assert t.dport == 8000 and t.ack in (100, 101)
        sports.add(t.sport)
        csum_ok = l4_csum_ok(frame, TCP)
        assert csum_ok == (sc.special.get(i) not in ("bad_tcp_csum", "tcp_csum_full_datagram")), i
        n = seg_len(p)
        fill = bytes([0x61 + t.sport - sc.sport]) if sc.case.startswith("capacity") else b"a"
        assert tcp_payload(p) == fill * n
        if sc.special.get(i) == "padded":
            assert len(frame) == 60
        sent += n
        for k, layer in enumerate(layers):
            edited = k == 0 and i == 1 and sc.case == "ip_ttl"        # gro.c edits the outermost header
            assert (layer.ttl if isinstance(layer, IP) else layer.hlim) == (7 if edited else 8)
            if isinstance(layer, IP) and not (k == 0 and sc.case.startswith("ip_id")):
                assert layer.id == 0
    # the closing FIN: seq offset 200, no payload
    last = Ether(sc.frames[-1])[TCP]
    assert last.flags == "FA" and last.seq == 300 and seg_len(Ether(sc.frames[-1])) == 0
    assert last.sport == sc.sport
    # GRO never loses bytes: every expectation accounts for all the payload sent
    assert sum(sc.expected_kernel) == sum(sc.expected_paused) == sent
    assert len(sc.expected_kernel) <= len(sc.frames) and len(sc.expected_paused) <= len(sc.frames)
    if sc.case != "data_burst":          # elsewhere the pause only changes the delivery order
        assert sorted(sc.expected_kernel) == sorted(sc.expected_paused)
    assert {sp for sp, _ in sc.expected_order} == sports
    # the FIN contributes a 0
    assert sc.expected_kernel.count(0) >= 1 and sc.expected_paused[-1] == 0
    # timestamps: non-decreasing, pauses included
    assert sc.timestamps_ns[0] == 0
    assert all(b > a for a, b in zip(sc.timestamps_ns, sc.timestamps_ns[1:]))
    for idx, ns in sc.pauses:
        assert sc.timestamps_ns[idx] - sc.timestamps_ns[idx - 1] >= ns


@pytest.mark.parametrize("proto", S.PROTOS)
def test_sequence_numbers_follow_the_selftest(proto):
    """P(o, n) has seq 100 + o; spot checks of the layouts gro.c builds."""
    def seqs(case):
        return [(Ether(f)[TCP].seq - 100, seg_len(Ether(f))) for f in S.CASES[case](proto).frames]
    assert seqs("data_same") == [(0, 100), (100, 100), (200, 0)]
    assert seqs("data_burst") == [(0, 100), (100, 100), (200, 100), (300, 100), (200, 0)]
    assert seqs("flags_syn") == [(0, 100), (100, 100), (0, 0), (300, 100), (400, 100), (200, 0)]
    assert seqs("flags_cwr") == [(0, 100), (100, 100), (200, 100), (300, 100), (400, 100), (200, 0)]
    assert seqs("tcp_seq") == [(0, 100), (101, 100), (200, 0)]
    flags = [Ether(f)[TCP].flags for f in S.CASES["flags_cwr"](proto).frames]
    assert flags == ["A", "AC", "AC", "A", "A", "FA"]
    flags = [Ether(f)[TCP].flags for f in S.CASES["flags_psh"](proto).frames]
    assert flags == ["A", "A", "PA", "A", "A", "FA"]
    mss, maxpay, num, rem = S.large_params(proto)
    assert seqs("large_max")[num:] == [(num * mss, rem), ((num + 1) * mss, rem), (200, 0)]
    assert seqs("large_rem")[num:] == [(num * mss, rem + 1), ((num + 1) * mss, rem + 1), (200, 0)]


def test_large_numbers():
    assert S.large_params("ipv4") == (4056, 65495, 16, 599)
    assert S.large_params("ipv6") == (4036, 65475, 16, 899)
    assert S.large_params("ipip") == (4036, 65475, 16, 899)
    assert S.large_params("ip6ip6") == (3996, 65435, 16, 1499)
    for proto in S.PROTOS:
        mss, maxpay, num, rem = S.large_params(proto)
        hdrs = 65535 - maxpay
        # an aggregate's IP length may reach 65535 but not 65536
        assert hdrs + num * mss + rem == 65535
        assert hdrs + num * mss + rem + 1 == 65536
        sc = S.CASES["large_max"](proto)
        assert len(sc.frames[0]) == 14 + 4096 and sc.expected_kernel == [maxpay, rem, 0]
        assert S.CASES["large_rem"](proto).expected_kernel == [maxpay - rem, rem + 1, rem + 1, 0]


def test_kernel_specific_expectations():
    assert BY_NAME["ipv4/flags_cwr"].expected_kernel == [100, 100, 100, 200, 0]
    assert BY_NAME["ipv6/ip_frag6"].expected_kernel == [100, 200, 100, 0]
    assert BY_NAME["ipv6/ip_frag6"].expected_paused == [200, 100, 100, 0]
    assert BY_NAME["ipv4/data_burst"].expected_kernel == [400, 0]
    assert BY_NAME["ipv4/data_burst"].expected_paused == [200, 200, 0]
    assert BY_NAME["ipv6/ip_v6ext_same"].expected_kernel == [0, 200]
    assert BY_NAME["ipv4/data_lrg_1byte"].expected_kernel == [101, 0]
    assert BY_NAME["ipv4/data_lrg_1byte_pad60"].expected_kernel == [100, 1, 0]
    assert BY_NAME["ipv4/ip_id_df0_fixed"].expected_kernel == [200, 0]
    cap8 = BY_NAME["ipv4/capacity_8"].expected_kernel
    assert cap8 == [400] * 8 + [0]
    cap9 = BY_NAME["ipv4/capacity_9"]
    assert cap9.expected_order[:2] == [(1500, 200), (1500, 200)] and cap9.expected_kernel.count(400) == 8
    cap16 = BY_NAME["ipv6/capacity_16"]
    assert cap16.expected_kernel.count(400) == 8 and cap16.expected_kernel.count(200) == 16
    assert [sp for sp, n in cap16.expected_order if n == 400] == list(range(1508, 1516))
    # capacity payloads are 'a' + flow id
    p = Ether(cap16.frames[15])
    assert p[TCP].sport == 1515 and tcp_payload(p) == b"p" * 200


def test_selftest_details():
    ts = [Ether(f)[TCP] for f in BY_NAME["ipv4/tcp_ts"].frames]
    assert [dict(t.options).get("Timestamp") for t in ts[:5]] == [(0, 0), (0, 0), (100, 0), (100, 0), (100, 0)]
    opt = Ether(BY_NAME["ipv4/tcp_opt"].frames[2])[TCP]
    assert opt.dataofs == 6 and [o[0] for o in opt.options] == ["NOP", "WScale"]
    ecn4 = Ether(BY_NAME["ipv4/ip_ecn"].frames[1])[IP].tos
    ecn6 = Ether(BY_NAME["ipv6/ip_ecn"].frames[1])[IPv6].tc
    tos6 = Ether(BY_NAME["ipv6/ip_tos"].frames[1])[IPv6].tc
    assert (ecn4, ecn6, tos6, Ether(BY_NAME["ipv4/ip_tos"].frames[1])[IP].tos) == (2, 2, 0xF0, 1)
    ids = [Ether(f)[IP] for f in BY_NAME["ipv4/ip_id_df0_inc"].frames]
    assert [(i.id, int(i.flags)) for i in ids] == [(8, 0), (9, 0), (0, 2)]
    frag = Ether(BY_NAME["ipv4/ip_frag4"].frames[1])[IP]
    assert int(frag.flags) == 3 and frag.frag == 0 and frag.len == 140
    f6 = Ether(BY_NAME["ipv6/ip_frag6"].frames[2])
    assert f6[IPv6].nh == 44 and f6[IPv6ExtHdrFragment].offset == 0 and f6[IPv6ExtHdrFragment].m == 0
    same = [f[54:62] for f in BY_NAME["ipv6/ip_v6ext_same"].frames[:2]]
    diff = [f[54:62] for f in BY_NAME["ipv6/ip_v6ext_diff"].frames[:2]]
    assert all(Ether(f)[IPv6].nh == 60 for f in BY_NAME["ipv6/ip_v6ext_diff"].frames[:2])
    assert same[0] == same[1] == bytes([6, 0]) + bytes(6)
    assert diff[0] == same[0] and diff[1] == bytes([6, 0]) + b"\x11" * 6
    assert Ether(BY_NAME["ipv4/ip_opt"].frames[1])[IP].ihl == 15
    assert Ether(BY_NAME["ipip/ip_ttl"].frames[1])[IP].ttl == 7          # gro.c edits the outer header
    # veth does not pad: the 1-byte segment is 55 bytes (the FIN 54) in data_lrg_1byte
    assert [len(f) for f in BY_NAME["ipv4/data_lrg_1byte"].frames] == [154, 55, 54]
    assert [len(f) for f in BY_NAME["ipv4/data_lrg_1byte_pad60"].frames] == [154, 60, 60]


def test_pauses():
    burst = BY_NAME["ipv4/data_burst"]
    assert burst.pauses == [(2, 100_000_000)]
    frag6 = BY_NAME["ipv6/ip_frag6"]
    assert frag6.pauses == [(2, 1_000_000_000), (4, 100_000_000)]
    assert BY_NAME["ipv4/data_same"].pauses == []
    for case in ("tcp_csum", "tcp_seq", "tcp_ts", "tcp_opt", "ip_csum", "ip_opt", "ip_frag4", "ip_id_df1_inc",
                 "capacity_8"):
        sc = BY_NAME["ipv4/" + case]
        assert sc.pauses == [(len(sc.frames) - 1, 100_000_000)], case
    for sc in ALL:
        if not sc.pauses:
            assert sc.expected_paused == sc.expected_kernel, sc.name


def test_sport_parameter():
    sc = S.case_capacity_9("ipv6", sport=20000)
    assert {Ether(f)[TCP].sport for f in sc.frames} == set(range(20000, 20009))
    scs = S.selftest_scenarios("ipv4", sport=3000, sport_step=100)
    assert [sc.sport for sc in scs[:3]] == [3000, 3100, 3200]


def test_records_and_write_pcap(tmp_path):
    sc = BY_NAME["ipv4/data_burst"]
    p = tmp_path / "a.pcap"
    assert S.write_pcap(str(p), sc.records(5_000)) == 5
    linktype, recs = read_capture(str(p))
    assert linktype == 1 and [r[1] for r in recs] == sc.frames
    assert [r[0] for r in recs] == [5_000 + t for t in sc.timestamps_ns]
    q = tmp_path / "b.pcap"
    S.write_pcap(str(q), sc.frames, start_ts_ns=10, gap_ns=7)
    assert [r[0] for r in read_capture(str(q))[1]] == [10, 17, 24, 31, 38]
    S.write_pcap(str(q), sc.frames, start_ts_ns=10, timestamps=sc.timestamps_ns)
    assert [r[0] for r in read_capture(str(q))[1]] == [10 + t for t in sc.timestamps_ns]


# ------------------------------------------------------------------------------------------
# bulk flows
# ------------------------------------------------------------------------------------------
def test_bulk_flows_deterministic():
    a = list(S.bulk_flows(8, 30, seed=5, interleave="bursty"))
    b = list(S.bulk_flows(8, 30, seed=5, interleave="bursty"))
    c = list(S.bulk_flows(8, 30, seed=6, interleave="bursty"))
    assert a == b and a != c and len(a) == 240
    assert list(S.bulk_flows(8, 30, seed=5)) == list(S.bulk_flows(8, 30, seed=5))


@pytest.mark.parametrize("interleave,family", [("round_robin", 4), ("bursty", 4), ("round_robin", 6),
                                               ("bursty", "mixed")])
def test_bulk_flows_packets(interleave, family):
    n_flows, segs, mss = 6, 40, 1448
    recs = list(S.bulk_flows(n_flows, segs, mss=mss, interleave=interleave, seed=3, family=family,
                             start_ts_ns=1000))
    assert len(recs) == n_flows * segs
    ts = [t for t, _ in recs]
    assert ts[0] == 1000 and all(b > a for a, b in zip(ts, ts[1:]))
    # back to back at 10 Gbit/s: (frame + 24 bytes of FCS/preamble/IFG) * 0.8 ns
    assert abs((ts[1] - ts[0]) - (len(recs[0][1]) + 24) * 0.8) <= 1
    per_flow = {}
    for i, (_, frame) in enumerate(recs):
        p = Ether(frame)
        layers = ip_layers(p)
        assert len(layers) == 1
        assert l4_csum_ok(frame, TCP), i
        if isinstance(layers[0], IP):
            assert ipv4_csum_ok(layers[0]) and int(layers[0].flags) == 2 and layers[0].ttl == 64
        t = p[TCP]
        assert t.dport == 5201 and [o[0] for o in t.options] == ["NOP", "NOP", "Timestamp"]
        assert len(tcp_payload(p)) == mss and t.flags in ("A", "PA")
        per_flow.setdefault(t.sport, []).append(p)
    assert sorted(per_flow) == list(range(40000, 40000 + n_flows))
    if interleave == "round_robin":
        assert len({Ether(f)[TCP].sport for _, f in recs[:n_flows]}) == n_flows
    for sport, pkts in per_flow.items():
        assert len(pkts) == segs
        fam = ip_layers(pkts[0])[0]
        if family == "mixed":
            assert isinstance(fam, IP if (sport - 40000) % 2 == 0 else IPv6)
        for a, b in zip(pkts, pkts[1:]):
            assert (b[TCP].seq - a[TCP].seq) % 2**32 == mss
            if IP in a:
                assert (b[IP].id - a[IP].id) % 65536 == 1
            tsa, tsb = dict(a[TCP].options)["Timestamp"], dict(b[TCP].options)["Timestamp"]
            assert (tsb[0] - tsa[0]) % 2**32 in (0, 1)
            # ACK and TSecr only change between bursts; TSecr moves at every burst start
            if tsb[1] == tsa[1]:
                assert b[TCP].ack == a[TCP].ack
            if a[TCP].flags == "PA":
                assert tsb[1] != tsa[1]
        assert pkts[-1][TCP].flags == "PA"      # every flow's last burst ends with PSH


def test_bulk_flows_ts_ticks_and_options():
    recs = list(S.bulk_flows(1, 64, seed=9, ts_every=8, burst=(64, 64), psh_prob=0.0))
    tsvals = [dict(Ether(f)[TCP].options)["Timestamp"][0] for _, f in recs]
    changes = sum(1 for a, b in zip(tsvals, tsvals[1:]) if a != b)
    assert changes in (7, 8)
    flags = [Ether(f)[TCP].flags for _, f in recs]
    assert flags[:-1] == ["A"] * 63 and flags[-1] == "PA"
    vl = Ether(next(iter(S.bulk_flows(1, 1, vlan=[42])))[1])
    assert vl[Dot1Q].vlan == 42 and l4_csum_ok(bytes(vl), TCP)
    odd = list(S.bulk_flows(2, 5, mss=1001, seed=2))
    assert all(l4_csum_ok(f, TCP) and ipv4_csum_ok(Ether(f)[IP]) for _, f in odd)
    with pytest.raises(ValueError):
        next(S.bulk_flows(1, 1, interleave="random"))


def test_bulk_flows_fast_enough_for_the_benchmark():
    start = time.perf_counter()
    n = sum(1 for _ in S.bulk_flows(64, 300_000 // 64 + 1, interleave="bursty", seed=1))
    elapsed = time.perf_counter() - start
    assert n >= 300_000
    assert elapsed < 30, f"300k frames took {elapsed:.1f} s"


# ------------------------------------------------------------------------------------------
# bundled captures
# ------------------------------------------------------------------------------------------
CAPTURES = ("selftest-ipv4.pcap", "selftest-ipv6.pcap", "bulk-4flows.pcap", "mixed.pcap")


def test_make_captures_is_reproducible_and_matches_the_bundle(tmp_path):
    script = ROOT / "captures" / "make_captures.py"
    for d in ("one", "two"):
        subprocess.run([sys.executable, str(script), "--out", str(tmp_path / d)], check=True,
                       capture_output=True)
    for name in CAPTURES + ("selftest-ipv4.json", "selftest-ipv6.json"):
        one, two = (tmp_path / "one" / name).read_bytes(), (tmp_path / "two" / name).read_bytes()
        assert one == two, name
        bundled = ROOT / "captures" / name
        assert bundled.exists() and bundled.read_bytes() == one, f"{name}: rerun captures/make_captures.py"


@pytest.mark.parametrize("name", CAPTURES)
def test_bundled_captures_are_small_and_valid(name):
    path = ROOT / "captures" / name
    assert path.stat().st_size < 1 << 20
    linktype, recs = read_capture(str(path))
    assert linktype == 1 and recs
    assert all(b[0] >= a[0] for a, b in zip(recs, recs[1:]))
    for _, frame, wirelen in recs:
        assert wirelen == len(frame)
        p = Ether(frame)
        for layer in ip_layers(p):
            if isinstance(layer, IP) and not name.startswith("selftest"):
                assert ipv4_csum_ok(layer)
        if not name.startswith("selftest"):
            for cls in (TCP, UDP, ICMP):
                if cls in p:
                    assert l4_csum_ok(frame, cls)


def test_mixed_capture_contents():
    _, recs = read_capture(str(ROOT / "captures" / "mixed.pcap"))
    pkts = [Ether(f) for _, f, _ in recs]
    assert sum(1 for p in pkts if ARP in p) == 2
    assert sum(1 for p in pkts if ICMP in p) == 2
    assert sum(1 for p in pkts if UDP in p) == 20
    assert sum(1 for p in pkts if Dot1Q in p) == 30
    assert sum(1 for p in pkts if IPv6 in p) == 80
    assert sum(1 for p in pkts if TCP in p and len(tcp_payload(p)) == 0) >= 31   # pure ACKs
    assert any(len(bytes(p)) == 60 and TCP in p and len(tcp_payload(p)) == 1 for p in pkts)
    ttls = {p[IP].ttl for p in pkts if TCP in p and p[TCP].sport == 43000}
    assert ttls == {63, 64}
    ooo = [p[TCP].seq for p in pkts if TCP in p and p[TCP].sport == 43001]
    assert ooo != sorted(ooo) and sorted(ooo) == [9000 + 1448 * k for k in range(10)]


def test_selftest_capture_index():
    import json
    for proto in ("ipv4", "ipv6"):
        index = json.loads((ROOT / "captures" / f"selftest-{proto}.json").read_text())
        _, recs = read_capture(str(ROOT / "captures" / f"selftest-{proto}.pcap"))
        scs = {sc.case: sc for sc in S.selftest_scenarios(proto)}
        total = 0
        for case in index["cases"]:
            sc = scs[case["name"].split("/")[1]]
            frames = [f for _, f, _ in recs[case["first_frame"]:case["first_frame"] + case["frames"]]]
            assert len(frames) == len(sc.frames)
            assert case["expected_kernel"] == sc.expected_kernel
            sports = {Ether(f)[TCP].sport for f in frames}
            assert sports == set(case["sports"])
            total += case["frames"]
            # no case straddles a 64-frame poll of a veth replay
            assert case["first_frame"] // 64 == (case["first_frame"] + case["frames"] - 1) // 64
        assert total + index["filler_frames"] == len(recs)
        fillers = [f for _, f, _ in recs if f[12:14] == b"\x88\xb5"]
        assert len(fillers) == index["filler_frames"] and all(len(f) == 60 for f in fillers)
        all_sports = [sp for case in index["cases"] for sp in case["sports"]]
        assert len(all_sports) == len(set(all_sports))          # cases never share a flow
