"""An IPv6 header whose version nibble is not 6, against the real kernel.

GRO takes an IPv6 header on the ethertype (0x86DD) or IP protocol (41) that
leads to it and never reads its version nibble (ipv6_gro_receive; only
inet_gro_receive checks IPv4's 0x45), and the simulation does the same.
grotool.dissect reports such a header as a problem and stops there, so the
oracle, which prepares frames from a dissection, used to leave them alone:
no NEEDS_CSUM under --csum trust, no seed filled in under --csum auto.  The
kernel then verified the checksum and sent every frame up alone while the
simulation merged them.  The oracle now reads the headers as GRO does
(frames.gro_dissect) and injects the nibble unchanged.
"""

import struct

import pytest

import kernel_support as ks
import tunnel_frames as T
from grotool.dissect import dissect
from grotool.engine import simulate
from grotool.oracle import HostState
from kernel_support import oracle_kernel_profile, oracle_replay_frames as replay_frames
from grotool.engine.kernels import cached_profile
from grotool.oracle import frames as fr
from grotool.oracle.kernel import VNET_HDR, prepare_frame
from test_differential_breadth import assert_identical, machine_settings

N = 4


def nibble(frame: bytes, at: int, version: int) -> bytes:
    """The frame with the IP version nibble of the header at ``at`` set to ``version``."""
    return frame[:at] + bytes([(version << 4) | (frame[at] & 0x0F)]) + frame[at + 1:]


def plain_flow(version: int, check=None):
    """N segments of one IPv6 TCP flow, version nibble ``version``."""
    return [nibble(f, 14, version) for f in ks.tcp_flow(N, family=6, check=check)]


def sit_flow(version: int, check=None, outer_family: int = 4, outer_version: int = None):
    """N segments of one IPv6 TCP flow in IPv4 (sit) or IPv6 (ip6ip6), protocol 41,
    the inner version nibble ``version`` (and the outer one ``outer_version``)."""
    out = []
    for i in range(N):
        inner = nibble(ks.tcp(ks.MSS, seq=1000 + i * ks.MSS, family=6, raw=True, check=check), 0, version)
        frame = ks.ether(ks.ip_wrap(inner, 41, family=outer_family, ip_id=i), outer_family)
        if outer_version is not None:
            frame = nibble(frame, 14, outer_version)
        out.append(frame)
    return out


VXLAN_INNER = 14 + 20 + 8 + 8 + 14          # the inner IPv6 header behind VXLAN over IPv4


def outer_udp_ok(frame: bytes) -> bool:
    """The outer UDP checksum (IPv4 header at 14, no options) verifies over the frame's bytes."""
    length = struct.unpack_from("!H", frame, 38)[0]
    return ks.csum(ks.pseudo(frame[26:30], frame[30:34], 17, length) + frame[34:34 + length]) == 0


def with_outer_udp_right(frame: bytes) -> bytes:
    length = struct.unpack_from("!H", frame, 38)[0]
    udp = frame[34:40] + b"\0\0" + frame[42:34 + length]
    value = ks.csum(ks.pseudo(frame[26:30], frame[30:34], 17, length) + udp) or 0xFFFF
    return frame[:40] + struct.pack("!H", value) + frame[42:]


def vxlan_flow(version: int, inner_check=None):
    """N segments of an inner IPv6 TCP flow (version nibble ``version``) in VXLAN
    over IPv4, the outer UDP checksum right over these very bytes, the inner
    TCP checksum "seed" or right."""
    out = []
    for f in T.vxlan_tcp_flow(N, family=4, udp_csum=True, inner_family=6):
        f = nibble(f, VXLAN_INNER, version)
        if inner_check == "seed":
            l4 = VXLAN_INNER + 40
            seed = ks.seed_value(f[VXLAN_INNER + 8:VXLAN_INNER + 24], f[VXLAN_INNER + 24:l4], 6, len(f) - l4)
            f = f[:l4 + 16] + struct.pack("!H", seed) + f[l4 + 18:]
        out.append(with_outer_udp_right(f))
    return out


# =============================================================================
# no privileges needed
# =============================================================================
def test_dissect_still_reports_the_nibble_and_the_oracle_reads_past_it():
    frame = plain_flow(7)[0]
    d = dissect(frame)
    assert d.problem == "IPv6 ethertype but IP version 7" and d.l4_proto is None    # unchanged for users
    p = fr.parse(frame)
    good = fr.parse(ks.tcp_flow(1, family=6)[0])
    assert p is not None and (p.l3, p.l4, p.family, p.proto, p.src, p.dst, p.sport, p.dport, p.seq, p.payload) \
        == (good.l3, good.l4, good.family, good.proto, good.src, good.dst, good.sport, good.dport, good.seq, 1448)
    inner = fr.parse(sit_flow(7, outer_family=6, outer_version=5)[0])
    assert inner is not None and (inner.l3, inner.l4, len(inner.outer)) == (54, 94, 1)
    # IPv4 is another matter: inet_gro_receive flushes anything but 0x45, and the
    # nibble is read behind 0x86DD or protocol 41 only, not behind 0x0800
    assert fr.parse(nibble(ks.tcp(100), 14, 5)) is None
    assert fr.parse(ks.ether(ks.tcp(100, family=6, raw=True), 4)) is None


def test_preparation_of_an_ipv6_header_with_another_version_nibble():
    bad = plain_flow(7, check="bad")[0]
    frame, vnet = prepare_frame(bad, "trust")
    assert frame == bad and VNET_HDR.unpack(vnet) == (1, 0, 0, 0, 54, 16)
    assert prepare_frame(plain_flow(4, check="seed")[0], "auto") == (plain_flow(4)[0], b"")
    assert prepare_frame(bad, "fix") == (plain_flow(7)[0], b"")
    assert prepare_frame(sit_flow(7, check="seed")[0], "auto") == (sit_flow(7)[0], b"")
    assert prepare_frame(bad, "verify") == (bad, b"")


def test_checksums_are_computed_over_the_nibble_the_frame_has():
    """The inner seed is filled in behind the nibble, and the outer UDP
    checksum, which covers the nibble, is recomputed over the frame's own
    byte (7), not over the 6 the oracle reads it as."""
    frame = vxlan_flow(7, "seed")[0]
    assert outer_udp_ok(frame)
    fixed, changed = fr.fix_seed_checksum(frame, vxlan_ports=(4789,))
    assert changed and fixed[VXLAN_INNER] >> 4 == 7 and outer_udp_ok(fixed)
    assert fixed == vxlan_flow(7)[0]


# =============================================================================
# the real kernel
# =============================================================================
def merged_as_one(n=4):
    """What a flow of n segments behind another version nibble becomes on the
    oracle's kernel: one packet, except from 6.10 to 6.17 (row L1 without L2),
    which check a header by its nibble and so take it for IPv4 with a constant
    ID and no DF: every segment alone."""
    profile = cached_profile(oracle_kernel_profile())
    if profile.holds("L1") and not profile.holds("L2"):
        return [[i] for i in range(n)]
    return [list(range(n))]


def as_injected(frames, csum, **ports):
    """The frames as the oracle gave them to the kernel: under --csum auto it fills
    an inner seed in, which a segment going up alone keeps (from 6.10 to 6.17 these
    flows go up one segment at a time)."""
    if csum != "auto" or len(merged_as_one()) == 1:
        return frames
    return [prepare_frame(f, "auto", **ports)[0] for f in frames]


def run(frames, csum):
    kernel = replay_frames(frames, csum=csum, host=HostState.build(), require_reliable=True)
    seen = as_injected(frames, csum)
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(seen)], 1, machine_settings(csum=csum)))
    return kernel, sim


@ks.needs_kernel
@pytest.mark.parametrize("csum,check", [("trust", "bad"), ("auto", "seed")])
@pytest.mark.parametrize("version", [4, 7])
def test_any_version_nibble_merges(version, csum, check):
    """trust merges bad checksums, auto fills seeds, whatever the nibble."""
    frames = plain_flow(version, check=check)
    kernel, sim = run(frames, csum)
    assert [p.covers for p in kernel] == merged_as_one()
    assert_identical(frames, kernel, sim, f"ipv6 version {version} {csum}")


@ks.needs_kernel
@pytest.mark.parametrize("csum,check", [("trust", "bad"), ("auto", "seed")])
@pytest.mark.parametrize("outer_family,outer_version", [(4, None), (6, 6), (6, 0)])
def test_ipv6_in_ip_behind_protocol_41(csum, check, outer_family, outer_version):
    frames = sit_flow(7, check, outer_family, outer_version)
    kernel, sim = run(frames, csum)
    assert [p.covers for p in kernel] == merged_as_one()
    assert_identical(frames, kernel, sim, f"proto 41 in IPv{outer_family} (nibble {outer_version}) {csum}")


@ks.needs_kernel
def test_bad_checksums_behind_another_nibble_stay_bad_under_auto():
    """The preparation reads past the nibble but still fills in only seeds."""
    frames = plain_flow(7, check="bad")
    kernel, sim = run(frames, "auto")
    assert [p.covers for p in kernel] == [[i] for i in range(N)]
    assert_identical(frames, kernel, sim, "ipv6 version 7 bad auto")


@ks.needs_kernel
def test_vxlan_inner_ipv6_with_another_nibble_and_its_seed():
    frames = vxlan_flow(7, "seed")
    kernel = replay_frames(frames, csum="auto", host=HostState.build(vxlan_ports=(4789,)), require_reliable=True)
    seen = as_injected(frames, "auto", vxlan_ports=(4789,))
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(seen)], 1,
                        machine_settings(csum="auto", vxlan_ports=(4789,))))
    assert [p.covers for p in kernel] == merged_as_one()
    assert_identical(frames, kernel, sim, "vxlan inner ipv6 version 7 auto")
