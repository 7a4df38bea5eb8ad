"""BIG TCP against the real kernel: long bulk TCP flows replayed with the receiving
veth's gro_max_size / gro_ipv4_max_size set (grotool kernel --gro-max-size,
--gro-ipv4-max-size) and simulated with the same Settings under the oracle's
kernel profile; every delivered packet must be identical (bytes, frames
covered, segment count, gso_size).

The segment counts asserted follow the rows of grotool/engine/kernels.py:
IPv4 aggregates pass 64 KiB (total length 0) from 6.3 (row C12); IPv6 ones
never do on veth with the current stables (row C13: a frame a packet socket
injects has 2 bytes before its Ethernet header, skb_gro_receive wants 8).
"""

import pytest

import kernel_support as ks
from grotool.engine import simulate
from grotool.engine.config import ipv4_max_size_for
from grotool.engine.kernels import cached_profile
from grotool.oracle import HostState, KernelLacksFeature
from kernel_support import oracle_kernel_profile, oracle_replay_frames as replay_frames
from test_differential_breadth import assert_identical, machine_settings

pytestmark = pytest.mark.kernel

SMALL = (60, 1448)       # 60 segments of 1448 bytes: 86880 bytes of payload
JUMBO = (30, 8000)       # 30 segments of 8000 bytes: 240000


def runs(n, per):
    """n segments aggregated ``per`` at a time."""
    return [per] * (n // per) + ([n % per] if n % per else [])


# (family, (segments, mss), gro_max_size, gro_ipv4_max_size, segment counts with IPv4 BIG TCP (row C12),
#  without it (None: the kernel has no gro_ipv4_max_size to set))
# 64 KiB holds 45 segments of 1448 (40 + 45 * 1448 < 65536) or 8 of 8000; 185000 holds 23 of 8000;
# 16000 holds 11 of 1448 and one of 8000
CASES = [
    (4, SMALL, 185000, 185000, [60], None),
    (6, SMALL, 185000, 185000, [45, 15], None),
    (4, JUMBO, 185000, 185000, [23, 7], None),
    (6, JUMBO, 185000, 185000, runs(30, 8), None),
    (4, SMALL, 185000, 16000, runs(60, 11), None),
    # gro_max_size alone: above 64 KiB it leaves gro_ipv4_max_size at 65536 (netif_set_gro_max_size)
    (4, SMALL, 185000, None, [45, 15], [45, 15]),
    (6, SMALL, 185000, None, [45, 15], [45, 15]),
    (4, JUMBO, 185000, None, runs(30, 8), runs(30, 8)),
    # at most 64 KiB it sets both
    (4, SMALL, 16000, None, runs(60, 11), runs(60, 11)),
    (6, SMALL, 16000, None, runs(60, 11), runs(60, 11)),
    (4, JUMBO, 16000, None, [1] * 30, [1] * 30),
    (6, JUMBO, 16000, None, [1] * 30, [1] * 30),
    # the device as it comes (65536 both)
    (4, SMALL, None, None, [45, 15], [45, 15]),
    (6, JUMBO, None, None, runs(30, 8), runs(30, 8)),
]


def case_id(case):
    family, (n, mss), gro, gro4 = case[:4]
    return f"v{family}-{n}x{mss}-gro{gro or 'default'}-ipv4{gro4 or 'default'}"


def sim_settings(gro, gro4):
    gro = 65536 if gro is None else gro
    return machine_settings(csum="auto", gro_max_size=gro, gro_ipv4_max_size=ipv4_max_size_for(gro, gro4))


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_bigtcp_matches_kernel(case):
    family, (n, mss), gro, gro4, with_ipv4_bigtcp, without = case
    frames = ks.tcp_flow(n, mss=mss, family=family)
    host = HostState.build(gro_max_size=gro, gro_ipv4_max_size=gro4)
    ipv4_bigtcp = cached_profile(oracle_kernel_profile()).holds("C12")
    expected = with_ipv4_bigtcp if ipv4_bigtcp else without
    if expected is None:
        # a kernel before 6.3 has no gro_ipv4_max_size: the oracle refuses (exit 4), sets nothing
        with pytest.raises(KernelLacksFeature, match="no gro_ipv4_max_size device setting"):
            replay_frames(frames, csum="auto", host=host, require_reliable=True)
        return
    kernel = replay_frames(frames, csum="auto", host=host, require_reliable=True)
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, sim_settings(gro, gro4)))
    label = case_id(case)
    assert [p.segs for p in kernel] == expected, label
    assert_identical(frames, kernel, sim, label)
    # the sidecar records the settings as read back from the device
    assert kernel.settings["gro_max_size"] == (65536 if gro is None else gro)
    if ipv4_bigtcp:
        assert kernel.settings["gro_ipv4_max_size"] == ipv4_max_size_for(65536 if gro is None else gro, gro4)
    else:
        assert kernel.settings["gro_ipv4_max_size"] is None
    assert kernel.settings["host"]["gro_max_size"] == gro
    for p in kernel:
        l3 = p.data[14:]
        if family == 4:
            # past 64 KiB an IPv4 aggregate's total length is 0 (inet_gro_complete)
            tot_len = int.from_bytes(l3[2:4], "big")
            assert tot_len == (0 if len(l3) > 65535 else len(l3)), label
        else:
            assert len(l3) - 40 <= 65535 and int.from_bytes(l3[4:6], "big") == len(l3) - 40, label


def test_kernel_command_sets_and_records_the_gro_sizes(tmp_path):
    """grotool kernel --gro-max-size/--gro-ipv4-max-size (here through the same
    run_kernel_replay the command calls, so also in a test VM): the sidecar's
    settings hold the values read back from the device, and the output is what
    replay --device veth writes with the same sizes."""
    import json

    from kernel_support import oracle_run_kernel_replay

    frames = ks.tcp_flow(60)
    ks.write_pcap(tmp_path / "in.pcap", frames)
    ipv4_bigtcp = cached_profile(oracle_kernel_profile()).holds("C12")
    host = HostState.build(gro_max_size=185000, gro_ipv4_max_size=185000 if ipv4_bigtcp else None)
    run = oracle_run_kernel_replay(str(tmp_path / "in.pcap"), str(tmp_path / "out.pcap"),
                                   str(tmp_path / "out.json"), csum="auto", host=host)
    assert run.reliable
    settings = json.loads((tmp_path / "out.json").read_text())["settings"]
    assert settings["gro_max_size"] == 185000
    assert settings["gro_ipv4_max_size"] == (185000 if ipv4_bigtcp else None)
    assert settings["host"]["gro_max_size"] == 185000
    _, out = ks.read_pcap(tmp_path / "out.pcap")
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1,
                        sim_settings(185000, 185000 if ipv4_bigtcp else None)))
    assert [data for _, data in out] == [d.data for d in sim]
    assert len(out) == (1 if ipv4_bigtcp else 2)


def test_kernel_command_rejects_a_gro_size_above_the_kernels_maximum():
    from click.testing import CliRunner

    from grotool.cli import main

    for option in ("--gro-max-size", "--gro-ipv4-max-size"):
        result = CliRunner().invoke(main, ["kernel", option, "524281", "in.pcap", "out.pcap"])
        assert result.exit_code == 2 and "524280" in result.output, result.output
