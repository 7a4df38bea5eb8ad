"""grotool.gso against the real kernel: what Linux GRO merged (grotool kernel,
veth in a private namespace) splits back into the frames that went in.

Marked `kernel` (root, iproute2, ethtool); skipped with the reason otherwise
and required in CI (tests/conftest.py).
"""

from __future__ import annotations

import struct

import kernel_support as ks
from grotool.engine.skb import Delivery
from grotool.gso import segment
from grotool.oracle.kernel import KernelSession
from grotool.verify import Verifier, compare_frames

needs_kernel = ks.needs_kernel


def _verify(frames, packets):
    """grotool.verify over the kernel's deliveries; returns (result, super-packets)."""
    verifier = Verifier(1)
    for frame in frames:
        verifier.add_input(frame)
    supers = 0
    for p in packets:
        supers += len(p.covers) > 1
        verifier.check(Delivery(p.ts, p.data, len(p.covers), "kernel", tuple(p.covers), b"",
                                p.gso_size, tuple(p.gso_type)))
    return verifier.finish(), supers


@needs_kernel
def test_tcp_super_packets_of_the_kernel_split_back():
    a = ks.tcp_flow(30, flags_at=[(29, ks.ACK | ks.PSH)])
    b = ks.tcp_flow(30, sport=41000, family=6, start_seq=7)
    mixed = [f for pair in zip(a, b) for f in pair]
    with KernelSession() as session:
        run = session.replay(mixed)
    assert run.reliable
    result, supers = _verify(mixed, run.packets)
    assert result.ok, result.message
    assert supers == 2 and result.frames == 60
    # and byte for byte but for the TCP checksum (the kernel leaves the seed)
    first = run.packets[0]
    segs = segment(first.data, 1, first.gso_size, first.gso_type)
    assert [s[:50] + s[52:] for s in segs] == [mixed[i][:50] + mixed[i][52:] for i in first.covers]


@needs_kernel
def test_udp_gso_and_fraglist_super_packets_of_the_kernel_split_back():
    incrementing = [ks.udp(1000, salt=i, ip_id=i) for i in range(20)] + [ks.udp(300, salt=20, ip_id=20)]
    fixed = [ks.udp(700, sport=40007, salt=i, ip_id=0x4242) for i in range(10)]
    frames = incrementing + fixed
    for mode in ("forward", "fraglist"):
        with KernelSession(udp_gro=mode) as session:
            run = session.replay(frames)
        assert run.reliable, mode
        assert run.packets[0].gso_type == ["udp_l4"] and len(run.packets[0].covers) == 21, mode
        result, supers = _verify(frames, run.packets)
        assert result.ok, f"{mode}: {result.message}"
        assert supers == 2, mode
        segs = segment(run.packets[0].data, 1, run.packets[0].gso_size, run.packets[0].gso_type)
        assert [len(s) for s in segs] == [len(f) for f in incrementing]
        # the kernel merged the fixed-ID datagrams, which udp_l4 cannot record:
        # GSO numbers them, and only verify's rule for that lets them pass
        second = run.packets[1]
        assert second.covers == list(range(21, 31))
        resplit = segment(second.data, 1, second.gso_size, second.gso_type)
        assert compare_frames(fixed[1], resplit[1], 1).startswith("ipv4.id differs")
        assert compare_frames(fixed[1], resplit[1], 1, loose_ids=[14]) is None


def _gre(i: int, with_csum: bool) -> bytes:
    """TCP over IPv4 in GRE (optionally with the GRE checksum) over IPv4."""
    inner = ks.tcp(1000, seq=1000 + i * 1000, ip_id=i, raw=True)
    body = struct.pack("!HH", 0x8000 if with_csum else 0, 0x0800) + (b"\0" * 4 if with_csum else b"") + inner
    if with_csum:
        body = body[:4] + struct.pack("!H", ks.csum(body)) + body[6:]
    return ks.ether(ks.ip_wrap(body, 47, src=bytes([10, 9, 9, 1]), dst=bytes([10, 9, 9, 2]), ip_id=100 + i))


@needs_kernel
def test_gre_super_packets_of_the_kernel_split_back():
    for with_csum in (False, True):
        frames = [_gre(i, with_csum) for i in range(10)] + [_gre(10, with_csum)[:-600]]
        with KernelSession() as session:
            run = session.replay(frames)
        assert run.reliable
        assert [len(p.covers) for p in run.packets] == [10, 1]
        result, supers = _verify(frames, run.packets)
        assert result.ok, f"GRE checksum {with_csum}: {result.message}"
        segs = segment(run.packets[0].data, 1, run.packets[0].gso_size, run.packets[0].gso_type)
        if with_csum:
            # GRE checksum (bytes 38-39) recomputed per segment: equal to what was sent
            assert [s[38:40] for s in segs] == [f[38:40] for f in frames[:10]]


@needs_kernel
def test_tcp_fraglist_super_packets_of_the_kernel_split_back():
    # rx-gro-list and no local socket: tcp4/6_check_fraglist_gro chains the
    # segments (the PSH segment differs in flags, so it goes up alone)
    frames = ks.tcp_flow(20, flags_at=[(19, ks.ACK | ks.PSH)]) + ks.tcp_flow(10, sport=41000, family=6)
    with KernelSession(udp_gro="fraglist") as session:
        run = session.replay(frames)
    assert run.reliable
    assert [(len(p.covers), p.csum) for p in run.packets] == [(19, "valid"), (1, "valid"), (10, "valid")]
    result, supers = _verify(frames, run.packets)
    assert result.ok, result.message
    assert supers == 2


@needs_kernel
def test_fixed_ids_need_the_gso_type_the_kernel_sidecar_cannot_carry():
    # GRO records fixed IDs as SKB_GSO_TCP_FIXEDID, but the virtio header the
    # kernel sidecar is read from has no such flag: split then numbers the IDs
    frames = [ks.tcp(1448, seq=1000 + i * 1448, ip_id=0x77) for i in range(8)]
    with KernelSession() as session:
        run = session.replay(frames)
    (p,) = run.packets
    assert p.gso_type == ["tcpv4"] and p.covers == list(range(8))
    ids = [struct.unpack_from("!H", s, 18)[0] for s in segment(p.data, 1, p.gso_size, p.gso_type)]
    assert ids == [0x77 + k for k in range(8)]
    fixed = segment(p.data, 1, p.gso_size, ("tcpv4", "tcp_fixedid"))
    assert [s[:50] + s[52:] for s in fixed] == [f[:50] + f[52:] for f in frames]


def _vxlan(i: int, outer_csum: bool) -> bytes:
    """TCP in VXLAN (VNI 42) over IPv4, IDs incrementing inside and outside."""
    inner = (ks.MAC_DST + ks.MAC_SRC + b"\x08\x00"
             + ks.tcp(1000, seq=100 + 1000 * i, ip_id=i, raw=True, src=bytes([192, 168, 0, 1]),
                      dst=bytes([192, 168, 0, 2])))
    body = struct.pack("!HHHH", 33000, 4789, 16 + len(inner), 0) + struct.pack("!II", 0x08000000, 42 << 8) + inner
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    if outer_csum:
        check = ks.csum(ks.pseudo(src, dst, 17, len(body)) + body) or 0xFFFF
        body = body[:6] + struct.pack("!H", check) + body[8:]
    return ks.ether(ks.ip_wrap(body, 17, src=src, dst=dst, ip_id=50 + i))


@needs_kernel
def test_vxlan_super_packets_of_the_kernel_split_back_byte_for_byte():
    # a VXLAN device in the namespace registers the UDP tunnel GRO handler on
    # port 4789: the kernel merges the inner TCP flow under the outer headers
    for outer_csum in (False, True):
        frames = [_vxlan(i, outer_csum) for i in range(8)]
        with KernelSession() as session:
            session.ns.ns_exec("ip", "link", "add", "vx0", "type", "vxlan", "id", "42", "dstport", "4789",
                               "nolearning")
            session.ns.ns_exec("ip", "link", "set", "vx0", "up")
            run = session.replay(frames)
        # (the oracle cannot trace packets through VXLAN, so it has no `covers` here)
        (p,) = run.packets
        assert len(p.data) == sum(len(f) for f in frames) - 7 * (14 + 20 + 8 + 8 + 14 + 20 + 20)
        outer_check = struct.unpack_from("!H", p.data, 40)[0]
        assert (outer_check != 0) == outer_csum
        gso_type = ("tcpv4", "udp_tunnel_csum" if outer_csum else "udp_tunnel")
        assert segment(p.data, 1, 1000, gso_type) == frames
        assert segment(p.data, 1, 1000) == frames           # recognised by port and checksum field alone


@needs_kernel
def test_ip_in_ip_super_packets_of_the_kernel_split_back():
    outer_src, outer_dst = bytes([10, 7, 0, 1]), bytes([10, 7, 0, 2])
    ipip = [ks.ether(ks.ip_wrap(ks.tcp(1000, seq=1 + i * 1000, ip_id=i, raw=True), 4, src=outer_src,
                                dst=outer_dst, ip_id=900 + i)) for i in range(12)]
    sit = [ks.ether(ks.ip_wrap(ks.tcp(1000, seq=1 + i * 1000, family=6, raw=True), 41, src=outer_src,
                               dst=outer_dst, ip_id=300 + i)) for i in range(12)]
    with KernelSession() as session:
        runs = [(frames, session.replay(frames)) for frames in (ipip, sit)]
    for frames, run in runs:
        assert run.reliable
        assert [len(p.covers) for p in run.packets] == [12]
        result, supers = _verify(frames, run.packets)
        assert result.ok, result.message
        p = run.packets[0]
        segs = segment(p.data, 1, p.gso_size, p.gso_type)
        # all but the inner TCP checksum (the kernel leaves the seed), byte for byte
        inner_check = 14 + 20 + (20 if frames is ipip else 40) + 16
        assert [s[:inner_check] + s[inner_check + 2:] for s in segs] == \
            [f[:inner_check] + f[inner_check + 2:] for f in frames]
