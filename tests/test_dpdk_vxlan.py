"""VXLAN TCP/IPv4 GRO of DPDK 22.11 (gro_vxlan_tcp4.c, RTE_GRO_IPV4_VXLAN_TCP_IPV4):
the model's exact decisions on crafted VXLAN frames, then the same frames through the
real librte_gro in light and heavy mode: the same packets, in the same order, byte
for byte (stale inner and outer checksums included)."""

from __future__ import annotations

import struct

import pytest

from dpdk_support import dpdk_library, outcome  # noqa: F401  (fixture)
from framebuild import ETH_P_IP, ether, ip_addr, ipv4_header, tcp_opt_ts
from grotool.dpdk.classify import classify
from grotool.dpdk.engine import DpdkSettings, simulate
import random

from test_dpdk_random import random_settings, random_traffic
from test_dpdk_rules import SETTINGS, F, fragments, seg, udp_frame

MSS = 1448                                   # seg() of test_dpdk_rules steps by 1448
VX = ("vxlan_tcp4",)
OUTER = 14 + 20 + 8 + 8                      # outer Ethernet, IPv4, UDP, VXLAN


def vxlan(inner: bytes, *, vni=42, dport=4789, sport=40000, outer_id=100, outer_df=False, vx_flags=0x08,
          outer_csum=None, udp_csum=0, outer_src="10.0.0.1", vlans=()):
    """`inner` (an Ethernet frame) in VXLAN in UDP/IPv4 in Ethernet."""
    body = struct.pack("!BxxxI", vx_flags, vni << 8) + inner
    udp = struct.pack("!HHHH", sport, dport, 8 + len(body), udp_csum) + body
    ip = ipv4_header(ip_addr(outer_src), ip_addr("10.0.0.2"), 17, 20 + len(udp), ip_id=outer_id, df=outer_df)
    if outer_csum is not None:
        ip = ip[:10] + struct.pack("!H", outer_csum) + ip[12:]
    return ether(ip + udp, ETH_P_IP, vlans=list(vlans)) if vlans else ether(ip + udp, ETH_P_IP)


def vseg(i, *, outer_id=None, payload=MSS, **kw):
    """Segment i of a bulk flow inside VXLAN; the outer IP ID counts with i unless given."""
    outer = {k: kw.pop(k) for k in list(kw) if k in ("vni", "dport", "sport", "outer_df", "vx_flags", "outer_csum",
                                                        "udp_csum", "outer_src")}
    return vxlan(seg(i, payload=payload, base=1000, **kw), outer_id=100 + i if outer_id is None else outer_id,
                 **outer)


CASES = {
    "in_order": [vseg(0), vseg(1), vseg(2)],
    "reorder_in_burst": [vseg(1), vseg(0), vseg(2)],
    "outer_id_not_next": [vseg(0), vseg(1, outer_id=150), vseg(2, outer_id=151)],
    "outer_id_prepend": [vseg(1, outer_id=11), vseg(0, outer_id=10), vseg(2, outer_id=12)],
    "outer_df_ignores_id": [vseg(0, outer_df=True, outer_id=5), vseg(1, outer_df=True, outer_id=77)],
    "outer_df_differs": [vseg(0), vseg(1, outer_df=True)],
    "inner_id_no_df": [vseg(0, df=False, ip_id=10), vseg(1, df=False, ip_id=11), vseg(2, df=False, ip_id=13)],
    "inner_df_differs": [vseg(0), vseg(1, df=False, ip_id=3)],
    "inner_psh_alone": [vseg(0), vseg(1, flags="PA"), vseg(2)],
    "inner_pure_ack": [vseg(0), vseg(1, payload=0), vseg(1)],
    "inner_ack_differs": [vseg(0, ack=100), vseg(1, ack=200)],
    "inner_options": [vseg(0, tcp_options=tcp_opt_ts(1, 9)), vseg(1, tcp_options=tcp_opt_ts(1, 9)),
                      vseg(2, tcp_options=tcp_opt_ts(2, 9))],
    "inner_seq_gap": [vseg(0), vseg(2), vseg(1), vseg(3)],
    "vni_differs": [vseg(0, vni=1), vseg(1, vni=2), vseg(1, vni=1)],
    "vxlan_flags_differ": [vseg(0), vseg(1, vx_flags=0x0C)],
    "outer_source_port_differs": [vseg(0, sport=1), vseg(1, sport=2)],
    "stale_outer_and_inner_checksums": [vseg(0, outer_csum=0x1234, ip_csum=0x4321, udp_csum=0xBEEF),
                                        vseg(1, outer_csum=7, ip_csum=9, udp_csum=1)],
    "other_udp_port_is_plain_udp": [vseg(0, dport=4790), vseg(1, dport=4790)],
    "outer_vlan": [vxlan(seg(0, payload=MSS), vlans=[(0x8100, 5)], outer_id=1),
                   vxlan(seg(1, payload=MSS), vlans=[(0x8100, 5)], outer_id=2)],
    "max_length": [vseg(i) for i in range(48)],
    "mixed_with_plain_tcp_and_udp": [vseg(0), seg(0), udp_frame(), vseg(1), seg(1), vseg(2)],
    "two_flows_interleaved": [vseg(i // 2, sport=1500 + i % 2) for i in range(8)],
    "inner_ipv6": [vxlan(seg(0, family=6)), vxlan(seg(1, family=6))],
    "truncated_inner": [vseg(0), vseg(1)[:OUTER + 14 + 20 + 10]],
}


def vx(**kw):
    return DpdkSettings(mode="light", gro_types=VX, **kw)


def test_classification_sets_tunnel_bits_and_outer_lengths():
    m = classify(vseg(0))
    assert (m.outer_l2_len, m.outer_l3_len, m.l2_len, m.l3_len, m.l4_len) == (14, 20, 30, 20, 20)
    assert m.packet_type == 0x01113211      # L2_ETHER L3_IPV4 L4_UDP TUNNEL_VXLAN INNER_L2/L3_IPV4/L4_TCP
    assert classify(vseg(0), (4790,)).packet_type == 0x211     # not the application's VXLAN port


def test_vxlan_segments_merge_outer_and_inner_lengths_updated_checksums_stale():
    frames = CASES["stale_outer_and_inner_checksums"]
    (p,) = simulate(frames, vx())
    assert p.covers == [0, 1] and p.reason == "dpdk_burst_end"
    hdr = OUTER + 14 + 20 + 20
    assert p.data[hdr:] == frames[0][hdr:] + frames[1][hdr:]
    n = len(p.data)
    assert struct.unpack_from("!H", p.data, 16)[0] == n - 14                  # outer IPv4 total length
    assert struct.unpack_from("!H", p.data, 38)[0] == n - 34                  # outer UDP length
    assert struct.unpack_from("!H", p.data, OUTER + 14 + 2)[0] == n - OUTER - 14   # inner IPv4 total length
    for o in (24, 40, OUTER + 14 + 10, OUTER + 14 + 20 + 16):                # checksums: outer IP, UDP, inner IP, TCP
        assert p.data[o:o + 2] == frames[0][o:o + 2]


def test_without_vxlan_tcp4_vxlan_frames_pass_through():
    out = simulate(CASES["in_order"], DpdkSettings(gro_types=("tcp4", "udp4")))
    assert [(p.covers, p.reason) for p in out] == [([0], "dpdk_not_gro_type"), ([1], "dpdk_not_gro_type"),
                                                  ([2], "dpdk_not_gro_type")]


@pytest.mark.parametrize("case,expected,apart", [
    ("reorder_in_burst", [[1, 0, 2]], []),
    ("outer_id_not_next", [[0], [1, 2]], ["dpdk_outer_ip_id_not_next"]),
    ("outer_id_prepend", [[1, 0, 2]], []),
    ("outer_df_ignores_id", [[0, 1]], []),
    ("outer_df_differs", [[0], [1]], ["dpdk_outer_df_differs"]),
    ("inner_id_no_df", [[0, 1], [2]], ["dpdk_ip_id_not_next"]),
    ("inner_df_differs", [[0], [1]], ["dpdk_df_differs"]),
    ("inner_ack_differs", [[0], [1]], ["dpdk_ack_differs"]),
    ("inner_options", [[0, 1], [2]], ["dpdk_tcp_options_differ"]),
    ("vni_differs", [[0, 2], [1]], []),
    ("vxlan_flags_differ", [[0], [1]], []),
])
def test_vxlan_merge_rules(case, expected, apart):
    out = simulate(CASES[case], vx())
    assert [p.covers for p in out] == expected
    assert [p.held_apart for p in out if p.held_apart] == apart


def test_mixed_traffic_vxlan_table_flushes_before_the_tcp_table():
    out = simulate(CASES["mixed_with_plain_tcp_and_udp"], DpdkSettings(gro_types=("tcp4", "vxlan_tcp4")))
    assert [(p.covers, p.reason) for p in out] == [([0, 3, 5], "dpdk_burst_end"), ([1, 4], "dpdk_burst_end"),
                                                  ([2], "dpdk_not_gro_type")]


def test_vxlan_aggregate_stops_at_inner_ipv4_length_65535():
    # merge_two_tcp4_packets counts from the inner IPv4 header: 40 + 45 x 1448 = 65,200 bytes
    out = simulate(CASES["max_length"], vx(burst=64))
    assert [len(p.covers) for p in out] == [45, 3] and out[1].held_apart == "dpdk_max_length"
    assert struct.unpack_from("!H", out[0].data, OUTER + 14 + 2)[0] == 40 + 45 * MSS


@pytest.mark.parametrize("case", sorted(CASES))
def test_vxlan_model_agrees_with_librte_gro(case, dpdk_library):
    frames = CASES[case]
    for settings in SETTINGS:
        for types in (VX, ("tcp4", "udp4", "vxlan_tcp4")):
            settings = DpdkSettings(**{**settings.as_json(), "gro_types": types})
            assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), settings


def wrap_randomly(rng: random.Random, frames):
    """Seeded random traffic, part of it tunnelled: the TCP frames of some flows in VXLAN
    (VNI per flow, sometimes another), outer IP IDs counting with gaps, outer DF sometimes;
    the fragments of some datagrams in VXLAN with random outer source ports and IDs."""
    out, outer_id, wrapped = [], {}, {}
    tunnelled = {2000 + f for f in range(3) if rng.random() < 0.8}
    outer_df = {sport: rng.random() < 0.3 for sport in tunnelled}
    for frame in frames:
        sport = struct.unpack_from("!H", frame, 34)[0] if len(frame) > 36 and frame[23] == 6 else None
        if sport in tunnelled:
            outer_id[sport] = outer_id.get(sport, rng.choice([1, 65534])) + (1 if rng.random() < 0.9 else 3)
            frame = vxlan(frame, vni=sport if rng.random() < 0.95 else 7, outer_id=outer_id[sport] & 0xFFFF,
                          outer_df=outer_df[sport] != (rng.random() < 0.05), sport=40000 + sport % 2)
        elif len(frame) > 34 and frame[12:14] == b"\x08\x00" and frame[23] == 17 and frame[20:22] != b"\x00\x00":
            ident = frame[18:20]                # a fragment: its datagram tunnelled or not, at random
            if wrapped.setdefault(ident, rng.random() < 0.6):
                frame = vxlan(frame, sport=rng.choice([40000, 40001]), outer_id=rng.randrange(65536))
        out.append(frame)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_random_vxlan_traffic_agrees_with_librte_gro(seed, dpdk_library):
    rng = random.Random(1000 + seed)
    frames = wrap_randomly(rng, random_traffic(rng))
    for _ in range(3):
        settings = random_settings(rng)
        settings = DpdkSettings(**{**settings.as_json(), "gro_types": settings.gro_types + rng.choice(
            [VX, ("vxlan_udp4",), ("vxlan_tcp4", "vxlan_udp4")])})
        assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), (seed, settings)


# -- VXLAN UDP/IPv4: inner IPv4 fragment reassembly (gro_vxlan_udp4.c) ---------------------
def vfrags(ident=7, sports=None, **kw):
    inner = fragments(ident=ident, **kw)
    return [vxlan(f, outer_id=200 + i, sport=sports[i] if sports else 40000) for i, f in enumerate(inner)]


VF = vfrags()                                    # 3 fragments: 1480, 1480, 1048 bytes
VSMALL = vfrags(ident=9, size=40, piece=24, pad_last=True)   # the last inner frame padded to 60 bytes
VXU = ("vxlan_udp4",)
ALL = ("tcp4", "udp4", "vxlan_tcp4", "vxlan_udp4")
FRAG_CASES = {
    "vfrags_in_order": VF,
    "vfrags_reversed": VF[::-1],
    "vfrags_middle_last": [VF[0], VF[2], VF[1]],
    "vfrags_two_datagrams": [x for pair in zip(VF, vfrags(ident=8)) for x in pair],
    "vfrags_duplicate": [VF[0], VF[0], VF[1], VF[2]],
    "vfrags_outer_source_ports_differ": vfrags(sports=[1, 2, 3]),
    "vfrags_vni_differs": [VF[0], vxlan(fragments()[1], vni=9), VF[2]],
    "vfrags_inner_padding": VSMALL,
    "vfrags_inner_padding_reversed": VSMALL[::-1],
    "vfrags_with_plain_frags_and_vxlan_tcp": [VF[0], F[0], vseg(0), VF[1], F[1], vseg(1), VF[2], F[2]],
    "vxlan_plain_udp": [vxlan(udp_frame()), vxlan(udp_frame())],
    "vfrags_icmp": vfrags(proto=1),
}


def test_vxlan_udp4_reassembles_inner_fragments_lengths_and_inner_mf_updated():
    (p,) = simulate(VF[::-1], DpdkSettings(gro_types=VXU))
    assert p.covers == [2, 1, 0] and p.reason == "dpdk_burst_end"
    inner = OUTER + 14
    n = len(p.data)
    assert n == inner + 20 + 8 + 4000
    assert struct.unpack_from("!H", p.data, 16)[0] == n - 14
    assert struct.unpack_from("!H", p.data, 38)[0] == n - 34
    assert struct.unpack_from("!H", p.data, inner + 2)[0] == 20 + 8 + 4000           # inner total length
    assert struct.unpack_from("!H", p.data, inner + 6)[0] == 0 and VF[0][inner + 6] & 0x20   # MF cleared
    assert p.data[24:26] == VF[0][24:26] and p.data[inner + 10:inner + 12] == VF[0][inner + 10:inner + 12]


def test_vxlan_udp4_ignores_the_outer_source_port_and_keys_on_the_vni():
    assert [p.covers for p in simulate(FRAG_CASES["vfrags_outer_source_ports_differ"],
                                       DpdkSettings(gro_types=VXU))] == [[0, 1, 2]]
    assert [p.covers for p in simulate(FRAG_CASES["vfrags_vni_differs"], DpdkSettings(gro_types=VXU))] == [[0], [2],
                                                                                                           [1]]


@pytest.mark.parametrize("case", sorted(FRAG_CASES))
def test_vxlan_udp4_model_agrees_with_librte_gro(case, dpdk_library):
    frames = FRAG_CASES[case]
    for settings in SETTINGS:
        for types in (VXU, ALL):
            settings = DpdkSettings(**{**settings.as_json(), "gro_types": types})
            assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), settings
