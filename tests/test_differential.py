"""Differential tests: the real kernel (grotool kernel) against the simulation
(grotool replay --device veth), packet for packet, in delivery order.

Where they differ, the simulation is wrong until shown otherwise.  Marked
`kernel`: skipped off root, required in CI.
"""

import random
from pathlib import Path

import pytest

from grotool import scenarios as S
from grotool.compare import compare_captures
from grotool.engine import Settings, simulate
from grotool.io.capture import read_capture
from kernel_support import oracle_kernel_config, oracle_kernel_profile, oracle_replay_frames as replay_frames
from kernel_support import oracle_run_kernel_replay as run_kernel_replay
from grotool.oracle.kernel import parse
from grotool.replay import replay

pytestmark = pytest.mark.kernel
ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted((ROOT / "captures").glob("*.pcap")) + sorted((ROOT / "tests" / "data").glob("real-*.pcap"))


def machine_settings(**kw) -> Settings:
    """veth model with this kernel's build options (CONFIG_VLAN_8021Q may be off)."""
    config = oracle_kernel_config()
    vlan = config.get("CONFIG_VLAN_8021Q", "y") != "n"
    hz = int(config.get("CONFIG_HZ", "250"))
    kw.setdefault("kernel", oracle_kernel_profile())       # the profile of the oracle's release
    return Settings(device="veth", vlan_gro=vlan, hz=hz, **kw)


def describe(frame: bytes):
    p = parse(frame)
    if p is None:
        return ("bytes", frame)
    return (p.flow, p.seq, p.payload)


def kernel_view(frames, csum="auto"):
    run = replay_frames(frames, csum=csum)
    assert run.reliable, run.warnings
    return [(describe(p.data), p.segs, tuple(p.covers)) for p in run.packets]


def sim_view(frames, settings=None):
    settings = settings or machine_settings()
    recs = [(i, f, len(f)) for i, f in enumerate(frames)]
    return [(describe(d.data), d.segs, tuple(d.indices)) for d in simulate(recs, 1, settings)]


def assert_same(kernel, sim, label):
    if kernel != sim:
        for i, (k, s) in enumerate(zip(kernel, sim)):
            if k != s:
                raise AssertionError(f"{label}: first difference at delivered packet {i}:\n"
                                     f"  kernel {k[1]} segs covering {k[2]}\n  sim    {s[1]} segs covering {s[2]}")
        raise AssertionError(f"{label}: kernel delivered {len(kernel)} packets, simulation {len(sim)}")


SCENARIOS = S.all_scenarios(include_optional=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_selftest_scenario_matches_kernel(scenario):
    assert_same(kernel_view(scenario.frames), sim_view(scenario.frames), scenario.name)


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_capture_matches_kernel(path, tmp_path):
    kpcap, kjson = tmp_path / "kernel.pcap", tmp_path / "kernel.json"
    spcap, sjson = tmp_path / "sim.pcap", tmp_path / "sim.jsonl"
    run = run_kernel_replay(str(path), str(kpcap), str(kjson))
    assert run.reliable, run.warnings
    replay(str(path), str(spcap), machine_settings(), packets_path=str(sjson))
    result = compare_captures(str(kpcap), str(spcap), require_order=True, sidecar_a=str(kjson), sidecar_b=str(sjson))
    assert result.identical, [f for f in result.to_json()["flows"] if f["status"] != "identical"][:2]
    _, inp = read_capture(str(path))
    assert sum(p.segs for p in run.packets) == len(inp)


def mutated_traffic(seed: int, n: int = 300):
    """Several TCP flows (IPv4 and IPv6) interleaved in bursts, with the events
    that end aggregates sprinkled in: PSH, gaps, retransmits, TTL/TOS/hop-limit
    and window changes, ACK changes, pure ACKs, timestamps ticking, IP options,
    bad checksums, padding, SYN/RST/FIN, small segments, flow-label changes."""
    rng = random.Random(seed)
    flows = []
    for i in range(rng.randint(3, 11)):
        fam = rng.choice((4, 4, 6))
        flows.append({"family": fam, "sport": 20000 + i, "seq": rng.randrange(1 << 32), "ack": 1000,
                      "id": rng.randrange(65536), "ttl": 64, "tos": 0, "win": 512, "ts": 1, "fl": 0,
                      "mss": 1448 if fam == 4 else 1428})
    frames = []
    while len(frames) < n:
        f = rng.choice(flows)
        for _ in range(rng.randint(1, 12)):
            kw = {"family": f["family"], "sport": f["sport"], "dport": 5201, "ack": f["ack"], "window": f["win"],
                  "ttl": f["ttl"], "tos": f["tos"], "tcp_options": S.tcp_opts_ts(f["ts"], 7)}
            if f["family"] == 4:
                kw["ip_id"] = f["id"]
            else:
                kw["flow_label"] = f["fl"]
            size = f["mss"]
            flags = "A"
            r = rng.random()
            if r < 0.06:
                flags = "PA"
            elif r < 0.09:
                size = rng.randint(1, f["mss"] - 1)
            elif r < 0.12:
                size = 0                                   # pure ACK
            elif r < 0.13:
                flags = rng.choice(("S", "R", "FA", "UA"))
            elif r < 0.15:
                f["seq"] = (f["seq"] + rng.choice((1448, -1448, 7))) & 0xFFFFFFFF  # gap / retransmit
            elif r < 0.17:
                f["ttl"] = rng.choice((63, 64))
                kw["ttl"] = f["ttl"]
            elif r < 0.18:
                kw["tos"] = 0x03                           # one CE mark
            elif r < 0.20:
                f["win"] = rng.choice((512, 1024))
                kw["window"] = f["win"]
            elif r < 0.23:
                f["ack"] += 1448
                kw["ack"] = f["ack"]
            elif r < 0.27:
                f["ts"] += 1
                kw["tcp_options"] = S.tcp_opts_ts(f["ts"], 7)
            elif r < 0.28 and f["family"] == 4:
                kw["ip_options"] = S.ipv4_ts_option()
            elif r < 0.29:
                kw["bad_tcp_csum"] = True
            elif r < 0.30 and f["family"] == 6:
                f["fl"] = rng.randrange(1 << 20)
                kw["flow_label"] = f["fl"]
            elif r < 0.31 and f["family"] == 4:
                f["id"] = (f["id"] + 5) & 0xFFFF
                kw["ip_id"] = f["id"]
            if size and size < 20 and rng.random() < 0.5:
                kw["pad_to_60"] = True
            frames.append(S.tcp_frame(seq=f["seq"], payload=size, flags=flags, **kw))
            if flags != "S":
                f["seq"] = (f["seq"] + size) & 0xFFFFFFFF
            if f["family"] == 4:
                f["id"] = (f["id"] + 1) & 0xFFFF
            if rng.random() < 0.02:
                frames.append(S.icmp_echo_frame())
    return frames[:n]


@pytest.mark.parametrize("seed", range(12))
def test_mutated_multiflow_traffic_matches_kernel(seed):
    frames = mutated_traffic(seed)
    assert_same(kernel_view(frames, csum="verify"), sim_view(frames, machine_settings(csum="verify")), f"seed {seed}")


@pytest.mark.parametrize("interleave", ["round_robin", "bursty"])
def test_bulk_flows_match_kernel(interleave):
    frames = [f for _, f in zip(range(1500), (fr for _, fr in S.bulk_flows(
        12, 200, interleave=interleave, seed=3, family="mixed")))]
    assert_same(kernel_view(frames), sim_view(frames), interleave)


@pytest.mark.parametrize("batch,csum", [(32, "auto"), (17, "auto"), (64, "trust"), (64, "fix"), (40, "verify")])
def test_poll_size_and_checksum_modes_match_kernel(batch, csum):
    """The oracle's batch is the simulation's budget; its --csum modes mirror replay's."""
    frames = mutated_traffic(100 + batch, n=240)
    run = replay_frames(frames, csum=csum, batch=batch)
    assert run.reliable, run.warnings
    kernel = [(describe(p.data), p.segs, tuple(p.covers)) for p in run.packets]
    # fix recomputes every checksum before injecting: the simulation's trust
    sim_csum = {"fix": "trust", "auto": "auto", "trust": "trust", "verify": "verify"}[csum]
    assert_same(kernel, sim_view(frames, machine_settings(budget=batch, csum=sim_csum)), f"batch {batch} {csum}")
