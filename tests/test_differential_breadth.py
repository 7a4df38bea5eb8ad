"""UDP GRO, fraglist GRO and GRE against the real kernel, byte for byte.

Each case replays crafted traffic through `grotool kernel`'s machinery (veth
in a private namespace) and through the simulation under the same host
state and checksum mode; every delivered packet must be identical: bytes,
input frames covered, segment count, gso_size, and the kernel's GSO type
must be among the simulation's (the capture socket's virtio header can only
name tcpv4/tcpv6/udp_l4).
"""

import pytest

import breadth_frames as F
from grotool.engine import Settings, simulate
from grotool.oracle import netns, replay_frames

pytestmark = pytest.mark.kernel

# kernel --udp-gro mode -> the simulation's host state
HOST = {
    "off": {},
    "forward": {"udp_gro_forwarding": True},
    "fraglist": {"rx_gro_list": True},
}
CASES = [
    ("udp", F.udp_mixed, "off", "auto"),
    ("udp", F.udp_mixed, "forward", "auto"),
    ("udp", F.udp_mixed, "forward", "trust"),
    ("udp", F.udp_mixed, "fraglist", "auto"),
    ("udp", F.udp_mixed, "fraglist", "verify"),
    ("tcp", F.tcp_for_fraglist, "fraglist", "auto"),
    ("tcp", F.tcp_for_fraglist, "fraglist", "trust"),
    ("flagged", F.flagged_for_fraglist, "fraglist", "auto"),
    ("flagged", F.flagged_for_fraglist, "fraglist", "trust"),
    ("flagged", F.flagged_for_fraglist, "forward", "verify"),
    ("gre", F.gre_mixed, "off", "auto"),
    ("gre", F.gre_mixed, "off", "trust"),
    ("gre", F.gre_mixed, "fraglist", "verify"),
]


def machine_settings(**kw) -> Settings:
    config = netns.kernel_config()
    return Settings(device="veth", vlan_gro=config.get("CONFIG_VLAN_8021Q", "y") != "n",
                    hz=int(config.get("CONFIG_HZ", "250")), **kw)


def assert_identical(frames, kernel, sim, label):
    assert sum(p.segs for p in kernel) == len(frames), f"{label}: kernel lost frames"
    for i, (k, s) in enumerate(zip(kernel, sim)):
        where = f"{label}: delivered packet {i} (kernel covers {k.covers}, simulation {list(s.indices)})"
        assert list(s.indices) == k.covers, where
        assert s.data == k.data, where + ": bytes differ"
        assert s.segs == k.segs, where
        assert (s.gso_size, set(k.gso_type) <= set(s.gso_type)) == (k.gso_size, True), where
    assert len(kernel) == len(sim), f"{label}: kernel delivered {len(kernel)} packets, simulation {len(sim)}"


@pytest.mark.parametrize("name,build,udp_gro,csum", CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES])
def test_breadth_matches_kernel(name, build, udp_gro, csum):
    frames = build()
    kernel = replay_frames(frames, csum=csum, udp_gro=udp_gro, require_reliable=True)
    settings = machine_settings(csum=csum, **HOST[udp_gro])
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, settings))
    assert_identical(frames, kernel, sim, f"{name} udp_gro={udp_gro} csum={csum}")
