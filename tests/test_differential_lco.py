"""--csum auto and local checksum offload, against the real kernel.

A tunnel sender that leaves the inner TCP checksum to its NIC (the field holds
the pseudo-header seed) fills the outer UDP (VXLAN) or GRE checksum by local
checksum offload (lco_csum): right for the packet with the inner checksum filled
in, wrong for the captured bytes.  grotool kernel --csum auto fills the inner
seed before injecting, which makes the outer checksum right, and the kernel
merges; the simulation must count the outer checksum as valid too.

A sender that leaves the outer UDP checksum to its NIC as well leaves it as
its own pseudo-header seed: grotool kernel --csum auto fills in every seed of
the chain, innermost first, as the simulation takes each as offloaded.
"""

import struct

import pytest

import kernel_support as ks
import tunnel_frames as T
from grotool.engine import simulate
from grotool.oracle import HostState
from kernel_support import oracle_kernel_profile, oracle_replay_frames as replay_frames
from grotool.engine.kernels import cached_profile
from grotool.oracle.kernel import prepare_frame
from test_differential_breadth import assert_identical, machine_settings

pytestmark = pytest.mark.kernel


def inner_seed(frame: bytes, l3: int, family: int) -> bytes:
    """The frame with the inner TCP checksum (IP header at l3) replaced by its
    pseudo-header seed, every other byte (the outer checksum too) kept."""
    if family == 4:
        ihl = (frame[l3] & 15) * 4
        length = struct.unpack_from("!H", frame, l3 + 2)[0] - ihl
        src, dst, l4 = frame[l3 + 12:l3 + 16], frame[l3 + 16:l3 + 20], l3 + ihl
    else:
        length = struct.unpack_from("!H", frame, l3 + 4)[0]
        src, dst, l4 = frame[l3 + 8:l3 + 24], frame[l3 + 24:l3 + 40], l3 + 40
    return frame[:l4 + 16] + struct.pack("!H", ks.seed_value(src, dst, 6, length)) + frame[l4 + 18:]


def run(frames, host):
    kernel = replay_frames(frames, csum="auto", host=HostState.build(**host), require_reliable=True)
    seen = frames
    if not cached_profile(oracle_kernel_profile()).holds("U6"):
        # before 6.9 the outer UDP seed reads the innermost IP header's address bytes (row U6):
        # under an IPv6 outer header those reach the inner TCP checksum, which grotool kernel
        # --csum auto filled in before injecting: simulate the frames as the kernel got them
        seen = [prepare_frame(f, "auto", vxlan_ports=host.get("vxlan_ports", ()))[0] for f in frames]
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(seen)], 1, machine_settings(csum="auto", **host)))
    return kernel, sim


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("inner_family", [4, 6])
def test_vxlan_outer_checksum_by_local_checksum_offload(family, inner_family):
    outer = 14 + (20 if family == 4 else 40) + 8 + 8 + 14
    frames = [inner_seed(f, outer, inner_family)
              for f in T.vxlan_tcp_flow(4, family=family, udp_csum=True, inner_family=inner_family)]
    kernel, sim = run(frames, {"vxlan_ports": (4789,)})
    assert [p.covers for p in kernel] == [[0, 1, 2, 3]]
    assert_identical(frames, kernel, sim, f"vxlan lco {family}/{inner_family}")


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("teb", [False, True])
def test_gre_checksum_by_local_checksum_offload(family, teb):
    inner = 14 + (20 if family == 4 else 40) + 8 + (14 if teb else 0)
    frames = [inner_seed(f, inner, 4) for f in T.gre_tcp_flow(4, family=family, csum=True, teb=teb)]
    kernel, sim = run(frames, {})
    assert [p.covers for p in kernel] == [[0, 1, 2, 3]]
    assert_identical(frames, kernel, sim, f"gre lco {family} teb={teb}")


def test_outer_checksum_wrong_even_after_the_fill_stays_bad():
    """An outer checksum that is right neither for the captured bytes nor with
    the inner seed filled in is bad: each frame goes up alone in both."""
    outer = 14 + 40 + 8 + 8 + 14
    frames = []
    for f in T.vxlan_tcp_flow(3, family=6, udp_csum=True):
        f = inner_seed(f, outer, 4)
        at = 14 + 40 + 6
        frames.append(f[:at] + struct.pack("!H", (struct.unpack_from("!H", f, at)[0] + 1) & 0xFFFF or 1) + f[at + 2:])
    kernel, sim = run(frames, {"vxlan_ports": (4789,)})
    # (a frame that goes up alone leaves the kernel with the seed filled in by
    # grotool kernel --csum auto, so only the grouping is compared)
    assert [p.covers for p in kernel] == [[0], [1], [2]]
    assert [(list(s.indices), s.reason) for s in sim] == [([i], "udp_csum_bad") for i in range(3)]


def outer_seed(frame: bytes, family: int) -> bytes:
    """The frame with the outer UDP checksum (IP header at 14) replaced by its
    pseudo-header seed, every other byte kept: what a sender leaves when the
    NIC is to fill the outer checksum."""
    l4 = 14 + (20 if family == 4 else 40)
    src, dst = (frame[26:30], frame[30:34]) if family == 4 else (frame[22:38], frame[38:54])
    length = struct.unpack_from("!H", frame, l4 + 4)[0]
    return frame[:l4 + 6] + struct.pack("!H", ks.seed_value(src, dst, 17, length)) + frame[l4 + 8:]


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("inner_family", [4, 6])
@pytest.mark.parametrize("inner", ["valid", "seed"])
def test_vxlan_outer_checksum_holding_its_seed(family, inner_family, inner):
    """An outer UDP checksum left as its pseudo-header seed is offloaded, as an
    inner one is: grotool kernel --csum auto fills both in (innermost first),
    the simulation takes both as valid, and the four frames merge in both."""
    outer = 14 + (20 if family == 4 else 40) + 8 + 8 + 14
    frames = []
    for f in T.vxlan_tcp_flow(4, family=family, udp_csum=True, inner_family=inner_family):
        if inner == "seed":
            f = inner_seed(f, outer, inner_family)
        frames.append(outer_seed(f, family))
    kernel, sim = run(frames, {"vxlan_ports": (4789,)})
    assert [p.covers for p in kernel] == [[0, 1, 2, 3]] and [p.segs for p in kernel] == [4]
    assert_identical(frames, kernel, sim, f"vxlan outer seed {family}/{inner_family} inner {inner}")
