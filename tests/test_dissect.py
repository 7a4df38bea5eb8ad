"""grotool.dissect: exact fields per encapsulation (frames built with scapy),
damaged frames, flow naming through tunnels, and report/compare/oracle
unchanged on the bundled captures."""

import glob
import json
import os
import random
import struct

import pytest
from click.testing import CliRunner
from scapy.all import (GRE, IP, TCP, UDP, VXLAN, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether, IPv6,
                       IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop, IPv6ExtHdrRouting, Raw)
from scapy.contrib.geneve import GENEVE, GeneveOptions

from grotool.cli import main
from grotool.dissect import dissect, tcp_options
from grotool.io.capture import PcapWriter
from grotool.oracle import frames as fr
from grotool.report.flows import describe, flow_json, flow_label

from consumer_digest import digests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
A4, B4 = "10.0.0.1", "10.0.0.2"
O4, P4 = "192.168.1.1", "192.168.1.2"
A6, B6 = "fd00::1", "fd00::2"
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
INNER_MACS = {"src": "02:00:00:00:01:01", "dst": "02:00:00:00:01:02"}
PAYLOAD = b"x" * 100


def tcp(**kw):
    args = {"sport": 40000, "dport": 5201, "seq": 1000, "ack": 77, "flags": "PA", "window": 512}
    args.update(kw)
    return TCP(**args) / PAYLOAD


def inner_v4():
    return IP(src=A4, dst=B4, id=1) / tcp()


def names(d):
    return [layer.name for layer in d.layers]


# -----------------------------------------------------------------------------
# plain frames: link layers, IPv4, IPv6, TCP, UDP
# -----------------------------------------------------------------------------
def test_ethernet_ipv4_tcp_exact_fields():
    opts = [("MSS", 1448), ("NOP", None), ("WScale", 7), ("SAckOK", b""), ("Timestamp", (5, 6))]
    frame = bytes(Ether(**MACS) / IP(src=A4, dst=B4, ttl=9, id=0x1234, tos=0xB8) / tcp(options=opts))
    d = dissect(frame)
    assert d.problem is None
    assert names(d) == ["eth", "ipv4", "tcp"]
    assert [(lay.offset, lay.length) for lay in d.layers] == [(0, 14), (14, 20), (34, 40)]
    ip = d.layer("ipv4")
    assert (ip["ttl"], ip["id"], ip["tos"], ip["total_length"], ip["df"], ip["mf"]) == (9, 0x1234, 0xB8, 160, False, False)
    assert d.five_tuple == (6, A4, B4, 40000, 5201)
    assert (d.family, d.l3, d.l4, d.l3_end, d.l3_ok) == (4, 14, 34, 174, True)
    assert (d.seq, d.ack, d.tcp_flags, d.window) == (1000, 77, 0x18, 512)
    assert (d.payload_off, d.payload_len, d.check_at) == (74, 100, 50)
    assert tcp_options(d.layer("tcp")["options"]) == ((2, struct.pack("!H", 1448)), (1, b""), (3, b"\x07"),
                                                      (4, b""), (8, struct.pack("!II", 5, 6)))
    assert [(c.kind, c.at, c.start, c.end) for c in d.checksums] == [("ipv4", 24, 14, 34), ("tcp", 50, 34, 174)]
    assert d.tunnels == () and d.outer is None


def test_qinq_tags_and_udp():
    frame = bytes(Ether(**MACS) / Dot1AD(vlan=100, prio=3) / Dot1Q(vlan=200) / IP(src=A4, dst=B4)
                  / UDP(sport=5000, dport=53) / Raw(b"q" * 30))
    d = dissect(frame)
    assert names(d) == ["eth", "vlan", "vlan", "ipv4", "udp"]
    assert d.vlans == (100, 200)
    assert (d.layers[1]["tpid"], d.layers[1]["pcp"], d.layers[2]["tpid"]) == (0x88A8, 3, 0x8100)
    assert (d.l3, d.l4, d.l4_proto, d.sport, d.dport, d.payload_off, d.payload_len, d.check_at) == \
        (22, 42, 17, 5000, 53, 50, 30, 48)
    assert d.layer("udp")["length"] == 38


@pytest.mark.parametrize("linktype,build", [
    (113, lambda p: bytes(CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=b"\x02\0\0\0\0\x01\0\0", proto=0x86DD) / p)),
    (276, lambda p: bytes(CookedLinuxV2(proto=0x86DD, ifindex=3, lladdrtype=1, lladdrlen=6) / p)),
    (101, bytes), (229, bytes), (12, bytes),
])
def test_cooked_and_raw_link_types(linktype, build):
    packet = IPv6(src=A6, dst=B6) / tcp()
    d = dissect(build(packet), linktype)
    link = {113: 16, 276: 20}.get(linktype, 0)
    assert d.problem is None and d.l3 == link and d.l4 == link + 40
    assert d.five_tuple == (6, A6, B6, 40000, 5201) and d.payload_len == 100
    if link:
        assert d.layers[0].name == ("sll" if linktype == 113 else "sll2") and d.ethertype == 0x86DD
    if linktype == 276:
        assert d.layers[0]["ifindex"] == 3


@pytest.mark.parametrize("linktype,header,family", [
    (0, b"\x1e\0\0\0", 30), (0, b"\0\0\0\x1c", 28), (0, b"\x18\0\0\0", 24), (108, b"\0\0\0\x18", 24),
])
def test_bsd_loopback_ipv6(linktype, header, family):
    """NULL: the address family in the capturing host's byte order (either);
    LOOP: network byte order.  IPv6 is 24, 28 or 30 depending on the BSD."""
    d = dissect(header + bytes(IPv6(src=A6, dst=B6) / tcp()), linktype)
    assert d.problem is None and d.l3 == 4 and d.l4 == 44 and d.ethertype == 0x86DD
    assert d.layers[0].name == ("loop" if linktype == 108 else "null") and d.layers[0]["family"] == family
    assert d.five_tuple == (6, A6, B6, 40000, 5201) and d.payload_len == 100


def test_bsd_loopback_ipv4_and_other_families():
    packet = bytes(IP(src=A4, dst=B4) / tcp())
    for linktype, header in ((0, b"\x02\0\0\0"), (0, b"\0\0\0\x02"), (108, b"\0\0\0\x02")):
        d = dissect(header + packet, linktype)
        assert d.problem is None and d.l3 == 4 and d.five_tuple == (6, A4, B4, 40000, 5201)
    # LOOP is big-endian only; 7 is no IP family; 3 bytes is no header
    for linktype, header in ((108, b"\x02\0\0\0"), (0, b"\x07\0\0\0")):
        d = dissect(header + packet, linktype)
        assert d.l3 is None and "address family" in d.problem
    assert dissect(b"\x02\0\0", 0).problem == "truncated BSD loopback header (3 of 4 bytes captured)"


def test_ipv4_options_and_fragments():
    frame = bytes(Ether(**MACS) / IP(src=A4, dst=B4, options=[b"\x94\x04\x00\x00"]) / tcp())
    d = dissect(frame)
    assert d.layer("ipv4").length == 24 and d.layer("ipv4")["options"] == b"\x94\x04\x00\x00"
    assert (d.l4, d.payload_off) == (38, 58)
    first = bytes(Ether(**MACS) / IP(src=A4, dst=B4, flags="MF", id=9) / UDP(sport=1, dport=2) / Raw(b"a" * 40))
    later = bytes(Ether(**MACS) / IP(src=A4, dst=B4, frag=5, proto=17, id=9) / Raw(b"a" * 40))
    for frame, offset in ((first, 0), (later, 40)):
        d = dissect(frame)
        assert d.fragment and d.problem is None and names(d) == ["eth", "ipv4"]
        assert (d.layer("ipv4")["frag_offset"], d.ip_proto, d.sport, d.l4_proto) == (offset, 17, None, None)
        assert describe(1, frame) == ("udp", A4, B4, None, None, (), ())


def test_ipv6_extension_headers():
    frame = bytes(Ether(**MACS) / IPv6(src=A6, dst=B6, fl=0x12345, tc=0x20, hlim=3) / IPv6ExtHdrHopByHop()
                  / IPv6ExtHdrRouting(addresses=["fd00::9"], segleft=1) / IPv6ExtHdrDestOpt() / tcp())
    d = dissect(frame)
    assert d.problem is None
    assert names(d) == ["eth", "ipv6", "ipv6-hbh", "ipv6-route", "ipv6-dstopts", "tcp"]
    assert [(lay.offset, lay.length) for lay in d.layers[1:]] == [(14, 40), (54, 8), (62, 24), (86, 8), (94, 20)]
    ip = d.layer("ipv6")
    assert (ip["flow_label"], ip["tc"], ip["hop_limit"], ip["next_header"]) == (0x12345, 0x20, 3, 0)
    assert d.layer("ipv6-route")["segments_left"] == 1
    assert (d.ip_proto, d.l4, d.payload_off, d.payload_len, d.l3_end) == (6, 94, 114, 100, 214)
    frag = bytes(Ether(**MACS) / IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(offset=0, m=1, id=5) / tcp())
    d = dissect(frag)
    assert d.fragment and d.frag_header and d.layer("ipv6-frag")["id"] == 5 and d.l4_proto is None
    atomic = bytes(Ether(**MACS) / IPv6(src=A6, dst=B6) / IPv6ExtHdrFragment(offset=0, m=0) / tcp())
    d = dissect(atomic)
    assert not d.fragment and d.frag_header and d.l4_proto == 6 and d.seq == 1000
    assert fr.parse(atomic) is None                 # GRO does not look past a Fragment header


def test_ipv6_jumbo_and_ipv4_big_tcp_lengths():
    jumbo_hbh = b"\x06\x00" + b"\xc2\x04" + struct.pack("!I", 100 + 20 + 8)
    packet = bytes(IPv6(src=A6, dst=B6, nh=0, plen=0)) + jumbo_hbh + bytes(tcp())
    d = dissect(packet, 229)
    assert d.layer("ipv6-hbh")["jumbo_length"] == 128 and (d.l3_end, d.payload_len, d.l3_ok) == (168, 100, True)
    big = bytearray(bytes(Ether(**MACS) / IP(src=A4, dst=B4) / tcp()))
    big[16:18] = b"\0\0"                            # IPv4 BIG TCP: total length 0, the frame says
    d = dissect(bytes(big), wirelen=len(big) + 1000)
    assert (d.l3_end, d.payload_len, d.l3_ok) == (len(big) + 1000, 1100, True)


def test_ip_length_beyond_the_frame_is_a_problem_unless_the_wire_had_it():
    frame = bytes(Ether(**MACS) / IP(src=A4, dst=B4) / tcp())
    cut = frame[:80]
    assert dissect(cut, wirelen=len(frame)).l3_ok and dissect(cut, wirelen=len(frame)).problem is None
    d = dissect(cut)
    assert not d.l3_ok and d.problem == "IPv4 total length 140 does not fit the 66 bytes available"
    assert d.seq == 1000                            # what could be parsed is still there


# -----------------------------------------------------------------------------
# tunnels
# -----------------------------------------------------------------------------
@pytest.mark.parametrize("outer,inner,kind", [
    (IP(src=O4, dst=P4), IP(src=A4, dst=B4), "ipip"),
    (IP(src=O4, dst=P4), IPv6(src=A6, dst=B6), "sit"),
    (IPv6(src="fd01::1", dst="fd01::2"), IP(src=A4, dst=B4), "ip4ip6"),
    (IPv6(src="fd01::1", dst="fd01::2"), IPv6(src=A6, dst=B6), "ip6ip6"),
])
def test_ip_in_ip(outer, inner, kind):
    frame = bytes(Ether(**MACS) / outer / inner / tcp())
    d = dissect(frame)
    outer_len = 20 if IP in outer and outer.version == 4 else 40
    inner_len = 20 if inner.version == 4 else 40
    assert d.problem is None and len(d.tunnels) == 1
    t = d.tunnels[0]
    assert (t.kind, t.outer_l3, t.inner, t.key, t.sport) == (kind, 14, 14 + outer_len, None, None)
    assert t.identity()[1:3] == (outer.src, outer.dst)
    assert d.five_tuple == (6, inner.src, inner.dst, 40000, 5201)
    assert (d.l3, d.l4, d.payload_len) == (14 + outer_len, 14 + outer_len + inner_len, 100)
    assert flow_label(describe(1, frame)).endswith(f" via {kind} {outer.src} > {outer.dst}")


def test_gre_ipv4_with_checksum_key_and_sequence():
    gre = GRE(chksum_present=1, key_present=1, seqnum_present=1, key=0xABCD, sequence_number=42, proto=0x0800)
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / gre / inner_v4())
    d = dissect(frame)
    assert names(d) == ["eth", "ipv4", "gre", "ipv4", "tcp"] and d.problem is None
    g = d.layer("gre")
    assert (g.offset, g.length, g["key"], g["seq"], g["checksum_present"], g["version"]) == (34, 16, 0xABCD, 42, True, 0)
    t = d.outer
    assert (t.kind, t.key, t.ip_proto, t.inner) == ("gre", 0xABCD, 47, 50)
    assert (d.l3, d.l4, d.payload_off, d.payload_len) == (50, 70, 90, 100)
    assert [c.kind for c in d.checksums] == ["ipv4", "gre", "ipv4", "tcp"]
    assert flow_json(describe(1, frame)) == {
        "proto": "tcp", "src": A4, "dst": B4, "sport": 40000, "dport": 5201, "vlan": [],
        "tunnel": {"kind": "gre", "src": O4, "dst": P4, "key": 0xABCD, "sport": None, "dport": None, "vlan": []}}


def test_gre_over_ipv6_bridging_ethernet_with_inner_vlan():
    gre = GRE(key_present=1, key=7, proto=0x6558)
    frame = bytes(Ether(**MACS) / IPv6(src="fd01::1", dst="fd01::2") / gre / Ether(**INNER_MACS)
                  / Dot1Q(vlan=30) / inner_v4())
    d = dissect(frame)
    assert names(d) == ["eth", "ipv6", "gre", "eth", "vlan", "ipv4", "tcp"] and d.problem is None
    t = d.outer
    assert (t.kind, t.family, t.key, t.vlans, t.inner) == ("ip6gretap", 6, 7, (30,), 62)
    assert d.vlans == () and (d.l3, d.payload_len) == (80, 100)
    assert flow_label(describe(1, frame)) == \
        f"tcp {A4}:40000 > {B4}:5201 via ip6gretap fd01::1 > fd01::2 key 7 inner vlan 30"


def test_vxlan_default_and_configured_ports():
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=51000, dport=4789) / VXLAN(vni=4242, flags=0x08)
                  / Ether(**INNER_MACS) / inner_v4())
    d = dissect(frame)
    assert names(d) == ["eth", "ipv4", "udp", "vxlan", "eth", "ipv4", "tcp"] and d.problem is None
    t = d.outer
    assert (t.kind, t.key, t.sport, t.dport, t.outer_l3, t.inner) == ("vxlan", 4242, 51000, 4789, 14, 50)
    assert d.five_tuple == (6, A4, B4, 40000, 5201) and (d.l3, d.l4, d.payload_len) == (64, 84, 100)
    assert [c.kind for c in d.checksums] == ["ipv4", "udp", "ipv4", "tcp"]
    assert flow_label(describe(1, frame)) == f"tcp {A4}:40000 > {B4}:5201 via vxlan {O4}:51000 > {P4}:4789 vni 4242"
    plain = dissect(frame, vxlan_ports=())
    assert plain.tunnels == () and plain.five_tuple == (17, O4, P4, 51000, 4789)
    other_port = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=1, dport=8472) / VXLAN(vni=1)
                       / Ether(**INNER_MACS) / inner_v4())
    assert dissect(other_port).tunnels == ()
    assert dissect(other_port, vxlan_ports={4789, 8472}).outer.key == 1
    assert fr.parse(other_port).proto == 17 and fr.parse(other_port, vxlan_ports=[8472]).seq == 1000


def test_vxlan_is_followed_with_or_without_the_i_flag():
    # GRO merges VXLAN frames on their inner flow whatever the I flag (vxlan_gro_prepare_receive
    # compares the header words, never tests the flag), so the dissector follows them the same way
    label = f"tcp {A4}:40000 > {B4}:5201 via vxlan {O4}:51000 > {P4}:4789 vni 4242"
    for flags in (0x00, 0x08):
        frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=51000, dport=4789)
                      / VXLAN(vni=4242, flags=flags) / Ether(**INNER_MACS) / inner_v4())
        d = dissect(frame)
        assert names(d) == ["eth", "ipv4", "udp", "vxlan", "eth", "ipv4", "tcp"] and d.problem is None
        assert d.layer("vxlan").fields == (("flags", flags), ("vni", 4242))
        t = d.outer
        assert (t.kind, t.key, t.sport, t.dport, t.outer_l3, t.inner) == ("vxlan", 4242, 51000, 4789, 14, 50)
        assert d.five_tuple == (6, A4, B4, 40000, 5201) and (d.l3, d.l4, d.payload_len) == (64, 84, 100)
        assert (d.seq, d.tcp_flags) == (1000, 0x18)
        assert flow_label(describe(1, frame)) == label
        p = fr.parse(frame, vxlan_ports=[4789])
        assert (p.proto, p.sport, p.dport, p.seq, p.payload, p.tunnels) == \
            (6, 40000, 5201, 1000, 100, (("vxlan", 4242, 51000, 4789, ()),))


def test_vxlan_without_the_i_flag_is_entered_like_with_it():
    # eight zero bytes, then 60 more: an inner Ethernet header of ethertype 0, as for an I-flagged frame
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=1, dport=4789) / Raw(bytes(8) + bytes(60)))
    d = dissect(frame)
    assert names(d) == ["eth", "ipv4", "udp", "vxlan", "eth"] and d.problem is None
    assert (d.outer.kind, d.outer.key, d.ethertype, d.five_tuple) == ("vxlan", 0, 0, None)
    assert flow_label(describe(1, frame)) == f"ethertype-0x0000 via vxlan {O4}:1 > {P4}:4789 vni 0"
    # too short for the inner Ethernet header: the outer UDP, with the problem said
    short = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=1, dport=4789) / Raw(bytes(8) + bytes(6)))
    d = dissect(short)
    assert d.tunnels == () and d.five_tuple == (17, O4, P4, 1, 4789)
    assert d.problem == "truncated inner Ethernet header (6 of 14 bytes captured)"


def test_geneve_with_options_and_protocol_types():
    opts = [GeneveOptions(classid=0x0102, type=0x80, data=b"abcdefgh")]
    frame = bytes(Ether(**MACS) / IPv6(src="fd01::1", dst="fd01::2") / UDP(sport=3000, dport=6081)
                  / GENEVE(vni=77, proto=0x6558, options=opts) / Ether(**INNER_MACS) / inner_v4())
    d = dissect(frame)
    g = d.layer("geneve")
    assert (g.offset, g.length, g["opt_len"], g["vni"], g["protocol"]) == (62, 20, 12, 77, 0x6558)
    assert g["options"] == ((0x0102, 0x80, b"abcdefgh"),)
    assert (d.outer.kind, d.outer.key, d.outer.inner, d.l3) == ("geneve", 77, 82, 96)
    assert d.five_tuple == (6, A4, B4, 40000, 5201) and d.problem is None
    l3 = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=3000, dport=6081) / GENEVE(vni=5, proto=0x86DD)
               / IPv6(src=A6, dst=B6) / tcp())
    d = dissect(l3)
    assert names(d) == ["eth", "ipv4", "udp", "geneve", "ipv6", "tcp"] and d.outer.inner == 50
    assert d.five_tuple == (6, A6, B6, 40000, 5201)


def test_nested_tunnels_are_all_named_outermost_first():
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / GRE(proto=0x0800) / IP(src="172.16.0.1", dst="172.16.0.2")
                  / UDP(sport=9, dport=4789) / VXLAN(vni=3) / Ether(**INNER_MACS) / inner_v4())
    flow = describe(1, frame)
    assert [t[0] for t in flow[6]] == ["gre", "vxlan"]
    assert flow_json(flow)["tunnel"]["inner"]["key"] == 3
    assert flow_label(flow).endswith(f"via gre {O4} > {P4} via vxlan 172.16.0.1:9 > 172.16.0.2:4789 vni 3")


def test_non_ip_inside_a_tunnel_is_named_by_ethertype():
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=2, dport=4789) / VXLAN(vni=9)
                  / Ether(**INNER_MACS, type=0x0806) / Raw(bytes(28)))
    assert flow_label(describe(1, frame)) == f"arp via vxlan {O4}:2 > {P4}:4789 vni 9"


def test_oracle_checksum_fixing_goes_inside_out():
    frame = bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=1, dport=4789, chksum=0x1111) / VXLAN(vni=1)
                  / Ether(**INNER_MACS) / IP(src=A4, dst=B4, chksum=0x2222) / TCP(chksum=0x3333) / PAYLOAD)
    fixed = fr.fix_checksums(frame, vxlan_ports=[4789])
    rebuilt = Ether(frame)
    for layer in (rebuilt[UDP], rebuilt[VXLAN][IP], rebuilt[VXLAN][TCP]):
        del layer.chksum                            # scapy recomputes them: inner ones first
    assert fixed == bytes(rebuilt) != frame
    assert fr.l4_checksum_ok(fixed, fr.parse(fixed, vxlan_ports=[4789]))
    # without the VXLAN port only the outer UDP checksum is fixed, over the inner bytes as they are
    outer_only = fr.fix_checksums(frame)
    assert outer_only[:40] == frame[:40] and outer_only[40:42] != frame[40:42] and outer_only[42:] == frame[42:]


# -----------------------------------------------------------------------------
# damaged frames
# -----------------------------------------------------------------------------
def _vxlan_frame():
    return bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=51000, dport=4789) / VXLAN(vni=4242)
                 / Ether(**INNER_MACS) / Dot1Q(vlan=5) / inner_v4())


def test_every_truncation_of_a_vxlan_frame_parses():
    frame = _vxlan_frame()
    full = dissect(frame)
    assert full.problem is None and full.payload_off == 108
    for cut in range(len(frame)):
        d = dissect(frame[:cut])
        assert d.problem is not None, cut           # a header, or else the IP lengths, cut short
        assert bool(d.tunnels) == (cut >= 64), cut  # once the inner Ethernet header (50..64) is there
        assert (d.l4_proto == 6) == (cut >= 108), cut  # the inner TCP header is 88..108
        assert (d.sport == 40000) == (cut >= 92), cut
        d = dissect(frame[:cut], wirelen=len(frame))
        assert (d.problem is None) == (cut >= full.payload_off), cut
        # the innermost IP header seen is whole: the outer one (14..34) until the
        # tunnel is entered (64), then the inner one (68..88)
        assert d.l3_ok == (34 <= cut < 64 or cut >= 88), cut
        for link in (113, 276, 101, 0, 108):
            dissect(frame[:cut], link)


def test_mutated_frames_never_raise():
    rng = random.Random(6)
    seeds = [_vxlan_frame(),
             bytes(Ether(**MACS) / IPv6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrRouting() / IPv6ExtHdrFragment() / tcp()),
             bytes(Ether(**MACS) / IP() / GRE(chksum_present=1, key_present=1, proto=0x6558) / Ether(**INNER_MACS)
                   / IP() / UDP()),
             bytes(Ether(**MACS) / IP() / UDP(dport=6081) / GENEVE(proto=0x0800, options=[GeneveOptions(data=b"1234")])
                   / IP() / tcp()),
             bytes(Ether(**MACS) / IPv6() / IP() / tcp()),
             bytes(Ether(**MACS) / IP() / GRE(version=1, key_present=1, seqnum_present=1, proto=0x880B) / Raw(bytes(40)))]
    for seed in seeds:
        for _ in range(400):
            frame = bytearray(seed)
            for _flip in range(rng.randint(1, 4)):
                frame[rng.randrange(len(frame))] = rng.randrange(256)
            frame = bytes(frame[:rng.randint(0, len(frame))])
            d = dissect(frame)
            describe(1, frame)
            p = fr.parse(frame, vxlan_ports=[4789], geneve_ports=[6081])
            fr.fix_checksums(frame, vxlan_ports=[4789], geneve_ports=[6081])
            fr.fix_checksums(frame, vxlan_ports=[4789], geneve_ports=[6081], any_ipv6_version=True)
            fr.fix_seed_checksum(frame)
            # the oracle reads past an IPv6 version nibble (as GRO does), and only there
            ports = {"vxlan_ports": [4789], "geneve_ports": [6081]}
            g, strict = fr.gro_dissect(frame, **ports), dissect(frame, **ports)
            assert g == strict or "IP version" in strict.problem
            assert d.caplen == len(frame) and (p is None or p.l4 == g.l4)


def test_short_and_unknown_frames():
    assert dissect(b"").problem == "truncated Ethernet header (0 of 14 bytes captured)"
    assert describe(1, b"") == ("truncated", "", "", None, None, (), ())
    assert dissect(b"\x00" * 30, 999).problem == "unsupported link type 999"
    assert dissect(b"\x50" + bytes(30), 101).problem == "raw IP record with IP version 5"
    ihl = bytearray(bytes(Ether(**MACS) / IP() / tcp()))
    ihl[14] = 0x43
    assert dissect(bytes(ihl)).problem == "IPv4 header length 12 < 20"
    assert describe(1, bytes(Ether(**MACS, type=0x88B5) / Raw(bytes(50)))) == ("local", "", "", None, None, (), ())
    assert describe(1, bytes(Ether(**MACS, type=0x88B5))[:13]) == ("truncated", "", "", None, None, (), ())


# -----------------------------------------------------------------------------
# the consumers
# -----------------------------------------------------------------------------
BUNDLED = sorted(glob.glob(os.path.join(ROOT, "captures", "*.pcap")) + glob.glob(os.path.join(ROOT, "tests", "data", "*.pcap")))


def test_bundled_captures_all_have_a_baseline():
    with open(os.path.join(ROOT, "tests", "data", "dissect-baseline.json")) as f:
        baseline = json.load(f)
    assert sorted(baseline) == sorted(os.path.relpath(p, ROOT) for p in BUNDLED)


@pytest.mark.parametrize("path", BUNDLED, ids=[os.path.basename(p) for p in BUNDLED])
def test_report_compare_and_oracle_unchanged_on_bundled_captures(path, monkeypatch):
    with open(os.path.join(ROOT, "tests", "data", "dissect-baseline.json")) as f:
        expected = json.load(f)[os.path.relpath(path, ROOT)]
    monkeypatch.chdir(ROOT)
    assert digests(os.path.relpath(path, ROOT)) == expected


def test_replay_table_shows_ipv6_and_tunnel_names(tmp_path):
    frames = [bytes(Ether(**MACS) / IPv6(src=A6, dst=B6) / tcp(seq=1000 + 100 * k)) for k in range(3)]
    frames += [bytes(Ether(**MACS) / IP(src=O4, dst=P4) / UDP(sport=51000, dport=4789) / VXLAN(vni=4242)
                     / Ether(**INNER_MACS) / inner_v4())]
    path = str(tmp_path / "in.pcap")
    with PcapWriter(path, 1) as w:
        for k, f in enumerate(frames):
            w.write(1_000_000_000 + k * 1000, f)
    # flows are named through the tunnels the host decapsulates (here: a VXLAN device on 4789)
    result = CliRunner().invoke(main, ["replay", path, "--json", str(tmp_path / "s.json"), "--vxlan-port", "4789"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"tcp [{A6}]:40000 > [{B6}]:5201" in result.output
    assert f"tcp {A4}:40000 > {B4}:5201 via vxlan {O4}:51000 > {P4}:4789 vni 4242" in result.output
    doc = json.loads((tmp_path / "s.json").read_text())
    tunnel = [f["flow"]["tunnel"] for f in doc["flows"] if "tunnel" in f["flow"]]
    assert tunnel == [{"kind": "vxlan", "src": O4, "dst": P4, "key": 4242, "sport": 51000, "dport": 4789, "vlan": []}]
    # a host without the device sees (and names) the outer UDP flow
    result = CliRunner().invoke(main, ["replay", path], env={"COLUMNS": "200"})
    assert f"udp {O4}:51000 > {P4}:4789" in result.output and "vni" not in result.output


def test_compare_view_prints_ipv6_and_tunnel_labels_verbatim(tmp_path):
    from rich.console import Console

    from grotool.cli.compare_view import render_compare
    from grotool.compare import compare_captures

    def v6(seq, size):
        return bytes(Ether(**MACS) / IPv6(src=A6, dst=B6) / TCP(sport=40000, dport=5201, seq=seq, flags="A")
                     / Raw(bytes(size)))

    def gre(seq, size):
        return bytes(Ether(**MACS) / IP(src=O4, dst=P4) / GRE(key_present=1, key=5, proto=0x0800)
                     / IP(src=A4, dst=B4) / TCP(sport=1, dport=2, seq=seq, flags="A") / Raw(bytes(size)))

    paths = []
    for name, frames in (("a", [v6(0, 200), gre(0, 100), gre(100, 100)]), ("b", [v6(0, 100), v6(100, 100), gre(0, 200)])):
        paths.append(str(tmp_path / f"{name}.pcap"))
        with PcapWriter(paths[-1], 1) as w:
            for k, f in enumerate(frames):
                w.write(1_000_000_000 + k, f)
    result = compare_captures(*paths)
    assert [f.kind for f in result.flows] == ["tcp", "tcp"]       # GRE's inner TCP is compared as TCP
    console = Console(record=True, width=200, force_terminal=False)
    render_compare(result, console)
    text = console.export_text()
    v6_label = f"tcp [{A6}]:40000 > [{B6}]:5201"
    gre_label = f"tcp {A4}:1 > {B4}:2 via gre {O4} > {P4} key 5"
    assert text.count(v6_label) >= 2 and text.count(gre_label) >= 2    # in the table and in its panel title


def test_pptp_gre_with_a_stray_checksum_flag():
    frame = bytearray(bytes(Ether(**MACS) / IP(src=O4, dst=P4) / GRE(version=1, key_present=1, key=0x1234,
                                                                     proto=0x880B)))
    frame[34] |= 0x80                               # C is not a flag of version 1: no checksum word
    d = dissect(bytes(frame))
    assert len(frame) == 42 and d.problem is None and d.tunnels == ()
    assert (d.layer("gre").length, d.layer("gre")["key"]) == (8, 0x1234) and [c.kind for c in d.checksums] == ["ipv4"]
    assert describe(1, bytes(frame)) == ("gre", O4, P4, None, None, (), ())


def test_oracle_fixes_a_gre_checksum_around_anything():
    icmp = bytes.fromhex("0800f7ff00000000")                  # an echo request, checksum right
    frame = bytearray(bytes(Ether(**MACS) / IP(src=O4, dst=P4) / GRE(chksum_present=1, proto=0x0800)
                            / IP(src=A4, dst=B4, proto=1) / Raw(icmp)))
    frame[38:40] = b"\x12\x34"                                # the GRE checksum, wrong
    fixed = fr.fix_checksums(bytes(frame))
    assert fixed[38:40] == bytes(Ether(**MACS) / IP(src=O4, dst=P4) / GRE(chksum_present=1, proto=0x0800)
                                 / IP(src=A4, dst=B4, proto=1) / Raw(icmp))[38:40] != b"\x12\x34"
    assert fixed[:38] == frame[:38] and fixed[40:] == frame[40:]


def test_nesting_is_bounded():
    packet = IP(src=A4, dst=B4) / tcp()
    for _ in range(8):
        packet = IP(src=O4, dst=P4) / packet
    d = dissect(bytes(Ether(**MACS) / packet))         # 9 IPv4 headers
    assert d.problem == "more than 8 nested IP headers" and len(d.tunnels) == 8 and d.l4_proto is None
    tags = Ether(**MACS)
    for vid in range(1, 11):
        tags = tags / Dot1Q(vlan=vid)
    d = dissect(bytes(tags / IP() / tcp()))
    assert d.problem == "more than 8 VLAN tags" and d.vlans == tuple(range(1, 9)) and d.family is None
