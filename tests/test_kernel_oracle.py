"""grotool kernel: replay through the real kernel's GRO (veth in a private netns).

The tests marked `kernel` need root, iproute2 and ethtool; they are skipped with
the reason otherwise (and required in CI, see tests/conftest.py).  The numbers
are what Linux 6.18 does (shared/spec/kernel-oracle.md, section 5).  The
unmarked tests at the top check the oracle's frame helpers and its exit-4 path
without privileges.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_support as ks
from grotool.errors import EnvironmentProblem, InputError
from grotool.oracle import frames as fr
from grotool.oracle import netns
from grotool.oracle.kernel import VNET_HDR, KernelSession, kernel_replay, prepare_frame, replay_frames

ROOT = Path(__file__).resolve().parent.parent
needs_kernel = ks.needs_kernel


def payload_of(pkt) -> int:
    return fr.parse(pkt.data).payload


def shape(packets):
    """(gso_segs, L4 payload) per delivered packet."""
    return [(p.gso_segs, payload_of(p) if fr.parse(p.data) else None) for p in packets]


def mine(pid=None):
    """grotool namespaces of one process (other runs may be going on at the same time)."""
    prefix = f"{netns.PREFIX}{pid or os.getpid()}-"
    return [n for n in ks.grotool_netns() if n.startswith(prefix)]


def wait_for_namespace(pid, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if mine(pid):
            return True
        time.sleep(0.02)
    return False


def long_input(tmp_path, n=3000):
    src = tmp_path / "long.pcap"
    ks.write_pcap(src, [ks.tcp(100, seq=1 + i * 100, ip_id=i) for i in range(n)])
    return src


def cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "grotool", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


# =============================================================================
# No privileges needed: frame helpers
# =============================================================================
def test_fix_checksums_makes_them_valid():
    frame = ks.tcp(100, check="bad")
    ip = bytearray(frame[14:34])
    ip[10:12] = b"\x12\x34"
    broken = frame[:14] + bytes(ip) + frame[34:]
    fixed = fr.fix_checksums(broken)
    assert ks.csum(fixed[14:34]) == 0
    assert fixed == ks.tcp(100)
    assert fr.fix_checksums(ks.udp(50, check="bad")) == ks.udp(50)
    assert fr.fix_checksums(ks.udp(50, check="zero")) == ks.udp(50, check="zero")  # no checksum stays none
    v6 = ks.tcp(300, family=6, check="bad")
    assert fr.fix_checksums(v6) == ks.tcp(300, family=6)


def test_auto_fixes_only_seed_checksums():
    seed = ks.tcp(1448, check="seed")
    assert fr.holds_seed(seed) and not fr.holds_seed(ks.tcp(1448)) and not fr.holds_seed(ks.tcp(1448, check="bad"))
    assert fr.fix_seed_checksum(seed) == (ks.tcp(1448), True)
    bad = ks.tcp(1448, check="bad")
    assert fr.fix_seed_checksum(bad) == (bad, False)
    assert prepare_frame(bad, "auto") == (bad, b"")
    assert fr.holds_seed(ks.udp(100, check="seed")) and fr.holds_seed(ks.tcp(10, family=6, check="seed"))


def _udp_ok(frame: bytes, l3: int = 14) -> bool:
    """The UDP checksum after the IPv4 header at l3 verifies (independent arithmetic)."""
    ihl = (frame[l3] & 15) * 4
    length = struct.unpack_from("!H", frame, l3 + ihl + 4)[0]
    udp = frame[l3 + ihl:l3 + ihl + length]
    return ks.csum(ks.pseudo(frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20], 17, length) + udp) == 0


def _with_check(frame: bytes, at: int, mode: str) -> bytes:
    """mode: "seed" (the pseudo-header seed of the IPv4 UDP datagram whose
    checksum field is at ``at``, IP header at 14), "bad" (one off)."""
    if mode == "bad":
        value = (struct.unpack_from("!H", frame, at)[0] + 1) & 0xFFFF or 1
    else:
        value = ks.seed_value(frame[26:30], frame[30:34], 17, struct.unpack_from("!H", frame, at - 2)[0])
    return frame[:at] + struct.pack("!H", value) + frame[at + 2:]


def _tunnel(port: int, header: bytes, inner_check=None) -> bytes:
    """A UDP tunnel frame (IPv4 outer, checksum right) to ``port``: ``header``,
    then an inner Ethernet/IPv4/TCP frame whose checksum is as ``inner_check`` says."""
    return ks.udp(header + ks.tcp(200, check=inner_check), dport=port)


VXLAN_HDR = bytes([8, 0, 0, 0, 0, 0, 42, 0])
GENEVE_HDR = struct.pack("!BBHI", 0, 0, 0x6558, 42 << 8)
OUTER_CHECK = 14 + 20 + 6                    # outer UDP checksum field
INNER_CHECK = 14 + 20 + 8 + 8 + 14 + 20 + 16  # inner TCP checksum field behind VXLAN


def test_auto_fills_every_seed_of_the_encapsulation_chain():
    good = _tunnel(4789, VXLAN_HDR)
    assert _udp_ok(good)
    vx = {"vxlan_ports": (4789,)}
    inner_seed = _tunnel(4789, VXLAN_HDR, "seed")
    # the outer checksum as its seed: filled in, over the inner TCP as it is
    assert fr.fix_seed_checksum(_with_check(good, OUTER_CHECK, "seed"), **vx) == (good, True)
    # both seeds: the inner one first, then the outer over it
    assert fr.fix_seed_checksum(_with_check(inner_seed, OUTER_CHECK, "seed"), **vx) == (good, True)
    # an outer checksum right before stays right; one filled by local checksum
    # offload (right for the frame with the inner seed filled in) becomes right
    right = _tunnel(4789, VXLAN_HDR, "seed")
    assert _udp_ok(right) and fr.fix_seed_checksum(right, **vx) == (good, True)
    lco = inner_seed[:OUTER_CHECK] + good[OUTER_CHECK:OUTER_CHECK + 2] + inner_seed[OUTER_CHECK + 2:]
    assert not _udp_ok(lco) and fr.fix_seed_checksum(lco, **vx) == (good, True)
    # a bad outer checksum stays bad (its field untouched), a bad inner one too
    outer_bad = _with_check(inner_seed, OUTER_CHECK, "bad")
    fixed, changed = fr.fix_seed_checksum(outer_bad, **vx)
    field = slice(OUTER_CHECK, OUTER_CHECK + 2)
    assert changed and fixed[field] == outer_bad[field] and not _udp_ok(fixed)
    assert fixed[:OUTER_CHECK] + fixed[field.stop:] == good[:OUTER_CHECK] + good[field.stop:]
    inner_bad = _tunnel(4789, VXLAN_HDR, "bad")
    fixed, changed = fr.fix_seed_checksum(_with_check(inner_bad, OUTER_CHECK, "seed"), **vx)
    assert changed and fixed == inner_bad and _udp_ok(fixed) and fixed[INNER_CHECK:INNER_CHECK + 2] != \
        good[INNER_CHECK:INNER_CHECK + 2]
    assert fr.fix_seed_checksum(inner_bad, **vx) == (inner_bad, False)
    # without a VXLAN port the outer UDP is the innermost: its seed is filled in as before
    assert fr.fix_seed_checksum(_with_check(good, OUTER_CHECK, "seed")) == (good, True)
    assert prepare_frame(_with_check(inner_seed, OUTER_CHECK, "seed"), "auto", (4789,)) == (good, b"")


def test_auto_fills_the_seeds_behind_a_geneve_port():
    good = _tunnel(6081, GENEVE_HDR)
    both = _with_check(_tunnel(6081, GENEVE_HDR, "seed"), OUTER_CHECK, "seed")
    assert prepare_frame(both, "auto", (), (6081,)) == (good, b"")
    assert fr.fix_seed_checksum(both, geneve_ports=(6081,)) == (good, True)
    # without the port only the outer UDP is seen, and the inner seed stays
    assert fr.fix_seed_checksum(both)[0] == _tunnel(6081, GENEVE_HDR, "seed")
    _, vnet = prepare_frame(both, "trust", (), (6081,))
    assert VNET_HDR.unpack(vnet) == (1, 0, 0, 0, INNER_CHECK - 16, 16)   # csum_start: the inner TCP


def test_trust_injects_needs_csum_vnet_header():
    frame, vnet = prepare_frame(ks.tcp(10, check="bad"), "trust")
    assert frame == ks.tcp(10, check="bad")                 # bytes untouched
    assert VNET_HDR.unpack(vnet) == (1, 0, 0, 0, 34, 16)     # NEEDS_CSUM, csum_start = L4, offset = 16
    _, vnet = prepare_frame(ks.tcp(10, family=6, vlan=7), "trust")
    assert VNET_HDR.unpack(vnet) == (1, 0, 0, 0, 58, 16)
    _, vnet = prepare_frame(ks.udp(10), "trust")
    assert VNET_HDR.unpack(vnet) == (1, 0, 0, 0, 34, 6)
    _, vnet = prepare_frame(ks.udp(10, check="zero"), "trust")   # no checksum: nothing to compute
    assert VNET_HDR.unpack(vnet)[0] == 0
    _, vnet = prepare_frame(ks.arp_frame(), "trust")
    assert VNET_HDR.unpack(vnet)[0] == 0
    assert prepare_frame(ks.tcp(10, check="bad"), "verify") == (ks.tcp(10, check="bad"), b"")


def test_link_types_get_a_fixed_ethernet_header():
    raw4 = ks.tcp(10, raw=True)
    raw6 = ks.tcp(10, family=6, raw=True)
    eth = fr.FAKE_DST_MAC + fr.FAKE_SRC_MAC
    for lt in (101, 228, 12, 14):
        assert fr.to_ethernet(lt, raw4) == eth + b"\x08\x00" + raw4
    assert fr.to_ethernet(229, raw6) == eth + b"\x86\xdd" + raw6
    assert fr.to_ethernet(101, raw6) == eth + b"\x86\xdd" + raw6
    # cooked: the recorded source address (6 bytes of the 8-byte field) and protocol
    src = bytes.fromhex("0200000000c7")
    sll = struct.pack("!HHH8sH", 0, 1, 6, src + b"\x5a\xa5", 0x0800) + raw4
    assert fr.to_ethernet(113, sll) == fr.FAKE_DST_MAC + src + b"\x08\x00" + raw4
    sll2 = struct.pack("!HHIHBB8s", 0x86DD, 0, 2, 1, 0, 6, src + b"\x5a\xa5") + raw6
    assert fr.to_ethernet(276, sll2) == fr.FAKE_DST_MAC + src + b"\x86\xdd" + raw6
    # an address of another length: the fixed source
    sll = struct.pack("!HHH8sH", 0, 778, 4, b"\x0a\x00\x00\x01\x5a\xa5\0\0", 0x0800) + raw4
    assert fr.to_ethernet(113, sll) == eth + b"\x08\x00" + raw4
    # BSD loopback: the address family, NULL in either byte order, LOOP big-endian
    for lt, header, payload, etype in ((0, b"\x02\0\0\0", raw4, b"\x08\x00"), (0, b"\0\0\0\x02", raw4, b"\x08\x00"),
                                       (0, b"\x1e\0\0\0", raw6, b"\x86\xdd"), (0, b"\0\0\0\x18", raw6, b"\x86\xdd"),
                                       (108, b"\0\0\0\x1c", raw6, b"\x86\xdd"), (108, b"\0\0\0\x02", raw4, b"\x08\x00"),
                                       (108, b"\x02\0\0\0", raw4, b"\x00\x00"), (0, b"\x07\0\0\0", raw4, b"\x00\x00")):
        assert fr.to_ethernet(lt, header + payload) == eth + etype + payload
    # a raw record of another IP version is not IP, as the simulation's link layer has it
    for version in (0, 5, 7, 15):
        other = bytes([version << 4 | 5]) + raw4[1:]
        for lt in (101, 228, 229):
            assert fr.to_ethernet(lt, other) == eth + b"\x00\x00" + other
    frame = ks.tcp(10)
    assert fr.to_ethernet(1, frame) is frame
    with pytest.raises(ValueError):
        fr.to_ethernet(1, b"\x00" * 10)
    with pytest.raises(ValueError):
        fr.to_ethernet(113, b"\x00" * 15)


def _super(frames_in):
    """A super-packet as GRO builds it: the first header, all payloads, IP length fixed."""
    first = fr.parse(frames_in[0])
    body = b"".join(f[fr.parse(f).payload_off:] for f in frames_in)
    head = bytearray(frames_in[0][:first.payload_off])
    struct.pack_into("!H", head, 16, len(head) - 14 + len(body))
    return bytes(head) + body


def test_mapping_follows_flow_sequence_and_bytes():
    a = ks.tcp_flow(4)
    b = ks.tcp_flow(3, sport=41000)
    inputs = [a[0], b[0], a[1], b[1], a[2], b[2], a[3], ks.arp_frame()]
    delivered = [(ks.arp_frame(), 1, False), (_super(a), 4, True), (_super(b[:2]), 2, True), (b[2], 1, False)]
    assert fr.map_batch(inputs, delivered) == [[7], [0, 2, 4, 6], [1, 3], [5]]
    # a packet the inputs cannot explain maps to nothing; a payload mismatch is not papered over
    changed = bytearray(_super(a))
    changed[-1] ^= 0xFF
    assert fr.map_batch(a, [(bytes(changed), 4, True)]) == [[]]
    # two pure ACKs with the same sequence number: exact bytes decide
    acks = [ks.tcp(0, seq=1, ack=10), ks.tcp(0, seq=1, ack=20)]
    assert fr.map_batch(acks, [(acks[1], 1, False), (acks[0], 1, False)]) == [[1], [0]]


def test_mapping_keeps_frames_from_another_mac_apart():
    """The same segment twice, once from another source MAC: GRO merges only the
    copy with the first frame's Ethernet addresses (compare_ether_header), and
    the other copy goes up alone.  Found by a randomized differential run."""
    a = ks.tcp_flow(2)
    other = bytes.fromhex("0200000000aa0200000000cc") + a[1][12:]
    inputs = [a[0], other, a[1]]
    assert fr.map_batch(inputs, [(_super(a), 2, True), (other, 1, False)]) == [[0, 2], [1]]


def test_parse_sees_through_ip_in_ip_and_vlan():
    inner = ks.tcp(100, seq=77, raw=True)
    outer = ks.ether(ks.ip_wrap(inner, 4, src=bytes([192, 168, 0, 1]), dst=bytes([192, 168, 0, 2])), vlan=5)
    p = fr.parse(outer)
    assert (p.proto, p.seq, p.payload, p.vlans) == (6, 77, 100, (5,))
    assert p.outer == ((bytes([192, 168, 0, 1]), bytes([192, 168, 0, 2]), 4),)
    assert fr.parse(ks.arp_frame()) is None


def test_not_root_is_environment_problem_exit_4(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from grotool.cli import main

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(EnvironmentProblem, match="needs root") as info:
        netns.check_environment()
    assert info.value.exit_code == 4
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, ks.tcp_flow(2))
    result = CliRunner().invoke(main, ["kernel", str(src), str(tmp_path / "o.pcap")])
    assert result.exit_code == 4
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "needs root" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "o.pcap").exists()


def test_missing_tool_is_environment_problem(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "ethtool" else real(tool))
    with pytest.raises(EnvironmentProblem, match=r"'ethtool' \(ethtool\)") as info:
        netns.check_environment()
    assert "\n" not in str(info.value)


# =============================================================================
# The real kernel
# =============================================================================
@needs_kernel
def test_one_flow_in_order_is_one_super_packet():
    frames = ks.tcp_flow(20)
    stamps = [1_000_000 + 7 * i for i in range(20)]
    run = replay_frames(frames, stamps)
    assert run.reliable and not run.warnings
    assert run.drops == {"capture_socket": 0, "veth_rx_dropped": 0, "veth_tx_dropped": 0}
    assert len(run) == 1
    pkt = run[0]
    assert (pkt.gso_segs, pkt.gso_size, pkt.gso_type, pkt.csum) == (20, 1448, ["tcpv4"], "partial")
    assert payload_of(pkt) == 28960
    assert struct.unpack_from("!H", pkt.data, 16)[0] == 28960 + 40       # IPv4 total length rewritten
    f = frames[0]              # the first segment's headers, but for IP length, IP and TCP checksums
    assert (pkt.data[:16], pkt.data[18:24], pkt.data[26:50], pkt.data[52:54]) == \
        (f[:16], f[18:24], f[26:50], f[52:54])
    assert pkt.data[54:] == b"".join(x[54:] for x in frames)
    assert pkt.covers == list(range(20)) and pkt.ts == stamps[0]
    assert [(b.frames, b.ok) for b in run.batches] == [(20, True)]


def _flow_label(frame: bytes, label: int) -> bytes:
    """An Ethernet/IPv6 frame with another flow label (no checksum covers it)."""
    first = struct.unpack_from("!I", frame, 14)[0]
    return frame[:14] + struct.pack("!I", (first & ~0xFFFFF) | label) + frame[18:]


def test_mapping_gives_a_look_alike_back_to_the_packet_that_carries_its_bytes():
    """Segment 1 sent with another IPv6 flow label, then again with the flow's:
    the flow mapping first hands the labelled copy to the aggregate; the packet
    that went up alone carries exactly its bytes, so the two are swapped.  Exact
    duplicates keep input order."""
    a = ks.tcp_flow(2, family=6)
    labelled = _flow_label(a[1], 0xFFFFF)
    head = bytearray(a[0])
    struct.pack_into("!H", head, 18, struct.unpack_from("!H", head, 18)[0] + ks.MSS)
    merged = bytes(head) + a[1][74:]
    assert fr.map_batch([a[0], labelled, a[1]], [(merged, 2, True), (labelled, 1, False)]) == [[0, 2], [1]]
    assert fr.map_batch([a[0], a[1], a[1]], [(merged, 2, True), (a[1], 1, False)]) == [[0, 1], [2]]


@needs_kernel
def test_copy_from_another_mac_is_traced_to_the_packet_it_went_up_in():
    """Segment 1 is sent from another source MAC, then again from the flow's: the
    kernel merges segment 0 with the second copy, and the oracle must say so."""
    a = ks.tcp_flow(2)
    other = bytes.fromhex("0200000000aa0200000000cc") + a[1][12:]
    run = replay_frames([a[0], other, a[1]])
    assert run.reliable and not run.warnings
    assert [(p.data == other, p.gso_segs, p.covers) for p in run.packets] == [(False, 2, [0, 2]), (True, 1, [1])]


@needs_kernel
def test_look_alike_with_another_flow_label_is_traced_to_the_packet_it_went_up_in():
    """IPv6: segment 1 with another flow label (another GRO flow, ipv6_gro_receive),
    then again with the flow's label: the kernel merges the second copy."""
    a = ks.tcp_flow(2, family=6)
    labelled = _flow_label(a[1], 0xFFFFF)
    run = replay_frames([a[0], labelled, a[1]])
    assert run.reliable and not run.warnings
    assert [(p.data == labelled, p.gso_segs, p.covers) for p in run.packets] == [(False, 2, [0, 2]), (True, 1, [1])]


@needs_kernel
def test_psh_ttl_and_two_flows():
    with KernelSession() as session:
        psh = session.replay(ks.tcp_flow(20, flags_at=[(9, ks.ACK | ks.PSH)])).packets
        assert shape(psh) == [(10, 14480), (10, 14480)]
        assert fr.parse(psh[0].data).flags & ks.PSH and not fr.parse(psh[1].data).flags & ks.PSH
        assert psh[0].covers == list(range(10)) and psh[1].covers == list(range(10, 20))

        ttl = ks.tcp_flow(10) + [ks.tcp(1448, seq=1000 + i * 1448, ip_id=i, ttl=63) for i in range(10, 20)]
        assert shape(session.replay(ttl).packets) == [(10, 14480), (10, 14480)]

        a, b = ks.tcp_flow(20), ks.tcp_flow(20, sport=41000)
        both = session.replay([f for pair in zip(a, b) for f in pair]).packets
        assert shape(both) == [(20, 28960), (20, 28960)]
        assert both[0].covers == list(range(0, 40, 2)) and both[1].covers == list(range(1, 40, 2))


@needs_kernel
def test_budget_batches_and_ip_length_limit():
    with KernelSession() as session:
        run = session.replay(ks.tcp_flow(100))
        assert [p.gso_segs for p in run.packets] == [45, 19, 36]       # 45 x 1448 fills 65535 bytes of IP
        assert [(b.first_frame, b.frames) for b in run.batches] == [(0, 64), (64, 36)]
        assert [p.batch for p in run.packets] == [0, 0, 1]
        assert [p.gso_segs for p in session.replay(ks.tcp_flow(100), batch=32).packets] == [32, 32, 32, 4]
        big = session.replay([ks.tcp(8000, seq=1 + i * 8000, ip_id=i) for i in range(64)])
        assert [p.gso_segs for p in big.packets] == [8] * 8 and big.reliable


@needs_kernel
def test_checksum_modes():
    bad = [ks.tcp(1448, seq=1000 + i * 1448, ip_id=i, check="bad") for i in range(20)]
    seed = [ks.tcp(1448, seq=1000 + i * 1448, ip_id=i, check="seed") for i in range(20)]
    with KernelSession() as session:
        def segs(frames, mode):
            run = session.replay(frames, csum=mode)
            assert run.reliable
            return [p.gso_segs for p in run.packets], run.packets

        for mode in ("verify", "auto"):
            got, packets = segs(bad, mode)
            assert got == [1] * 20
            assert [p.data for p in packets] == bad and {p.csum for p in packets} == {"none"}
        for mode in ("fix", "trust"):
            assert segs(bad, mode)[0] == [20]
        assert segs(seed, "verify")[0] == [1] * 20
        for mode in ("auto", "fix", "trust"):
            assert segs(seed, mode)[0] == [20]
        # a bad IPv4 header checksum is verified even under trust
        ipbad = [ks.ether(ks.ip_wrap(f[34:], 6, ip_id=i, ip_bad=True)) for i, f in enumerate(ks.tcp_flow(4))]
        assert segs(ipbad, "trust")[0] == [1] * 4
        assert segs(ipbad, "fix")[0] == [4]


@needs_kernel
def test_udp_gro_needs_forwarding_or_fraglist():
    datagrams = [ks.udp(1000, salt=i, ip_id=i) for i in range(20)]
    expected = {"off": [(1, 1000)] * 20, "forward": [(20, 20000)], "fraglist": [(20, 20000)]}
    for mode, want in expected.items():
        with KernelSession(udp_gro=mode) as session:
            run = session.replay(datagrams)
            assert run.reliable and shape(run.packets) == want, mode
            assert run.settings["udp_gro"] == mode
            if mode != "off":
                assert (run.packets[0].gso_type, run.packets[0].gso_size) == (["udp_l4"], 1000)
                assert run.packets[0].covers == list(range(20))
                assert struct.unpack_from("!H", run.packets[0].data, 38)[0] == 20008   # UDP length


@needs_kernel
def test_one_gro_bucket_of_eight_and_small_segments():
    with KernelSession() as session:
        rr10 = [ks.tcp(1448, seq=1 + k * 1448, sport=42000 + f, ip_id=k) for k in range(5) for f in range(10)]
        assert [p.gso_segs for p in session.replay(rr10).packets] == [1] * 50     # 9th flow evicts the oldest
        rr8 = [ks.tcp(1448, seq=1 + k * 1448, sport=42000 + f, ip_id=k) for k in range(5) for f in range(8)]
        assert [p.gso_segs for p in session.replay(rr8).packets] == [5] * 8
        g = [ks.tcp(1448, seq=1000, ip_id=0), ks.tcp(1448, seq=2448, ip_id=1),
             ks.tcp(1, seq=3896, ip_id=2, pad=True), ks.tcp(0, seq=3897, ip_id=3)]
        run = session.replay(g)
        assert shape(run.packets) == [(2, 2896), (1, 1), (1, 0)]
        assert len(run.packets[1].data) == 60                            # Ethernet padding kept, not merged
        v6 = session.replay(ks.tcp_flow(20, family=6)).packets
        assert [(p.gso_segs, p.gso_type) for p in v6] == [(20, ["tcpv6"])]


@needs_kernel
def test_vlan_tag_is_reinserted():
    frames = ks.tcp_flow(6, vlan=100)
    run = kernel_replay(frames)
    vlan_gro = netns.kernel_config().get("CONFIG_VLAN_8021Q", "y") != "n"
    if vlan_gro:
        assert [p.gso_segs for p in run.packets] == [6]
        assert run.packets[0].data[12:16] == b"\x81\x00\x00\x64"
    else:                                     # no 802.1Q GRO built in: each goes up alone, bytes unchanged
        assert [p.data for p in run.packets] == frames
    assert sorted(i for p in run.packets for i in p.covers) == list(range(6))


@needs_kernel
def test_files_sidecar_and_determinism(tmp_path):
    frames = []
    for k in range(30):
        frames += [ks.tcp(1448, seq=1 + k * 1448, sport=43000 + f, ip_id=k, family=4 if f % 2 else 6)
                   for f in range(3)]
        if k % 7 == 3:
            frames += [ks.arp_frame(), ks.tcp(1448, seq=999, sport=43500, flags=ks.ACK | ks.PSH)]
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, frames)
    from grotool.oracle import run_kernel_replay

    outs = []
    for i in range(2):
        run = run_kernel_replay(str(src), str(tmp_path / f"k{i}.pcap"), str(tmp_path / f"k{i}.json"))
        assert run.reliable
        outs.append(((tmp_path / f"k{i}.pcap").read_bytes(), json.loads((tmp_path / f"k{i}.json").read_text())))
    assert outs[0][0] == outs[1][0]                                      # byte-identical pcaps
    assert outs[0][1]["packets"] == outs[1][1]["packets"]
    doc = outs[0][1]
    assert doc["schema"] == "grotool.kernel/1" and doc["kernel"] == os.uname().release
    assert doc["reliable"] is True and set(doc["drops"].values()) == {0}
    assert doc["settings"]["csum"] == "auto" and doc["settings"]["batch"] == 64
    assert doc["input"]["packets"] == len(frames) and doc["summary"]["frames_in"] == len(frames)
    assert [b["frames"] for b in doc["batches"]] == [64] * (len(frames) // 64) + [len(frames) % 64]
    assert all(b["ok"] and b["attempts"] >= 1 for b in doc["batches"])
    covered = sorted(i for p in doc["packets"] for i in p["covers"])
    assert covered == list(range(len(frames)))                           # every input frame exactly once
    assert sum(p["gso_segs"] for p in doc["packets"]) == len(frames)
    first = doc["packets"][0]
    for key in ("index", "len", "gso_type", "gso_size", "gso_segs", "csum", "covers", "flow", "seq", "flags"):
        assert key in first
    linktype, recs = ks.read_pcap(tmp_path / "k0.pcap")
    assert linktype == 1 and len(recs) == len(doc["packets"])
    t0 = 1_700_000_000_000_000_000
    for (ts, data), p in zip(recs, doc["packets"]):
        assert ts == t0 + min(p["covers"]) * 10_000 == p["ts_ns"]      # first covered input's timestamp
        assert len(data) == p["len"]
    supers = [p for p in doc["packets"] if p["gso_segs"] > 1]
    assert supers and all(p["gso_type"] in (["tcpv4"], ["tcpv6"]) for p in supers)
    assert mine() == []


@needs_kernel
def test_raw_ip_input_gives_ethernet_output(tmp_path):
    src = tmp_path / "raw.pcap"
    ks.write_pcap(src, [ks.tcp(1448, seq=1 + i * 1448, ip_id=i, raw=True) for i in range(10)], linktype=101)
    out = tmp_path / "out.pcap"
    from grotool.oracle import run_kernel_replay

    run = run_kernel_replay(str(src), str(out))
    linktype, recs = ks.read_pcap(out)
    assert linktype == 1 and len(recs) == 1 and run.packets[0].gso_segs == 10
    assert recs[0][1][:14] == fr.FAKE_DST_MAC + fr.FAKE_SRC_MAC + b"\x08\x00"


@needs_kernel
@pytest.mark.parametrize("linktype", [101, 228])
def test_raw_record_of_another_ip_version_matches_the_simulation(tmp_path, linktype):
    # version 5 and 0 records among one TCP flow's segments: neither side takes
    # them as IP (the oracle used to give them the IPv4 ethertype, a flow of its
    # own in the comparison); the gap in IP IDs they leave flushes the flow
    from grotool.compare import compare_captures
    from grotool.oracle import run_kernel_replay

    def version(frame, v):
        return bytes([v << 4 | frame[0] & 0x0F]) + frame[1:]

    segments = [ks.tcp(1448, seq=1000 + i * 1448, ip_id=i, raw=True) for i in range(6)]
    frames = segments[:2] + [version(segments[2], 5)] + segments[3:] + [version(ks.tcp(10, seq=99, raw=True), 0)]
    src = tmp_path / "raw.pcap"
    ks.write_pcap(src, frames, linktype=linktype)
    run = run_kernel_replay(str(src), str(tmp_path / "kernel.pcap"), csum="trust")
    assert [p.covers for p in run.packets] == [[2], [0, 1], [6], [3, 4, 5]]
    _, recs = ks.read_pcap(tmp_path / "kernel.pcap")
    assert [r[1][12:14] for r in recs] == [b"\x00\x00", b"\x08\x00", b"\x00\x00", b"\x08\x00"]
    proc = subprocess.run([sys.executable, "-m", "grotool", "replay", str(src), str(tmp_path / "sim.pcap"),
                           "--device", "veth", "--csum", "trust", "-q"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = compare_captures(str(tmp_path / "kernel.pcap"), str(tmp_path / "sim.pcap"), require_order=True)
    assert result.identical and result.counts()["flows"] == 2, result.counts()


@needs_kernel
def test_bad_input_is_input_error(tmp_path):
    from grotool.oracle import run_kernel_replay

    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"this is not a capture at all")
    with pytest.raises(InputError) as info:
        run_kernel_replay(str(garbage), str(tmp_path / "o.pcap"))
    assert info.value.exit_code == 3
    with pytest.raises(InputError, match="more than veth's MTU"):
        kernel_replay([ks.tcp(100), ks.MAC_DST + ks.MAC_SRC + b"\x08\x00" + bytes(65536)])
    with pytest.raises(InputError, match="shorter than an Ethernet header"):
        kernel_replay([b"\x00" * 10])
    proc = cli("kernel", str(garbage), str(tmp_path / "o.pcap"))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 3 and len(err.decode().strip().splitlines()) == 1
    assert mine() == []


@needs_kernel
def test_slow_sending_is_replayed_then_unreliable():
    # with T = 20 us sending 64 frames always takes more than T/2: every attempt is discarded
    with KernelSession(flush_timeout_ns=20_000) as session:
        run = session.replay(ks.tcp_flow(10))
    assert [(b.attempts, b.ok) for b in run.batches] == [(4, False)]
    assert not run.reliable and "4 times" in run.warnings[0]
    assert mine() == []


@needs_kernel
def test_deadline_bounds_the_run():
    before = time.monotonic()
    with pytest.raises(EnvironmentProblem, match="did not finish within 0.5 s"):
        kernel_replay(ks.tcp_flow(400), batch=1, max_seconds=0.5)
    assert time.monotonic() - before < 3
    assert mine() == []


@needs_kernel
def test_nothing_left_after_a_run_or_an_exception():
    assert mine() == []
    kernel_replay(ks.tcp_flow(3))
    assert mine() == []
    with pytest.raises(RuntimeError):
        with KernelSession():
            assert len(mine()) == 1
            raise RuntimeError("boom")
    assert mine() == []


@needs_kernel
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_signal_mid_run_removes_the_namespace(tmp_path, sig, code):
    src = long_input(tmp_path)
    out = tmp_path / "o.pcap"
    proc = cli("kernel", "-q", "--batch", "1", str(src), str(out))
    try:
        assert wait_for_namespace(proc.pid), "the run never created its namespace"
        time.sleep(0.3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == code, err.decode()
    assert b"Traceback" not in err
    assert mine(proc.pid) == []
    assert not out.exists() and not list(tmp_path.glob(".grotool-*"))


@needs_kernel
def test_sigkill_leftover_and_dead_pid_namespaces_are_removed_by_the_next_run(tmp_path):
    proc = cli("kernel", "-q", "--batch", "1", str(long_input(tmp_path)), str(tmp_path / "o.pcap"))
    try:
        assert wait_for_namespace(proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    left = mine(proc.pid)
    assert len(left) == 1                                  # SIGKILL: nothing could clean up
    dead = subprocess.Popen(["true"])
    dead.wait()
    fake = f"{netns.PREFIX}{dead.pid}-0badcafe"
    subprocess.run(["ip", "netns", "add", fake], check=True)
    try:
        kernel_replay(ks.tcp_flow(2))
        remaining = ks.grotool_netns()
        assert left[0] not in remaining and fake not in remaining
    finally:
        for name in left + [fake]:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


@needs_kernel
def test_real_non_root_user_gets_exit_4(tmp_path):
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or shutil.which("setpriv") is None:
        pytest.skip("needs setpriv and a system python3 that user nobody can run")
    script = ("import sys\n"
              "from grotool.errors import GrotoolError\n"
              "from grotool.oracle import run_kernel_replay\n"
              "try:\n"
              "    run_kernel_replay(sys.argv[1], sys.argv[2])\n"
              "except GrotoolError as exc:\n"
              "    print(f'grotool: error: {exc}', file=sys.stderr)\n"
              "    sys.exit(exc.exit_code)\n")
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script,
                             "/nonexistent/in.pcap", "/nonexistent/out.pcap"],
                            env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                            cwd="/", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "needs root" in lines[0]
    assert mine(proc.pid) == []          # (other runs on the machine may come and go meanwhile)
