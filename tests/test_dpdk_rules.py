"""The DPDK stack (grotool/dpdk/): each rule of DPDK 22.11's lib/gro on crafted
frames, asserted on the model's exact output, then the same frames through the
real librte_gro (`grotool dpdk`'s harness) in light and heavy mode with several
bursts and flush cadences: the same packets, in the same order, byte for byte."""

from __future__ import annotations

import struct

import pytest

from dpdk_support import dpdk_library, outcome  # noqa: F401  (fixture)
from framebuild import ETH_P_IP, IPPROTO_TCP, ether, ip_addr, ipv4_header, tcp_frame, tcp_opt_ts
from grotool.dpdk.engine import DpdkSettings, simulate

MSS = 1448


def seg(i, payload=MSS, base=1000, **kw):
    """Segment i of a bulk flow (sequence base + i * MSS)."""
    kw.setdefault("seq", base + i * MSS)
    return tcp_frame(payload, **kw)


def udp_frame(sport=5000, dport=6000, payload=b"u" * 100):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = ipv4_header(ip_addr("192.168.1.200"), ip_addr("192.168.1.100"), 17, 20 + len(udp))
    return ether(ip + udp, ETH_P_IP)


CASES = {
    "in_order": [seg(0), seg(1), seg(2)],
    "psh_alone": [seg(0), seg(1, flags="PA"), seg(2)],
    "fin_and_pure_ack": [seg(0), seg(1, flags="FA"), tcp_frame(0, seq=5000, pad=True)],
    "ack_differs": [seg(0, ack=100), seg(1, ack=200)],
    "options_differ": [seg(0, tcp_options=tcp_opt_ts(1, 9)), seg(1, tcp_options=tcp_opt_ts(2, 9))],
    "options_equal": [seg(0, tcp_options=tcp_opt_ts(1, 9)), seg(1, tcp_options=tcp_opt_ts(1, 9))],
    "reorder_in_burst": [seg(1), seg(0), seg(2)],
    "ip_id_no_df": [seg(0, df=False, ip_id=10), seg(1, df=False, ip_id=11), seg(2, df=False, ip_id=13)],
    "ip_id_df_ignored": [seg(0, ip_id=10), seg(1, ip_id=50), seg(2, ip_id=3)],
    "df_differs": [seg(0), seg(1, df=False, ip_id=11)],
    "ip_id_no_wrap": [seg(0, df=False, ip_id=65535), seg(1, df=False, ip_id=0)],
    "prepend_then_append_ip_id": [seg(1, df=False, ip_id=11), seg(0, df=False, ip_id=10),
                                  seg(2, df=False, ip_id=12)],
    "ttl_tos_vlan_not_compared": [seg(0, vlans=[(0x8100, 5)]), seg(1, ttl=63, vlans=[(0x8100, 6)]),
                                  seg(2, tos=4, vlans=[(0x8100, 7)])],
    "mixed_l2_len": [seg(0), seg(1, vlans=[(0x8100, 5)])],
    "ip_options_not_compared": [seg(0, ip_options=b"\x01\x01\x01\x00"), seg(1, ip_options=b"\x01\x01\x01\x01")],
    "seq_wrap": [seg(0, base=(1 << 32) - MSS), seg(1, base=(1 << 32) - MSS)],
    "max_length": [seg(i) for i in range(47)],
    "padding_trimmed": [seg(0, payload=6, pad=True), seg(1, payload=6, base=1000 + 6 - MSS, pad=True)],
    "seq_gap": [seg(0), seg(2), seg(1), seg(3)],
    "retransmit": [seg(0), seg(1), seg(1), seg(2)],
    "two_flows_interleaved": [seg(i // 2, sport=1500 + i % 2) for i in range(8)],
    "truncated_tcp_header": [seg(0), seg(1, tcp_options=tcp_opt_ts(1, 2))[:54 + 4]],
    "ipv6_udp_pass_through": [seg(0, family=6), seg(1, family=6), udp_frame(), udp_frame()],
    "mixed_protocols": [seg(0), udp_frame(), seg(1), seg(2, flags="PA"), seg(3), udp_frame(), seg(4)],
    "many_flows": [seg(i // 10, sport=2000 + i % 10) for i in range(60)],
}


def light(**kw):
    return DpdkSettings(mode="light", **kw)


def covers(packets):
    return [p.covers for p in packets]


# -- the model's exact decisions ---------------------------------------------------------
def test_in_order_segments_merge_first_headers_kept_length_updated_checksums_stale():
    frames = CASES["in_order"]
    (p,) = simulate(frames, light())
    assert p.covers == [0, 1, 2] and p.reason == "dpdk_burst_end"
    assert len(p.data) == 54 + 3 * MSS
    assert struct.unpack_from("!H", p.data, 16)[0] == 40 + 3 * MSS            # IPv4 total length
    assert p.data[24:26] == frames[0][24:26]                                   # IPv4 checksum left stale
    assert p.data[50:52] == frames[0][50:52]                                   # TCP checksum left stale
    assert p.data[54:] == b"".join(f[54:] for f in frames)


def test_only_exact_ack_merges_psh_fin_and_pure_ack_go_alone():
    out = simulate(CASES["psh_alone"], light())
    assert covers(out) == [[0], [2], [1]]                  # held packets first, then the unprocessed
    assert [p.reason for p in out] == ["dpdk_burst_end", "dpdk_burst_end", "dpdk_tcp_flags"]
    assert out[1].held_apart == "dpdk_seq_not_adjacent"
    out = simulate(CASES["fin_and_pure_ack"], light())
    assert [(p.covers, p.reason) for p in out] == [([0], "dpdk_burst_end"), ([1], "dpdk_tcp_flags"),
                                                   ([2], "dpdk_no_payload")]
    assert len(out[2].data) == 54                          # its Ethernet padding was trimmed


@pytest.mark.parametrize("case,expected,apart", [
    ("ack_differs", [[0], [1]], "dpdk_ack_differs"),
    ("options_differ", [[0], [1]], "dpdk_tcp_options_differ"),
    ("options_equal", [[0, 1]], None),
    ("reorder_in_burst", [[1, 0, 2]], None),
    ("ip_id_no_df", [[0, 1], [2]], "dpdk_ip_id_not_next"),
    ("ip_id_df_ignored", [[0, 1, 2]], None),
    ("df_differs", [[0], [1]], "dpdk_df_differs"),
    ("ip_id_no_wrap", [[0], [1]], "dpdk_ip_id_not_next"),
    ("prepend_then_append_ip_id", [[1, 0], [2]], "dpdk_ip_id_not_next"),
    ("ttl_tos_vlan_not_compared", [[0, 1, 2]], None),
    ("ip_options_not_compared", [[0, 1]], None),
    ("seq_wrap", [[0, 1]], None),
    # frames: segments 0, 2, 1, 3; 1 joins 0 and 3 joins 2, but held packets are never joined to each other
    ("seq_gap", [[0, 2], [1, 3]], "dpdk_seq_not_adjacent"),
])
def test_merge_rules(case, expected, apart):
    out = simulate(CASES[case], light())
    assert covers(out) == expected
    assert out[-1].held_apart == apart


def test_reordered_segment_is_merged_in_front_and_its_headers_lead():
    frames = CASES["reorder_in_burst"]
    (p,) = simulate(frames, light())
    assert p.data[:16] == frames[1][:16] and p.data[18:54] == frames[1][18:54]   # all but the total length
    assert p.data[38:42] == frames[1][38:42]                # sequence number of the first segment
    assert p.data[54:] == frames[1][54:] + frames[0][54:] + frames[2][54:]


def test_aggregate_stops_at_ipv4_total_length_65535():
    out = simulate(CASES["max_length"], light(burst=64))
    assert covers(out) == [list(range(45)), [45, 46]]
    assert 40 + 45 * MSS <= 65535 < 40 + 46 * MSS
    assert out[1].held_apart == "dpdk_max_length"


def test_light_mode_never_merges_across_bursts():
    frames = [seg(i) for i in range(4)]
    assert covers(simulate(frames, light(burst=2))) == [[0, 1], [2, 3]]


def test_heavy_mode_holds_across_bursts_until_the_flush():
    frames = [seg(i) for i in range(4)]
    out = simulate(frames, DpdkSettings(mode="heavy", burst=2, flush_every=2))
    assert covers(out) == [[0, 1, 2, 3]] and out[0].reason == "dpdk_timeout_flush"
    assert covers(simulate(frames, DpdkSettings(mode="heavy", burst=2, flush_every=1))) == [[0, 1], [2, 3]]
    out = simulate(frames, DpdkSettings(mode="heavy", burst=2, flush_every=5))
    assert covers(out) == [[0, 1, 2, 3]] and out[0].reason == "end_of_capture"


def test_heavy_mode_returns_unprocessed_at_once_and_merged_at_the_flush():
    frames = [seg(0), seg(1), seg(2, flags="PA"), seg(3)]
    out = simulate(frames, DpdkSettings(mode="heavy", burst=2, flush_every=2))
    assert covers(out) == [[2], [0, 1], [3]]
    assert out[2].held_apart == "dpdk_seq_not_adjacent"


def test_table_capacity_is_flows_times_items_and_a_full_table_returns_the_packet():
    frames = [seg(0, sport=1), seg(0, sport=2), seg(0, sport=3), seg(1, sport=1)]
    out = simulate(frames, light(max_flows=1, max_items=2))
    assert [(p.covers, p.reason) for p in out] == [([0, 3], "dpdk_burst_end"), ([1], "dpdk_burst_end"),
                                                   ([2], "dpdk_table_full")]


def test_ipv6_and_udp_pass_through_in_order():
    out = simulate(CASES["ipv6_udp_pass_through"], light())
    assert covers(out) == [[0], [1], [2], [3]]
    assert {p.reason for p in out} == {"dpdk_not_gro_type"}
    assert [p.data for p in out] == CASES["ipv6_udp_pass_through"]


def test_every_frame_ends_up_in_exactly_one_packet():
    for frames in CASES.values():
        for s in (light(burst=3), DpdkSettings(mode="heavy", burst=5, flush_every=2)):
            assert sorted(i for p in simulate(frames, s) for i in p.covers) == list(range(len(frames)))


# -- against the real librte_gro ----------------------------------------------------------
SETTINGS = [light(burst=b) for b in (1, 2, 3, 32, 64)] + [
    DpdkSettings(mode="heavy", burst=b, flush_every=f) for b in (2, 32) for f in (1, 2, 3)] + [
    light(max_flows=1, max_items=2), DpdkSettings(mode="heavy", burst=4, flush_every=2, max_flows=2, max_items=2)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_model_agrees_with_librte_gro(case, dpdk_library):
    frames = CASES[case]
    for settings in SETTINGS:
        assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), settings


# -- UDP/IPv4 GRO: IPv4 fragment reassembly (gro_udp4.c) ----------------------------------
def fragments(ident=7, size=4000, piece=1480, proto=17, pad_last=False, **kw):
    """The fragments of one IPv4 datagram (a UDP header and `size` bytes), in offset order."""
    body = struct.pack("!HHHH", 5000, 6000, 8 + size, 0) + bytes((i * 13 + ident) & 0xFF for i in range(size))
    out = []
    for off in range(0, len(body), piece):
        chunk = body[off:off + piece]
        more = off + piece < len(body)
        ip = ipv4_header(ip_addr("192.168.1.200"), ip_addr("192.168.1.100"), proto, 20 + len(chunk),
                         ip_id=ident, df=False, mf=more, frag_offset=off // 8, **kw)
        out.append(ether(ip + chunk, ETH_P_IP, pad=pad_last and not more))
    return out


F = fragments()                                  # 3 fragments: 1480, 1480, 1048 bytes
SMALL = fragments(ident=9, size=40, piece=24, pad_last=True)   # 2 fragments, the last one padded
FRAG_CASES = {
    "frags_in_order": F,
    "frags_reversed": F[::-1],
    "frags_middle_last": [F[0], F[2], F[1]],
    "frags_two_datagrams": [x for pair in zip(F, fragments(ident=8)) for x in pair],
    "frags_duplicate": [F[0], F[0], F[1], F[2]],
    "frags_padded_last": SMALL,
    "frags_padded_reversed": SMALL[::-1],
    "frags_with_tcp_and_plain_udp": [F[0], seg(0), udp_frame(), F[1], seg(1), F[2]],
    "frags_icmp": fragments(proto=1),
    "frags_tcp_protocol": fragments(proto=6),
    "frags_empty_and_short": [ether(ipv4_header(ip_addr("192.168.1.200"), ip_addr("192.168.1.100"), 17, 20, ip_id=3,
                                                df=False, mf=True), ETH_P_IP, pad=True),
                              ether(ipv4_header(ip_addr("192.168.1.200"), ip_addr("192.168.1.100"), 17, 10, ip_id=4,
                                                df=False, mf=True) + b"abcd", ETH_P_IP)],
    "frags_cut_short": [F[0][:600], F[1], F[2]],
}
UDP4 = ("tcp4", "udp4")


def test_udp4_reassembles_fragments_clears_mf_and_updates_the_length():
    (p,) = simulate(F[::-1], light(gro_types=UDP4))
    assert p.covers == [2, 1, 0] and p.reason == "dpdk_burst_end"
    assert p.data == F[0][:16] + struct.pack("!H", 20 + 8 + 4000) + F[0][18:20] + b"\x00\x00" + F[0][22:] \
        + F[1][34:] + F[2][34:]                    # MF cleared, header checksum left stale


def test_udp4_holds_fragments_in_offset_order_and_joins_them_at_the_flush():
    out = simulate([F[0], F[2], F[1]], light(gro_types=UDP4))
    assert covers(out) == [[0, 2, 1]]              # F[2] held apart, joined when the flow is flushed
    out = simulate([F[0], F[2]], light(gro_types=UDP4))
    assert covers(out) == [[0], [1]] and out[1].held_apart == "dpdk_frag_not_adjacent"


def test_udp4_plain_udp_passes_and_without_udp4_fragments_pass_too():
    out = simulate([udp_frame()] + F, light(gro_types=UDP4))
    assert [(p.covers, p.reason) for p in out] == [([1, 2, 3], "dpdk_burst_end"), ([0], "dpdk_udp_not_fragment")]
    assert covers(simulate(F, light())) == [[0], [1], [2]]


def test_udp4_trims_a_fragments_padding_even_when_it_returns_it():
    out = simulate(SMALL, light(gro_types=UDP4))
    assert covers(out) == [[0, 1]] and len(out[0].data) == 34 + 24 + 24
    (p,) = simulate([SMALL[1]], light(gro_types=UDP4))
    assert len(p.data) == 34 + 24 and len(SMALL[1]) == 60
    empty = ether(ipv4_header(ip_addr("192.168.1.200"), ip_addr("192.168.1.100"), 17, 20, ip_id=3, df=False,
                              mf=True), ETH_P_IP, pad=True)
    (p,) = simulate([empty], light(gro_types=UDP4))
    assert (p.reason, len(p.data)) == ("dpdk_no_payload", 34)


@pytest.mark.parametrize("case", sorted(FRAG_CASES))
def test_udp4_model_agrees_with_librte_gro(case, dpdk_library):
    frames = FRAG_CASES[case]
    for settings in SETTINGS:
        settings = DpdkSettings(**{**settings.as_json(), "gro_types": UDP4})
        assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), settings
