"""grotool kernel with host options: what the real kernel (6.18 on these
machines) does with UDP, TCP fraglist, GRE and VXLAN once the namespace holds
what the options describe (ethtool features, UDP_GRO sockets, VXLAN devices,
local established TCP connections).

The exact numbers are the kernel's, observed with these crafted captures; the
simulation is checked against the same captures in the differential tests.
The unmarked tests at the top need no privileges.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_support as ks
import tunnel_frames as tf
from grotool.oracle import frames as fr
from grotool.oracle import netns
from grotool.oracle.hoststate import Endpoint, HostState, LocalTcp, flows_to_local, parse_endpoint, parse_local_tcp
from grotool.oracle.kernel import KernelSession, _delivered, tcp_flows

ROOT = Path(__file__).resolve().parent.parent
needs_kernel = ks.needs_kernel


def shape(packets, vxlan_ports=()):
    """(gso_segs, L4 payload of the innermost flow, gso_size, gso_type, csum) per packet."""
    return [(p.gso_segs, fr.parse(p.data, vxlan_ports=vxlan_ports).payload, p.gso_size, p.gso_type, p.csum) for p in packets]


def ip4_csum_ok(frame: bytes, off: int = 14) -> bool:
    ihl = (frame[off] & 0x0F) * 4
    return ks.csum(frame[off:off + ihl]) == 0


def expected_super(frames, l4check: str):
    """A super-packet of plain IPv4/IPv6 TCP/UDP frames as the kernel delivers it:
    the first frame's headers with the lengths (and IPv4 header checksum)
    rewritten, every payload in order; the L4 checksum is the pseudo-header seed
    (normal GRO) or the first frame's (fraglist)."""
    first = frames[0]
    v4 = first[12:14] == b"\x08\x00"
    l3 = 14
    proto = first[l3 + 9] if v4 else first[l3 + 6]
    l4 = l3 + ((first[l3] & 0x0F) * 4 if v4 else 40)
    hlen = l4 + (8 if proto == 17 else (first[l4 + 12] >> 4) * 4)
    body = b"".join(f[hlen:] for f in frames)
    head = bytearray(first[:hlen])
    l4len = hlen - l4 + len(body)
    if v4:
        struct.pack_into("!H", head, l3 + 2, hlen - l3 + len(body))
        struct.pack_into("!H", head, l3 + 10, 0)
        struct.pack_into("!H", head, l3 + 10, ks.csum(bytes(head[l3:l4])))
        src, dst = bytes(head[l3 + 12:l3 + 16]), bytes(head[l3 + 16:l3 + 20])
    else:
        struct.pack_into("!H", head, l3 + 4, l4len)
        src, dst = bytes(head[l3 + 8:l3 + 24]), bytes(head[l3 + 24:l3 + 40])
    check_at = l4 + (6 if proto == 17 else 16)
    if proto == 17:
        struct.pack_into("!H", head, l4 + 4, l4len)
    if l4check == "seed":
        struct.pack_into("!H", head, check_at, ks.seed_value(src, dst, proto, l4len))
    return bytes(head) + body


def vxlan_merged(frames):
    """IPv4-outer VXLAN frames merged as GRO does: the first frame's headers, outer IP,
    outer UDP and inner IP lengths rewritten, the inner payloads in order."""
    p = fr.parse(frames[0], vxlan_ports=(4789,))
    merged = bytearray(frames[0][:p.payload_off] + b"".join(f[p.payload_off:] for f in frames))
    struct.pack_into("!H", merged, 16, len(merged) - 14)
    struct.pack_into("!H", merged, 38, len(merged) - 34)
    struct.pack_into("!H", merged, p.l3 + 2, len(merged) - p.l3)
    return bytes(merged)


# =============================================================================
# No privileges needed
# =============================================================================
def test_endpoint_and_local_tcp_parsing():
    assert parse_endpoint("10.0.0.2:5201") == Endpoint("10.0.0.2", 5201)
    assert parse_endpoint("[FD00::0002]:5201") == Endpoint("fd00::2", 5201)
    assert str(parse_endpoint("[fd00::2]:80")) == "[fd00::2]:80"
    assert parse_local_tcp("10.0.0.1:40000>10.0.0.2:5201") == \
        LocalTcp(Endpoint("10.0.0.2", 5201), Endpoint("10.0.0.1", 40000))
    assert parse_local_tcp("[fd00::1]:40000>[fd00::2]:5201").src == Endpoint("fd00::1", 40000)
    assert parse_local_tcp("10.0.0.2:5201") == LocalTcp(Endpoint("10.0.0.2", 5201))
    for bad, why in [("10.0.0.2", "not ADDRESS:PORT"), ("fd00::2:5201", "not ADDRESS:PORT"),
                     ("[10.0.0.2]:1", "brackets are for IPv6"), ("10.0.0.2:0", "outside 1..65535"),
                     ("10.0.0.2:x", "not a port"), ("0.0.0.0:80", "cannot be the address"),
                     ("10.0.0.1:1>[fd00::2]:2", "must be IPv4 or both IPv6"),
                     ("10.0.0.1:1>10.0.0.1:1", "two different"),
                     ("bogus:80", "not an IP address")]:
        with pytest.raises(ValueError, match=why):
            parse_local_tcp(bad)


def test_host_state_build_and_legacy_udp_gro():
    assert HostState.build() == HostState()
    h = HostState.build(udp_gro_sockets=["443", 443, 53], vxlan_ports=[4789], local_tcp=["10.0.0.2:80", "10.0.0.2:80"])
    assert h.udp_gro_sockets == (53, 443) and h.vxlan_ports == (4789,) and len(h.local_tcp) == 1
    assert HostState.build(udp_gro="forward") == HostState(udp_gro_forwarding=True)
    assert HostState.build(udp_gro="fraglist") == HostState(rx_gro_list=True)
    assert HostState.build(udp_gro="fraglist").legacy_udp_gro == "fraglist"
    with pytest.raises(ValueError, match="both a VXLAN and a GENEVE"):
        HostState.build(vxlan_ports=[6081], geneve_ports=[6081])
    with pytest.raises(ValueError, match="both a --udp-gro-socket and a tunnel port"):
        HostState.build(vxlan_ports=[4789], udp_gro_sockets=[4789])
    assert h.to_json() == {"udp_gro_forwarding": False, "rx_gro_list": False, "udp_gro_sockets": [53, 443],
                           "vxlan_ports": [4789], "geneve_ports": [], "local_tcp": ["10.0.0.2:80"],
                           "gro_max_size": None, "gro_ipv4_max_size": None}


def test_host_state_gro_sizes():
    """The receiving veth's gro_max_size/gro_ipv4_max_size: None leaves the device's;
    bounded by GRO_MAX_SIZE; kept when the deprecated --udp-gro is folded in."""
    h = HostState.build(gro_max_size="185000", gro_ipv4_max_size=16000)
    assert (h.gro_max_size, h.gro_ipv4_max_size, h.sets_gro_sizes) == (185000, 16000, True)
    assert not HostState.build().sets_gro_sizes
    assert h.to_json()["gro_max_size"] == 185000 and h.to_json()["gro_ipv4_max_size"] == 16000
    for name in ("gro_max_size", "gro_ipv4_max_size"):
        with pytest.raises(ValueError, match=f"{name} must be 0..524280"):
            HostState.build(**{name: 524281})
    folded = h.with_legacy_udp_gro("fraglist")
    assert (folded.rx_gro_list, folded.gro_max_size, folded.gro_ipv4_max_size) == (True, 185000, 16000)
    assert h.with_legacy_udp_gro("off") is h


def test_port_form_takes_every_flow_to_that_port_in_the_capture():
    a = tf.tcp_flow(2, src="10.0.0.1", dst="10.0.0.2", sport=40000, dport=5201)
    b = tf.tcp_flow(2, src="10.0.0.3", dst="10.0.0.2", sport=40001, dport=5201)
    other = tf.tcp_flow(2, src="10.0.0.1", dst="10.0.0.2", sport=40002, dport=80)
    v6 = tf.tcp_flow(1, src="fd00::1", dst="fd00::2", sport=40000, dport=5201)
    flows = tcp_flows(a + b + other + v6 + tf.udp_flow(2))
    assert len(flows) == 4
    specs = [parse_local_tcp("10.0.0.2:5201"), parse_local_tcp("[fd00::1]:1>[fd00::2]:2")]
    assert [f"{s}>{d}" for s, d in flows_to_local(specs, flows)] == [
        "[fd00::1]:1>[fd00::2]:2", "10.0.0.1:40000>10.0.0.2:5201", "10.0.0.3:40001>10.0.0.2:5201"]
    # through VXLAN the inner flow counts, and only where a VXLAN device takes the port
    vx = tf.vxlan_tcp_flow(1)
    assert tcp_flows(vx) == []
    assert tcp_flows(vx, (4789,)) == [(Endpoint("10.1.0.1", 33000), Endpoint("10.1.0.2", 5201))]


def test_parse_and_map_through_vxlan_only_on_its_port():
    frames = tf.vxlan_tcp_flow(3)
    assert fr.parse(frames[0]).dport == 4789
    p = fr.parse(frames[0], vxlan_ports=(4789,))
    assert (p.proto, p.sport, p.dport, p.payload, p.seq) == (6, 33000, 5201, 1400, 1000)
    assert p.outer == ((bytes([192, 168, 50, 1]), bytes([192, 168, 50, 2]), 17),)
    assert fr.parse(frames[0], vxlan_ports=(8472,)).dport == 4789
    merged = vxlan_merged(frames)
    assert fr.map_batch(frames, [(merged, 3, True)], vxlan_ports=(4789,)) == [[0, 1, 2]]
    assert fr.map_batch(frames, [(merged, 3, True)]) == [[]]


def test_vnet_header_decoding_fraglist_and_tunnel_segments():
    frames = tf.vxlan_tcp_flow(4)
    merged = vxlan_merged(frames)
    # normal GRO through VXLAN: NEEDS_CSUM, csum_start at the inner TCP header (84), the
    # inner TCP checksum the pseudo-header seed of the whole inner segment
    seeded = bytearray(merged)
    p = fr.parse(merged, vxlan_ports=(4789,))
    struct.pack_into("!H", seeded, p.check_at, ks.seed_value(p.src, p.dst, 6, len(merged) - p.l4))
    pkt = _delivered(bytes(seeded), (1, 1, 1504, 1400, 84, 16), 0, 0, (4789,))
    assert (pkt.gso_type, pkt.gso_segs, pkt.csum, pkt.fraglist) == (["tcpv4"], 4, "partial", False)
    # the same under --csum trust in fraglist: PARTIAL, but the first segment's checksum
    assert _delivered(merged, (1, 1, 1504, 1400, 84, 16), 0, 0, (4789,)).fraglist is True
    # fraglist: DATA_VALID, no csum_start; the segments come from the parsed inner payload
    pkt = _delivered(merged, (2, 1, 1504, 1400, 0, 0), 0, 0, (4789,))
    assert (pkt.gso_segs, pkt.csum, pkt.fraglist) == (4, "valid", True)
    assert _delivered(frames[0], (2, 0, 0, 0, 0, 0), 0).fraglist is False


def test_vxlan_without_the_i_flag_is_mapped_through_its_inner_flow():
    # vxlan_gro_receive merges such frames (the flag is compared, never required): the oracle
    # must follow them to the inner TCP to map the aggregate and count its segments
    frames = tf.vxlan_tcp_flow(4, vxlan_flags=0x00)
    assert frames[0][42:50] == bytes.fromhex("0000000000002a00")
    p = fr.parse(frames[0], vxlan_ports=(4789,))
    assert (p.proto, p.sport, p.dport, p.seq, p.payload, p.l4) == (6, 33000, 5201, 1000, 1400, 84)
    assert p.tunnels == (("vxlan", 42, 49152, 4789, ()),)
    merged = vxlan_merged(frames)
    assert len(merged) == len(frames[0]) + 3 * 1400
    assert fr.map_batch(frames, [(merged, 4, True)], vxlan_ports=(4789,)) == [[0, 1, 2, 3]]
    # normal GRO: the inner TCP checksum is the seed, so not fraglist
    seeded = bytearray(merged)
    struct.pack_into("!H", seeded, p.check_at, ks.seed_value(p.src, p.dst, 6, len(merged) - p.l4))
    pkt = _delivered(bytes(seeded), (1, 1, 1504, 1400, 84, 16), 0, 0, (4789,))
    assert (pkt.gso_type, pkt.gso_segs, pkt.csum, pkt.fraglist) == (["tcpv4"], 4, "partial", False)
    # fraglist: the segment count comes from the parsed inner payload (5600 / 1400), not the outer UDP's
    pkt = _delivered(merged, (2, 1, 1504, 1400, 0, 0), 0, 0, (4789,))
    assert (pkt.gso_segs, pkt.csum, pkt.fraglist) == (4, "valid", True)
    # two runs of the same inner flow, one without the I flag and one with it: GRO keeps them
    # apart (different flags words); each aggregate maps to its own frames
    flagged = tf.vxlan_tcp_flow(8)[4:]
    both = frames + flagged
    assert fr.map_batch(both, [(merged, 4, True), (vxlan_merged(flagged), 4, True)], vxlan_ports=(4789,)) == \
        [[0, 1, 2, 3], [4, 5, 6, 7]]
    # the same segments sent both ways, interleaved: only the VXLAN header tells the copies
    # apart, and the aggregate of the flagged copies, delivered first, maps to them alone
    same = tf.vxlan_tcp_flow(4)
    interleaved = [x for pair in zip(frames, same) for x in pair]
    assert fr.map_batch(interleaved, [(vxlan_merged(same), 4, True), (merged, 4, True)], vxlan_ports=(4789,)) == \
        [[1, 3, 5, 7], [0, 2, 4, 6]]


def test_host_hint_names_the_options_the_traffic_calls_for():
    from grotool.oracle.kernel import host_hint

    plain = HostState()
    assert host_hint(ks.tcp_flow(5), plain) is None
    assert host_hint(tf.udp_flow(1) + tf.udp_flow(2, dport=5300, size=100)[:1], plain) is None   # no equal sizes
    assert host_hint(tf.udp_flow(3) + tf.udp_flow(2, dport=443), plain) == (
        "this capture has UDP flows of equal-size datagrams to port 443, 5202 "
        "(--udp-gro-socket PORT, --udp-gro-forwarding or --rx-gro-list)")
    assert host_hint(tf.udp_flow(3), HostState.build(udp_gro_sockets=[5202])) is None
    assert host_hint(tf.udp_flow(3), HostState.build(udp_gro_forwarding=True)) is None
    assert host_hint(tf.vxlan_tcp_flow(3), plain) == \
        "this capture has UDP to port 4789 (VXLAN: --vxlan-port 4789)"
    assert host_hint(tf.vxlan_tcp_flow(3), HostState.build(vxlan_ports=[4789])) is None
    assert host_hint(tf.udp_flow(2, dport=6081), plain) == \
        "this capture has UDP to port 6081 (GENEVE: --geneve-port 6081)"
    # issue 32: VXLAN on Linux's old default port (flannel) names that port
    assert host_hint(tf.vxlan_tcp_flow(3, dport=8472), plain) == \
        "this capture has UDP to port 8472 (VXLAN: --vxlan-port 8472)"
    assert host_hint(tf.vxlan_tcp_flow(3, dport=8472), HostState.build(vxlan_ports=[8472])) is None
    assert host_hint(tf.udp_flow(3, dport=8472), plain) == (
        "this capture has UDP flows of equal-size datagrams to port 8472 "
        "(--udp-gro-socket PORT, --udp-gro-forwarding or --rx-gro-list)")
    assert "--local-tcp" in host_hint(ks.tcp_flow(5), HostState.build(rx_gro_list=True))
    assert host_hint(ks.tcp_flow(5), HostState.build(rx_gro_list=True, local_tcp=["10.0.0.2:5201"])) is None


def test_bad_local_tcp_is_a_usage_error():
    from click.testing import CliRunner

    from grotool.cli import main

    result = CliRunner().invoke(main, ["kernel", "--local-tcp", "10.0.0.2", "in.pcap", "out.pcap"])
    assert result.exit_code == 2 and "is not ADDRESS:PORT" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["kernel", "--vxlan-port", "6081", "--geneve-port", "6081", "x", "y"])
    assert result.exit_code == 2 and "both a VXLAN and a GENEVE port" in result.output


# =============================================================================
# The real kernel: UDP
# =============================================================================
@needs_kernel
def test_udp_plain_host_merges_nothing():
    with KernelSession() as s:
        for family in (4, 6):
            frames = tf.udp_flow(20, family=family)
            run = s.replay(frames)
            assert run.reliable
            assert [p.data for p in run.packets] == frames
            assert {(p.gso_segs, p.csum) for p in run.packets} == {(1, "valid")}


@needs_kernel
def test_udp_gro_forwarding():
    with KernelSession(host=HostState.build(udp_gro_forwarding=True)) as s:
        assert s.ns.settings()["rx_features"]["rx-udp-gro-forwarding"] == "on"
        for family in (4, 6):
            frames = tf.udp_flow(20, family=family)
            run = s.replay(frames)
            assert shape(run.packets) == [(20, 20000, 1000, ["udp_l4"], "partial")]
            pkt = run.packets[0]
            assert pkt.data == expected_super(frames, "seed") and not pkt.fraglist
            assert pkt.vnet["csum_start"] == (34 if family == 4 else 54) and pkt.vnet["csum_offset"] == 6
            assert pkt.covers == list(range(20))
        # a shorter last datagram is merged and closes; a larger one starts anew
        assert shape(s.replay(tf.udp_flow(5, last=600)).packets) == [(5, 4600, 1000, ["udp_l4"], "partial")]
        larger = tf.udp_flow(2) + [tf.udp_flow(3, size=1200)[2], tf.udp_flow(4)[3]]
        assert shape(s.replay(larger).packets) == [(2, 2000, 1000, ["udp_l4"], "partial"),
                                                   (2, 2200, 1200, ["udp_l4"], "partial")]
        # at most 64 datagrams; a zero checksum is never merged
        assert [p.gso_segs for p in s.replay(tf.udp_flow(70, size=500)).packets] == [64, 6]
        zero = [ks.udp(1000, salt=i, ip_id=i, check="zero") for i in range(4)]
        assert [p.data for p in s.replay(zero).packets] == zero


@needs_kernel
def test_udp_gro_socket_merges_only_its_port():
    host = HostState.build(udp_gro_sockets=[5202])
    with KernelSession(host=host) as s:
        realised = s.ns.settings()["host_realised"]["udp_gro_sockets"]
        assert realised == [{"family": 4, "local": "0.0.0.0:5202"}, {"family": 6, "local": ":::5202"}]
        for family in (4, 6):
            frames = tf.udp_flow(5, family=family)
            run = s.replay(frames)
            assert shape(run.packets) == [(5, 5000, 1000, ["udp_l4"], "partial")]
            assert run.packets[0].data == expected_super(frames, "seed")
        other = tf.udp_flow(5, dport=5203)
        assert [p.data for p in s.replay(other).packets] == other
    # with rx-gro-list too: the socket's port gets normal UDP GRO, other ports fraglist
    with KernelSession(host=HostState.build(udp_gro_sockets=[5202], rx_gro_list=True)) as s:
        assert shape(s.replay(tf.udp_flow(5)).packets) == [(5, 5000, 1000, ["udp_l4"], "partial")]
        run = s.replay(tf.udp_flow(5, dport=5203))
        assert shape(run.packets) == [(5, 5000, 1000, ["udp_l4"], "valid")] and run.packets[0].fraglist


@needs_kernel
def test_udp_fraglist():
    with KernelSession(host=HostState.build(rx_gro_list=True)) as s:
        assert s.ns.settings()["rx_features"]["rx-gro-list"] == "on"
        for family in (4, 6):
            frames = tf.udp_flow(20, family=family)
            run = s.replay(frames)
            assert shape(run.packets) == [(20, 20000, 1000, ["udp_l4"], "valid")]
            pkt = run.packets[0]
            # lengths rewritten, the first datagram's checksum left, no csum_start
            assert pkt.data == expected_super(frames, "first") and pkt.fraglist
            assert pkt.vnet == {"flags": 2, "gso_type": 5, "hdr_len": 1042 if family == 4 else 1062,
                                "gso_size": 1000, "csum_start": 0, "csum_offset": 0}
        assert shape(s.replay(tf.udp_flow(5, last=600)).packets) == [(5, 4600, 1000, ["udp_l4"], "valid")]
        assert [p.gso_segs for p in s.replay(tf.udp_flow(70, size=500)).packets] == [64, 6]


# =============================================================================
# The real kernel: TCP fraglist and local sockets
# =============================================================================
FLOW_A = dict(src="10.0.0.1", dst="10.0.0.2", sport=40000, dport=5201)
FLOW_B = dict(src="10.0.0.3", dst="10.0.0.2", sport=40001, dport=5201)
FLOW_6 = dict(src="fd00::1", dst="fd00::2", sport=40000, dport=5201)


@needs_kernel
def test_tcp_fraglist_without_a_local_socket():
    with KernelSession(host=HostState.build(rx_gro_list=True)) as s:
        for flow, gso in ((FLOW_A, "tcpv4"), (FLOW_6, "tcpv6")):
            frames = tf.tcp_flow(20, **flow)
            run = s.replay(frames)
            assert shape(run.packets) == [(20, 28960, 1448, [gso], "valid")]
            assert run.packets[0].fraglist and run.packets[0].data == expected_super(frames, "first")
        # any flag difference blocks a fraglist merge: the PSH segment goes up alone
        psh = ks.tcp_flow(20, flags_at=[(9, ks.ACK | ks.PSH)])
        assert [(p.gso_segs, p.csum) for p in s.replay(psh).packets] == [(9, "valid"), (1, "valid"), (10, "valid")]
        assert [p.gso_segs for p in s.replay(tf.tcp_flow(70, mss=500, **FLOW_A)).packets] == [64, 6]
        # injected as CHECKSUM_PARTIAL (--csum trust), a fraglist packet stays PARTIAL: its TCP
        # checksum is still the first segment's, not the seed normal GRO writes
        frames = tf.tcp_flow(10, **FLOW_A)
        run = s.replay(frames, csum="trust")
        assert [(p.gso_segs, p.csum, p.fraglist) for p in run.packets] == [(10, "partial", True)]
        assert run.packets[0].data == expected_super(frames, "first")
        assert (run.packets[0].vnet["csum_start"], run.packets[0].vnet["csum_offset"]) == (34, 16)


@needs_kernel
def test_tcp_local_socket_means_normal_gro():
    a, b = tf.tcp_flow(10, **FLOW_A), tf.tcp_flow(10, **FLOW_B)
    mixed = [x for pair in zip(a, b) for x in pair]
    host = HostState.build(rx_gro_list=True, local_tcp=["10.0.0.1:40000>10.0.0.2:5201",
                                                        "[fd00::1]:40000>[fd00::2]:5201"])
    with KernelSession(host=host) as s:
        run = s.replay(mixed)
        assert shape(run.packets) == [(10, 14480, 1448, ["tcpv4"], "partial"), (10, 14480, 1448, ["tcpv4"], "valid")]
        assert run.packets[0].data == expected_super(a, "seed") and run.packets[0].covers == list(range(0, 20, 2))
        assert run.packets[1].data == expected_super(b, "first") and run.packets[1].fraglist
        six = tf.tcp_flow(20, **FLOW_6)
        run = s.replay(six)
        assert shape(run.packets) == [(20, 28960, 1448, ["tcpv6"], "partial")]
        assert run.packets[0].data == expected_super(six, "seed")
        # normal GRO rules again: a PSH segment is merged and closes
        psh = tf.tcp_flow(20, flags_at={9: "PA"}, **FLOW_A)
        assert [(p.gso_segs, p.csum) for p in s.replay(psh).packets] == [(10, "partial"), (10, "partial")]
        run = s.replay(a, csum="trust")
        assert [(p.gso_segs, p.csum, p.fraglist) for p in run.packets] == [(10, "partial", False)]
        assert run.packets[0].data == expected_super(a, "seed")
        realised = s.ns.settings()["host_realised"]
        assert realised["local_tcp_flows"] == ["10.0.0.1:40000>10.0.0.2:5201", "[fd00::1]:40000>[fd00::2]:5201"]
        assert realised["loopback_addresses"] == ["10.0.0.1", "10.0.0.2", "fd00::1", "fd00::2"]


@needs_kernel
def test_tcp_local_port_form_covers_every_flow_to_it():
    a, b = tf.tcp_flow(10, **FLOW_A), tf.tcp_flow(10, **FLOW_B)
    other = tf.tcp_flow(10, src="10.0.0.1", dst="10.0.0.2", sport=40002, dport=80)
    with KernelSession(host=HostState.build(rx_gro_list=True, local_tcp=["10.0.0.2:5201", "[fd00::2]:5201"])) as s:
        run = s.replay([x for trio in zip(a, b, other) for x in trio] + tf.tcp_flow(20, **FLOW_6))
        assert shape(run.packets) == [(10, 14480, 1448, ["tcpv4"], "partial"), (10, 14480, 1448, ["tcpv4"], "partial"),
                                      (10, 14480, 1448, ["tcpv4"], "valid"), (20, 28960, 1448, ["tcpv6"], "partial")]
        assert s.ns.settings()["host_realised"]["local_tcp_flows"] == [
            "10.0.0.1:40000>10.0.0.2:5201", "10.0.0.3:40001>10.0.0.2:5201", "[fd00::1]:40000>[fd00::2]:5201"]
        # only the direction into B:P is local: the reverse direction is still forwarded (fraglist)
        reverse = tf.tcp_flow(10, src="10.0.0.2", dst="10.0.0.1", sport=5201, dport=40000)
        assert [(p.gso_segs, p.csum) for p in s.replay(a + reverse).packets] == [(10, "partial"), (10, "valid")]
        established = s.ns.ns_exec("ss", "-Htan").stdout.split("\n")
        assert sorted(line.split()[3:5] for line in established if line.strip()) == [
            ["10.0.0.2:5201", "10.0.0.1:40000"], ["10.0.0.2:5201", "10.0.0.3:40001"],
            ["[fd00::2]:5201", "[fd00::1]:40000"]]


# =============================================================================
# The real kernel: GRE and VXLAN
# =============================================================================
@needs_kernel
def test_gre_needs_no_host_option():
    cases = [(4, None, False, 58), (4, 7, False, 62), (4, None, True, 62), (4, 7, True, 66),
             (6, None, False, 78), (6, 9, False, 82), (6, 9, True, 86)]
    with KernelSession() as s:
        for family, key, csum, l4 in cases:
            frames = tf.gre_tcp_flow(20, family=family, key=key, csum=csum)
            run = s.replay(frames)
            assert shape(run.packets) == [(20, 28000, 1400, ["tcpv4"], "partial")], (family, key, csum)
            pkt = run.packets[0]
            assert (pkt.vnet["csum_start"], pkt.vnet["csum_offset"], pkt.covers) == (l4, 16, list(range(20)))
            assert len(pkt.data) == len(frames[0]) + 19 * 1400
            p = fr.parse(pkt.data)
            assert pkt.data[p.payload_off:] == b"".join(f[p.payload_off:] for f in frames)
            if family == 4:
                assert struct.unpack_from("!H", pkt.data, 16)[0] == len(pkt.data) - 14 and ip4_csum_ok(pkt.data)
            else:
                assert struct.unpack_from("!H", pkt.data, 18)[0] == len(pkt.data) - 54
            assert struct.unpack_from("!H", pkt.data, p.l3 + 2)[0] == len(pkt.data) - p.l3
            assert ip4_csum_ok(pkt.data, p.l3)
        # inner IPv6 (protocol 0x86dd) and transparent Ethernet bridging (0x6558)
        for kw, l4, gso in ((dict(inner_family=6), 78, "tcpv6"), (dict(family=6, inner_family=6), 98, "tcpv6"),
                            (dict(teb=True), 72, "tcpv4"), (dict(family=6, teb=True, key=5, csum=True), 100, "tcpv4")):
            run = s.replay(tf.gre_tcp_flow(10, **kw))
            assert shape(run.packets) == [(10, 14000, 1400, [gso], "partial")], kw
            assert run.packets[0].vnet["csum_start"] == l4 and run.packets[0].covers == list(range(10))
    # with rx-gro-list the inner TCP of a GRE packet goes fraglist
    with KernelSession(host=HostState.build(rx_gro_list=True)) as s:
        for family in (4, 6):
            run = s.replay(tf.gre_tcp_flow(20, family=family))
            assert shape(run.packets) == [(20, 28000, 1400, ["tcpv4"], "valid")] and run.packets[0].fraglist
    # ... unless the inner flow has a local socket: the lookup uses the inner headers
    with KernelSession(host=HostState.build(rx_gro_list=True, local_tcp=["10.1.0.2:5201"])) as s:
        for family in (4, 6):
            run = s.replay(tf.gre_tcp_flow(20, family=family))
            assert shape(run.packets) == [(20, 28000, 1400, ["tcpv4"], "partial")]
        assert s.ns.settings()["host_realised"]["local_tcp_flows"] == ["10.1.0.1:33000>10.1.0.2:5201"]


@needs_kernel
def test_vxlan_merges_only_with_a_device_on_its_port():
    frames = tf.vxlan_tcp_flow(20)
    with KernelSession() as s:
        assert [p.data for p in s.replay(frames).packets] == frames
    with KernelSession(host=HostState.build(vxlan_ports=[8472])) as s:
        assert [p.data for p in s.replay(frames).packets] == frames
        assert shape(s.replay(tf.vxlan_tcp_flow(5, dport=8472)).packets, (8472,)) == \
            [(5, 7000, 1400, ["tcpv4"], "partial")]
    # without a device, rx-udp-gro-forwarding merges VXLAN as plain UDP, only with an outer checksum
    with KernelSession(host=HostState.build(udp_gro_forwarding=True)) as s:
        assert [p.gso_segs for p in s.replay(frames).packets] == [1] * 20
        run = s.replay(tf.vxlan_tcp_flow(20, udp_csum=True))
        assert shape(run.packets) == [(20, 29240, 1462, ["udp_l4"], "partial")]
        assert run.packets[0].covers == list(range(20))


@needs_kernel
def test_vxlan_device_merges_inner_tcp():
    with KernelSession(host=HostState.build(vxlan_ports=[4789])) as s:
        assert s.ns.settings()["host_realised"]["tunnels"] == [
            {"kind": "vxlan", "dev": "gvx4789", "dstport": 4789, "external": True, "up": True}]
        for family, udp_csum in ((4, False), (4, True), (6, True)):
            frames = tf.vxlan_tcp_flow(20, family=family, udp_csum=udp_csum)
            run = s.replay(frames)
            assert run.reliable and not run.warnings
            assert shape(run.packets, (4789,)) == [(20, 28000, 1400, ["tcpv4"], "partial")]
            pkt = run.packets[0]
            outer_l4 = 34 if family == 4 else 54
            assert (pkt.vnet["csum_start"], pkt.covers) == (outer_l4 + 50, list(range(20)))
            assert len(pkt.data) == len(frames[0]) + 19 * 1400
            udp_len, udp_check = struct.unpack_from("!HH", pkt.data, outer_l4 + 4)
            assert udp_len == len(pkt.data) - outer_l4
            if udp_csum:      # UDP_TUNNEL_CSUM: the outer checksum becomes the pseudo-header seed
                src, dst = (pkt.data[26:30], pkt.data[30:34]) if family == 4 else (pkt.data[22:38], pkt.data[38:54])
                assert udp_check == ks.seed_value(src, dst, 17, udp_len)
            else:
                assert udp_check == 0
            p = fr.parse(pkt.data, vxlan_ports=(4789,))
            assert pkt.data[p.payload_off:] == b"".join(f[p.payload_off:] for f in frames)
            assert struct.unpack_from("!H", pkt.data, p.l3 + 2)[0] == len(pkt.data) - p.l3
        # IPv6 outer with a zero UDP checksum, inner IPv6
        for kw, l4, gso in ((dict(family=6, udp_csum=False), 104, "tcpv4"), (dict(inner_family=6), 104, "tcpv6")):
            run = s.replay(tf.vxlan_tcp_flow(10, **kw))
            assert shape(run.packets, (4789,)) == [(10, 14000, 1400, [gso], "partial")], kw
            assert run.packets[0].vnet["csum_start"] == l4 and run.packets[0].covers == list(range(10))
        # flows differing only in VNI or outer source port are kept apart
        a, b, c = tf.vxlan_tcp_flow(10, vni=1), tf.vxlan_tcp_flow(10, vni=2), tf.vxlan_tcp_flow(10, sport=50000)
        for other in (b, c):
            run = s.replay([x for pair in zip(a, other) for x in pair])
            assert [(p.gso_segs, p.covers) for p in run.packets] == [(10, list(range(0, 20, 2))),
                                                                      (10, list(range(1, 20, 2)))]
        # a bad inner TCP checksum: each goes up alone, unless --csum trust (csum_start at the inner TCP)
        bad = []
        for f in tf.vxlan_tcp_flow(5):
            b = bytearray(f)
            b[fr.parse(f, vxlan_ports=(4789,)).check_at] ^= 0x55
            bad.append(bytes(b))
        assert [p.data for p in s.replay(bad, csum="verify").packets] == bad
        assert [(p.gso_segs, p.csum) for p in s.replay(bad, csum="trust").packets] == [(5, "partial")]
    # rx-gro-list makes the inner TCP fraglist, as for GRE
    with KernelSession(host=HostState.build(vxlan_ports=[4789], rx_gro_list=True)) as s:
        run = s.replay(tf.vxlan_tcp_flow(20))
        assert shape(run.packets, (4789,)) == [(20, 28000, 1400, ["tcpv4"], "valid")] and run.packets[0].fraglist
    with KernelSession(host=HostState.build(vxlan_ports=[4789], rx_gro_list=True, local_tcp=["10.1.0.2:5201"])) as s:
        run = s.replay(tf.vxlan_tcp_flow(20))
        assert shape(run.packets, (4789,)) == [(20, 28000, 1400, ["tcpv4"], "partial")]


@needs_kernel
def test_vxlan_without_the_i_flag_is_merged_and_the_simulation_agrees():
    """vxlan_gro_receive never requires the I flag: frames without it merge on their inner
    TCP like any VXLAN frames, frames differing only in the flags byte are kept apart,
    and the simulation delivers the same packets, byte for byte."""
    from grotool.engine import Settings, simulate

    config = netns.kernel_config()
    a = tf.vxlan_tcp_flow(10, vxlan_flags=0x00)
    b = tf.vxlan_tcp_flow(10)                     # the same frames with the I flag
    cases = [
        ({}, a + tf.vxlan_tcp_flow(20, vxlan_flags=0x00)[10:],
         [(20, 28000, 1400, ["tcpv4"], "partial", False, list(range(20)))]),
        ({}, [x for pair in zip(a, b) for x in pair],
         [(10, 14000, 1400, ["tcpv4"], "partial", False, list(range(0, 20, 2))),
          (10, 14000, 1400, ["tcpv4"], "partial", False, list(range(1, 20, 2)))]),
        ({"rx_gro_list": True}, a, [(10, 14000, 1400, ["tcpv4"], "valid", True, list(range(10)))]),
    ]
    for extra, frames, expected in cases:
        host = {"vxlan_ports": (4789,), **extra}
        with KernelSession(host=HostState.build(**host)) as s:
            run = s.replay(frames)
        assert run.reliable and not run.warnings, extra
        got = [(*shape([p], (4789,))[0], p.fraglist, p.covers) for p in run.packets]
        assert got == expected, extra
        for p in run.packets:
            assert p.data[42] == frames[p.covers[0]][42]        # the first frame's VXLAN flags
            q = fr.parse(p.data, vxlan_ports=(4789,))
            assert p.data[q.payload_off:] == b"".join(frames[i][q.payload_off:] for i in p.covers)
        settings = Settings(device="veth", vlan_gro=config.get("CONFIG_VLAN_8021Q", "y") != "n",
                            hz=int(config.get("CONFIG_HZ", "250")), **host)
        sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, settings))
        assert [(list(d.indices), d.segs, d.gso_size, d.data) for d in sim] == \
            [(p.covers, p.segs, p.gso_size, p.data) for p in run.packets], extra


# =============================================================================
# The real kernel: GENEVE, the sidecar, cleanup
# =============================================================================
def cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "grotool", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def mine(pid=None):
    prefix = f"{netns.PREFIX}{pid or os.getpid()}-"
    return [n for n in ks.grotool_netns() if n.startswith(prefix)]


def root_devices_of_ours():
    """Devices the oracle creates (veth ends, tunnels) seen in the root namespace: none, ever."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.count(":") >= 2]
    return [n for n in names if n in (netns.TX_DEV, netns.RX_DEV) or n.startswith(("gvx", "gge"))]


@needs_kernel
def test_geneve_port_on_a_kernel_without_geneve(tmp_path):
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, tf.udp_flow(2, dport=6081))
    proc = cli("kernel", "--geneve-port", "6081", str(src), str(tmp_path / "o.pcap"))
    _, err = proc.communicate(timeout=60)
    if netns.kernel_config(("CONFIG_GENEVE",)).get("CONFIG_GENEVE") == "n":
        lines = err.decode().strip().splitlines()
        assert proc.returncode == 4 and len(lines) == 1, err.decode()
        assert "has no GENEVE support (CONFIG_GENEVE is not set)" in lines[0]
        assert not (tmp_path / "o.pcap").exists()
    else:                                    # a kernel with GENEVE runs it
        assert proc.returncode == 0, err.decode()
    assert mine(proc.pid) == []


@needs_kernel
def test_sidecar_records_the_host_state(tmp_path):
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, tf.vxlan_tcp_flow(10) + tf.udp_flow(10) + tf.tcp_flow(10, **FLOW_A))
    out, side = tmp_path / "o.pcap", tmp_path / "o.json"
    proc = cli("kernel", "--rx-gro-list", "--udp-gro-forwarding", "--udp-gro-socket", "5202", "--vxlan-port", "4789",
               "--local-tcp", "10.0.0.2:5201", "--json", str(side), str(src), str(out))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    doc = json.loads(side.read_text())
    st = doc["settings"]
    assert st["host"] == {"udp_gro_forwarding": True, "rx_gro_list": True, "udp_gro_sockets": [5202],
                          "vxlan_ports": [4789], "geneve_ports": [], "local_tcp": ["10.0.0.2:5201"],
                          "gro_max_size": None, "gro_ipv4_max_size": None}
    assert st["gro_max_size"] == 65536             # the device as it came, read back
    assert st["rx_features"]["rx-gro-list"] == "on" and st["rx_features"]["rx-udp-gro-forwarding"] == "on"
    assert st["host_realised"]["local_tcp_flows"] == ["10.0.0.1:40000>10.0.0.2:5201"]
    assert [t["dev"] for t in st["host_realised"]["tunnels"]] == ["gvx4789"]
    for opt in ("CONFIG_VXLAN", "CONFIG_GENEVE", "CONFIG_NET_IPGRE_DEMUX", "CONFIG_NET_FOU", "CONFIG_HZ"):
        assert opt in st["kernel_config"]
    assert doc["summary"]["frames_in"] == 30 and doc["summary"]["uncovered_frames"] == 0
    packets = doc["packets"]
    # the VXLAN inner flow has no local socket: fraglist (rx-gro-list); the UDP_GRO
    # socket's port and the local TCP flow: normal GRO
    assert [(p["gso_segs"], p["csum"], p["fraglist"]) for p in packets] == \
        [(10, "valid", True), (10, "partial", False), (10, "partial", False)]
    assert packets[0]["flow"]["outer"] == [{"src": "192.168.50.1", "dst": "192.168.50.2", "proto": 17,
                                            "kind": "vxlan", "key": 42, "sport": 49152, "dport": 4789}]
    assert doc["summary"]["fraglist_packets"] == 1


@needs_kernel
def test_deprecated_udp_gro_still_works(tmp_path):
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, tf.udp_flow(10))
    proc = cli("kernel", "--udp-gro", "fraglist", "--json", str(tmp_path / "o.json"), str(src),
               str(tmp_path / "o.pcap"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "--udp-gro is deprecated" in err.decode()
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["settings"]["udp_gro"] == "fraglist" and doc["settings"]["host"]["rx_gro_list"] is True
    assert [(p["gso_segs"], p["fraglist"]) for p in doc["packets"]] == [(10, True)]


@needs_kernel
def test_sockets_closed_and_nothing_left_after_a_run():
    host = HostState.build(udp_gro_sockets=[5202], vxlan_ports=[4789], local_tcp=["10.0.0.1:40000>10.0.0.2:5201"])
    with KernelSession(host=host) as s:
        s.replay(tf.tcp_flow(2, **FLOW_A))
        socks = s.ns.udp_sockets + s.ns.tcp_sockets
        assert len(socks) == 3 and len(mine()) == 1          # 2 UDP, 1 established TCP
        devices = s.ns.ns_exec("ip", "-o", "link", "show").stdout
        assert "gvx4789" in devices and root_devices_of_ours() == []
    assert all(x.fileno() == -1 for x in socks)              # closed, so the namespace can go away
    assert mine() == [] and root_devices_of_ours() == []


@needs_kernel
def test_sigterm_with_host_options_removes_everything(tmp_path):
    src = tmp_path / "long.pcap"
    ks.write_pcap(src, [ks.tcp(100, seq=1 + i * 100, ip_id=i) for i in range(3000)])
    proc = cli("kernel", "-q", "--batch", "1", "--vxlan-port", "4789", "--udp-gro-socket", "443", "--rx-gro-list",
               "--local-tcp", "10.0.0.2:5201", str(src), str(tmp_path / "o.pcap"))
    try:
        end = time.time() + 20
        while time.time() < end and not mine(proc.pid):
            time.sleep(0.02)
        assert mine(proc.pid), "the run never created its namespace"
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 143 and b"Traceback" not in err
    assert mine(proc.pid) == [] and root_devices_of_ours() == []
    assert not (tmp_path / "o.pcap").exists()
