"""Rules of UDP GRO, fraglist GRO and the tunnels (GRE, VXLAN, GENEVE), with
exact outcomes: segments, sizes, reasons, rebuilt headers."""

import struct

import pytest

import breadth_frames as F
from grotool import scenarios as S
from grotool.engine import Settings, simulate
from grotool.engine.csum import sum16


def run(frames, **kw):
    settings = Settings(device="veth", **kw)
    out = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, settings))
    for d in out:
        assert d.frame_len == len(d.data), "frame_len is the length of the bytes delivered"
    return out


def summary(deliveries):
    return [(d.segs, d.reason, tuple(d.indices)) for d in deliveries]


def udp_flow(n, payload=1000, **kw):
    return [S.udp_frame(sport=1000, dport=5000, payload=payload, ip_id=i, **kw) for i in range(n)]


def covered_once(frames, deliveries):
    seen = sorted(i for d in deliveries for i in d.indices)
    assert seen == list(range(len(frames)))


# -- UDP ------------------------------------------------------------------------
def test_udp_without_a_gro_path_goes_up_alone_unchanged():
    frames = udp_flow(3)
    out = run(frames)
    assert summary(out) == [(1, "udp_no_gro_path", (i,)) for i in range(3)]
    assert [d.data for d in out] == frames


@pytest.mark.parametrize("host", [{"udp_gro_forwarding": True}, {"udp_gro_sockets": (5000,)}])
def test_udp_segment_gro_builds_udp_l4_super_packet(host):
    frames = udp_flow(4) + [S.udp_frame(sport=1000, dport=5000, payload=300, ip_id=4)]
    out = run(frames, **host)
    assert summary(out) == [(5, "udp_short_last", (0, 1, 2, 3, 4))]
    d = out[0]
    assert (d.gso_size, d.gso_type, len(d.data)) == (1000, ("udp_l4",), 14 + 20 + 8 + 4300)
    ip = d.data[14:34]
    assert struct.unpack("!H", ip[2:4])[0] == 20 + 8 + 4300 and sum16(ip) == 0   # tot_len, header checksum
    udp = d.data[34:42]
    assert struct.unpack("!H", udp[4:6])[0] == 8 + 4300
    # the checksum field holds the pseudo-header seed (CHECKSUM_PARTIAL)
    seed = S._pseudo_sum(4, d.data[26:30], d.data[30:34], 17, 8 + 4300)
    seed = (seed & 0xFFFF) + (seed >> 16)
    assert struct.unpack("!H", udp[6:8])[0] == ((seed & 0xFFFF) + (seed >> 16))
    assert d.data[42:] == b"".join(f[42:] for f in frames)


def test_udp_socket_applies_to_its_port_only():
    frames = udp_flow(3) + [S.udp_frame(sport=1000, dport=6000, payload=1000, ip_id=i) for i in range(3)]
    out = run(frames, udp_gro_sockets=(5000,))
    assert summary(out) == [(1, "udp_no_gro_path", (3,)), (1, "udp_no_gro_path", (4,)),
                            (1, "udp_no_gro_path", (5,)), (3, "budget_exhausted_all", (0, 1, 2))]


def test_udp_larger_datagram_completes_and_starts_anew():
    frames = udp_flow(2) + [S.udp_frame(sport=1000, dport=5000, payload=1200, ip_id=2 + i) for i in range(2)]
    out = run(frames, udp_gro_forwarding=True)
    assert summary(out) == [(2, "udp_len_larger", (0, 1)), (2, "budget_exhausted_all", (2, 3))]


@pytest.mark.parametrize("kw,reason", [({"zero_csum": True}, "udp_zero_csum"),
                                       ({"payload": 2, "pad_to_60": True}, "ip_len_mismatch")])
def test_udp_rejections_go_up_alone(kw, reason):
    frames = udp_flow(2, **kw)
    out = run(frames, udp_gro_forwarding=True)
    assert summary(out) == [(1, reason, (0,)), (1, reason, (1,))]


def test_udp_bad_checksum_is_caught_when_verifying():
    frames = udp_flow(2, bad_udp_csum=True)
    assert summary(run(frames, udp_gro_forwarding=True, csum="verify")) == [(1, "udp_csum_bad", (0,)),
                                                                             (1, "udp_csum_bad", (1,))]


def test_udp_at_most_64_datagrams():
    frames = udp_flow(70, payload=100)
    out = run(frames, udp_gro_forwarding=True, budget=128)
    assert summary(out) == [(64, "udp_max_segs", tuple(range(64))), (6, "budget_exhausted_all", tuple(range(64, 70)))]


def test_udp_ttl_change_completes_with_its_reason():
    frames = udp_flow(2) + [S.udp_frame(sport=1000, dport=5000, payload=1000, ip_id=2, ttl=3)]
    out = run(frames, udp_gro_forwarding=True)
    assert summary(out) == [(2, "ip_ttl_changed", (0, 1)), (1, "budget_exhausted_all", (2,))]
    assert out[0].layer == ""


def test_udp_fraglist_keeps_the_first_checksum():
    frames = udp_flow(3)
    out = run(frames, rx_gro_list=True)
    d = out[0]
    assert (d.segs, d.gso_type) == (3, ("fraglist", "udp_l4"))
    assert d.data[40:42] == frames[0][40:42]                       # checksum of the first datagram
    assert struct.unpack("!H", d.data[38:40])[0] == 8 + 3000       # UDP length of the whole


def test_udp_gro_socket_under_rx_gro_list_is_not_fraglist():
    out = run(udp_flow(3), rx_gro_list=True, udp_gro_sockets=(5000,))
    assert out[0].gso_type == ("udp_l4",)


def test_flagged_datagram_under_fraglist_goes_up_alone_and_the_aggregate_stays():
    frames = F.flagged_for_fraglist()[-6:]
    out = run(frames, rx_gro_list=True, csum="verify")
    # the flagged datagram skipped verification: its checksum state differs
    assert summary(out)[0] == (1, "ip_reserved_flag", (3,))
    assert summary(out)[1] == (3, "ip_id_not_incrementing", (0, 1, 2))


# -- TCP fraglist -----------------------------------------------------------------
def tcp_flow(n, **kw):
    return [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i, **kw) for i in range(n)]


def test_tcp_fraglist_without_a_local_socket():
    frames = tcp_flow(4)
    out = run(frames, rx_gro_list=True)
    d = out[0]
    assert (d.segs, d.gso_type) == (4, ("fraglist", "tcpv4"))
    assert d.data[50:52] == frames[0][50:52]                       # the first segment's checksum
    assert struct.unpack("!H", d.data[16:18])[0] == 20 + 20 + 4000


@pytest.mark.parametrize("local", ["192.168.1.100:8000", "192.168.1.200:1500>192.168.1.100:8000"])
def test_tcp_with_a_local_socket_uses_normal_gro(local):
    out = run(tcp_flow(4), rx_gro_list=True, local_tcp=(local,))
    assert out[0].gso_type == ("tcpv4",)


def test_tcp_local_socket_ipv6_brackets():
    frames = [S.tcp_frame(family=6, seq=1000 + i * 1000, payload=1000) for i in range(3)]
    out = run(frames, rx_gro_list=True, local_tcp=("[fdaa::2]:1500>[fdaa::1]:8000",))
    assert out[0].gso_type == ("tcpv6",)
    assert run(frames, rx_gro_list=True)[0].gso_type == ("fraglist", "tcpv6")


def test_tcp_fraglist_push_is_a_mismatch_and_goes_up_alone():
    frames = tcp_flow(3) + [S.tcp_frame(seq=4000, payload=1000, ip_id=3, flags="PA")]
    out = run(frames, rx_gro_list=True)
    assert summary(out) == [(3, "tcp_flist_mismatch", (0, 1, 2)), (1, "tcp_push", (3,))]


def test_tcp_fraglist_at_most_64_segments():
    frames = [S.tcp_frame(seq=1000 + i * 100, payload=100, ip_id=i) for i in range(70)]
    out = run(frames, rx_gro_list=True, budget=128)
    assert summary(out) == [(64, "tcp_flist_mismatch", tuple(range(64))),
                            (6, "budget_exhausted_all", tuple(range(64, 70)))]


# -- GRE -------------------------------------------------------------------------
def gre_flow(n, **kw):
    return [S.gre_frame(S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i)[14:], ip_id=i, **kw)
            for i in range(n)]


def test_gre_merges_inner_tcp():
    frames = gre_flow(3, key=7)
    out = run(frames)
    d = out[0]
    assert (d.segs, d.gso_type, d.gso_size) == (3, ("gre", "tcpv4"), 1000)
    outer, inner = d.data[14:34], d.data[14 + 20 + 8:14 + 20 + 8 + 20]
    assert struct.unpack("!H", outer[2:4])[0] == 20 + 8 + 20 + 20 + 3000 and sum16(outer) == 0
    assert struct.unpack("!H", inner[2:4])[0] == 20 + 20 + 3000 and sum16(inner) == 0


def test_gre_keys_separate_flows():
    frames = [gre_flow(1, key=k)[0] for k in (1, 2)]
    assert summary(run(frames)) == [(1, "budget_exhausted_all", (0,)), (1, "budget_exhausted_all", (1,))]


def test_gre_sequence_numbers_are_unsupported():
    assert [d.reason for d in run(gre_flow(2, seq=5))] == ["gre_unsupported"] * 2


def test_gre_bad_checksum():
    frames = gre_flow(2, checksum=True)
    frames[1] = gre_flow(2, checksum=True, bad_gre_csum=True)[1]
    assert summary(run(frames, csum="verify")) == [(1, "gre_csum_bad", (1,)), (1, "budget_exhausted_all", (0,))]


def test_gre_inside_vxlan_is_a_nested_tunnel():
    inner = gre_flow(1)[0]
    frames = [S.vxlan_frame(inner, ip_id=i) for i in range(2)]
    assert [d.reason for d in run(frames, vxlan_ports=(4789,))] == ["tunnel_nested"] * 2


# -- VXLAN -----------------------------------------------------------------------
def vxlan_flow(n, zero_csum=True, **kw):
    return [S.vxlan_frame(S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i), ip_id=i,
                          zero_csum=zero_csum, **kw) for i in range(n)]


def test_vxlan_needs_its_port():
    assert [d.reason for d in run(vxlan_flow(2))] == ["udp_no_gro_path"] * 2
    assert [d.reason for d in run(vxlan_flow(2), vxlan_ports=(4790,))] == ["udp_no_gro_path"] * 2


@pytest.mark.parametrize("zero,gso", [(True, "udp_tunnel"), (False, "udp_tunnel_csum")])
def test_vxlan_merges_inner_tcp(zero, gso):
    frames = vxlan_flow(3, zero_csum=zero)
    d = run(frames, vxlan_ports=(4789,))[0]
    assert (d.segs, d.gso_type) == (3, (gso, "tcpv4"))
    udp_len = struct.unpack("!H", d.data[38:40])[0]
    assert udp_len == len(d.data) - 34
    inner_ip = d.data[14 + 20 + 8 + 8 + 14:][:20]
    assert struct.unpack("!H", inner_ip[2:4])[0] == 40 + 3000 and sum16(inner_ip) == 0


def test_vxlan_ttl_changes_name_the_header():
    frames = vxlan_flow(2) + [S.vxlan_frame(S.tcp_frame(seq=3000, payload=1000, ip_id=2, ttl=3), ip_id=2)]
    out = run(frames, vxlan_ports=(4789,))
    assert (out[0].reason, out[0].layer) == ("ip_ttl_changed", "inner")
    frames = vxlan_flow(2) + [S.vxlan_frame(S.tcp_frame(seq=3000, payload=1000, ip_id=2), ip_id=2, ttl=3)]
    out = run(frames, vxlan_ports=(4789,))
    assert (out[0].reason, out[0].layer) == ("ip_ttl_changed", "outer")


def test_vxlan_vni_separates_flows():
    frames = [S.vxlan_frame(S.tcp_frame(seq=1000, payload=1000), vni=v) for v in (1, 2)]
    assert [d.segs for d in run(frames, vxlan_ports=(4789,))] == [1, 1]


def test_vxlan_outer_checksum_bad_when_verifying():
    frames = vxlan_flow(2, zero_csum=False)
    b = bytearray(frames[1])
    b[40] ^= 1
    frames[1] = bytes(b)
    assert summary(run(frames, vxlan_ports=(4789,), csum="verify")) == [(1, "udp_csum_bad", (1,)),
                                                                         (1, "budget_exhausted_all", (0,))]


# -- GENEVE ----------------------------------------------------------------------
def geneve_flow(n, **kw):
    return [S.geneve_frame(S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i), ip_id=i, **kw)
            for i in range(n)]


def test_geneve_with_options_merges():
    frames = geneve_flow(3, options=b"\x01\x02\x03\x01abcd")
    d = run(frames, geneve_ports=(6081,))[0]
    assert (d.segs, d.gso_type) == (3, ("udp_tunnel", "tcpv4"))


def test_geneve_options_differ_separate_flows():
    frames = [geneve_flow(1, options=o)[0] for o in (b"\x01\x02\x03\x01abcd", b"\x01\x02\x03\x01abce")]
    assert [d.segs for d in run(frames, geneve_ports=(6081,))] == [1, 1]


@pytest.mark.parametrize("kw", [{"oam": True}, {"version": 1}])
def test_geneve_oam_or_version_is_refused(kw):
    assert [d.reason for d in run(geneve_flow(2, **kw), geneve_ports=(6081,))] == ["tunnel_hdr_bad"] * 2


# -- layers ----------------------------------------------------------------------
def test_recursion_limit_with_stacked_vlan_tags():
    frames = [S.tcp_frame(seq=1000 + i * 1000, payload=1000, vlan=[5] * 14) for i in range(2)]
    assert [d.reason for d in run(frames)] == ["recursion_limit"] * 2
    frames = [S.tcp_frame(seq=1000 + i * 1000, payload=1000, vlan=[5] * 13) for i in range(2)]
    assert [d.segs for d in run(frames)] == [2]


@pytest.mark.parametrize("build,host", [(F.udp_mixed, {"udp_gro_forwarding": True}),
                                        (F.tcp_for_fraglist, {"rx_gro_list": True}),
                                        (F.gre_mixed, {}), (F.vxlan_mixed, {"vxlan_ports": (4789,)})])
def test_every_frame_delivered_once_and_payload_conserved(build, host):
    frames = build()
    out = run(frames, **host)
    covered_once(frames, out)
    assert sum(len(d.data) for d in out) <= sum(len(f) for f in frames)


# -- skb layout ------------------------------------------------------------------
LAYOUT_SHAPES = {          # 20 segments of 1000 bytes: (page frags, skbs on frag_list)
    "frags": (20, 1),                 # the 18th segment overflows MAX_SKB_FRAGS (17)
    "header-split": (20, 1),
    "linear-pagefrag": (18, 1),       # head-frag path: one fragment per merged head
    "linear-kmalloc": (0, 19),        # every merged segment chained
    "mlx5-copy256": (20, 19),         # 256 copied bytes > headers: kmalloc'd head, frag_list
}


@pytest.mark.parametrize("layout", sorted(LAYOUT_SHAPES))
def test_layout_changes_shape_never_decisions(layout):
    frames = [S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i) for i in range(20)] + F.udp_mixed()
    base = run(frames, udp_gro_forwarding=True)
    out = run(frames, udp_gro_forwarding=True, layout=layout)
    assert [(d.data, d.indices, d.reason) for d in out] == [(d.data, d.indices, d.reason) for d in base]
    tcp = next(d for d in out if d.indices[0] == 0)
    shape = tcp.shape(layout)
    assert (tcp.segs, shape.frags, shape.frag_list, shape.slow_pulls) == (20, *LAYOUT_SHAPES[layout], 0)


def test_fraglist_chains_every_segment_whatever_the_layout():
    out = run(tcp_flow(5), rx_gro_list=True)
    shape = out[0].shape("frags")
    assert (shape.frags, shape.frag_list) == (5, 4)


def test_layout_closed_form_equals_the_segment_by_segment_model():
    import random

    from grotool.engine import layout

    rng = random.Random(1)
    for _ in range(2000):
        max_frags = rng.choice([1, 2, 5, 17, 45])
        hlen = rng.choice([54, 66, 78])
        first = hlen + rng.randint(1, 1448)
        merged = tuple(rng.randint(1, 1448) for _ in range(rng.randint(0, 70)))
        fast = layout.shape("frags", max_frags, 14, hlen - 14, first, merged, False, hlen)
        slow = layout.shape_of("frags", max_frags, 14, hlen - 14, first, [hlen + m for m in merged], False)
        assert (fast.frags, fast.frag_list, fast.truesize) == (slow.frags, slow.frag_list, slow.truesize)


@pytest.mark.parametrize("build", [F.udp_mixed, F.tcp_for_fraglist, F.gre_mixed, F.vxlan_mixed,
                                   F.flagged_for_fraglist])
@pytest.mark.parametrize("host", [{}, {"udp_gro_forwarding": True, "vxlan_ports": (4789,)},
                                  {"rx_gro_list": True, "vxlan_ports": (4789,)}])
def test_gso_splits_every_super_packet_back_into_its_input(tmp_path, build, host):
    """replay --verify: an independent GSO (grotool/gso) splits each delivered
    packet again and must give back the frames it covers."""
    from grotool.io.capture import PcapWriter
    from grotool.replay import replay

    path = str(tmp_path / "in.pcap")
    with PcapWriter(path) as w:
        for i, f in enumerate(build()):
            w.write(i * 1000, f)
    result = replay(path, None, Settings(device="veth", **host), verify=True)
    assert result.verify.ok, result.verify.message


def test_udp_without_gro_path_delivers_its_flow_identity():
    # nothing is compared, but the socket lookup read the port pair: each datagram
    # goes up alone carrying its 5-tuple identity, so statistics name a flow once
    frames = udp_flow(2) + [S.udp_frame(sport=1000, dport=5001, payload=1000, ip_id=9)]
    deliveries = list(simulate(((i * 1000, f, -1) for i, f in enumerate(frames)), 1, Settings(device="veth")))
    assert [d.reason for d in deliveries] == ["udp_no_gro_path"] * 3
    assert [d.segs for d in deliveries] == [1, 1, 1]
    first, second, other_port = deliveries
    assert first.key and first.key == second.key and other_port.key != first.key
    assert first.key.endswith(struct.pack("!HH", 1000, 5000))
    assert other_port.key.endswith(struct.pack("!HH", 1000, 5001))
    assert [d.payload for d in deliveries] == [1000, 1000, 1000]
