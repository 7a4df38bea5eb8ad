"""The 8 GRO buckets, checked against the real kernel: ``grotool kernel --rss``
(every injected frame carries grotool's RSS hash, set by an eBPF program on the
sending veth) against ``grotool replay --device veth --rss``, packet for packet
in delivery order.

The hand-made cases state their result exactly (which flows collide, who is
evicted, the end-of-poll order bucket by bucket); the random ones (9 to 64
interleaved flows) require kernel == simulation.  Marked `kernel`: skipped off
root, required in CI.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kernel_support as ks
from grotool import scenarios as S
from grotool.compare import compare_captures
from grotool.errors import EnvironmentProblem
from grotool.engine import Settings, simulate
from grotool.engine.config import DEFAULT_RSS_KEY
from grotool.oracle import bpf, netns, run_kernel_replay
from grotool.oracle.kernel import KernelSession, parse
from grotool.replay import replay

pytestmark = [pytest.mark.kernel, pytest.mark.skipif(ks.kernel_skip_reason() is not None,
                                                     reason=f"real-kernel test skipped: {ks.kernel_skip_reason()}")]
ROOT = Path(__file__).resolve().parent.parent
OTHER_KEY = bytes(range(1, 41))
HASH = bpf.FrameHasher(DEFAULT_RSS_KEY)


bucket = ks.rss_bucket
sports_in_bucket = ks.sports_in_bucket


def seg(sport: int, k: int, family: int = 4, **kw) -> bytes:
    return ks.tcp(ks.MSS, seq=1 + k * ks.MSS, sport=sport, ip_id=k, family=family, **kw)


def machine_settings(**kw) -> Settings:
    config = netns.kernel_config()
    return Settings(device="veth", vlan_gro=config.get("CONFIG_VLAN_8021Q", "y") != "n",
                    hz=int(config.get("CONFIG_HZ", "250")), **kw)


def describe(frame: bytes):
    p = parse(frame)
    return ("bytes", frame) if p is None else (p.flow, p.seq, p.payload)


@pytest.fixture(scope="module")
def session():
    with KernelSession(rss_key=DEFAULT_RSS_KEY, max_seconds=3600) as ks_:
        yield ks_


def kernel_view(session, frames, **kw):
    run = session.replay(frames, **kw)
    assert run.reliable, run.warnings
    return [(describe(p.data), p.segs, tuple(p.covers)) for p in run.packets]


def sim_view(frames, key=DEFAULT_RSS_KEY, rss=True, **kw):
    settings = machine_settings(veth_rss=rss, rss_key=key, **kw)
    recs = [(i, f, len(f)) for i, f in enumerate(frames)]
    return [(describe(d.data), d.segs, tuple(d.indices)) for d in simulate(recs, 1, settings)]


def assert_same(kernel, sim, label=""):
    if kernel != sim:
        for i, (k, s) in enumerate(zip(kernel, sim)):
            if k != s:
                raise AssertionError(f"{label}: first difference at delivered packet {i}:\n"
                                     f"  kernel {k[1]} segs covering {k[2]}\n  sim    {s[1]} segs covering {s[2]}")
        raise AssertionError(f"{label}: kernel delivered {len(kernel)} packets, simulation {len(sim)}")


def shape(view):
    """(segments, input frames covered) per delivered packet."""
    return [(segs, covers) for _, segs, covers in view]


# =============================================================================
# exact cases
# =============================================================================
def test_the_hash_reaches_gro_nine_flows_merge_only_when_spread(session):
    """Without a hash the 9th flow evicts the oldest of one shared bucket, round after
    round; with the RSS hash the 9 flows sit in different buckets and all merge, and
    the end-of-poll flush delivers them bucket by bucket."""
    sports = [sports_in_bucket(b, 1)[0] for b in (6, 2, 0, 7, 3, 5, 1, 4)] + [sports_in_bucket(2, 2)[1]]
    frames = [seg(s, k) for k in range(5) for s in sports]
    with KernelSession() as plain:
        no_hash = plain.replay(frames)
    assert [(p.gso_segs, p.covers) for p in no_hash.packets] == [(1, [i]) for i in range(45)]
    got = kernel_view(session, frames)
    order = sorted(range(9), key=lambda f: (bucket(frames[f]), f))
    assert order == [2, 6, 1, 8, 4, 7, 5, 0, 3]      # buckets 0, 1, 2 (older first), 3, 4, 5, 6, 7
    assert shape(got) == [(5, tuple(range(f, 45, 9))) for f in order]
    assert_same(got, sim_view(frames), "nine spread flows")
    assert_same([(describe(p.data), p.gso_segs, tuple(p.covers)) for p in no_hash.packets],
                sim_view(frames, rss=False), "nine flows, no hash")


def test_colliding_flows_overfill_one_bucket_while_others_are_empty(session):
    """Ten flows hashed to bucket 5: each arrival past the 8th evicts the oldest held
    packet, so nothing merges and everything comes out in arrival order.  A flow in
    bucket 2 next to them is untouched and merges."""
    ten = sports_in_bucket(5, 10)
    frames = [seg(s, k) for k in range(4) for s in ten]
    got = kernel_view(session, frames)
    assert shape(got) == [(1, (i,)) for i in range(40)]
    assert_same(got, sim_view(frames), "ten in one bucket")

    eight = ten[:8]
    other = sports_in_bucket(2, 1)[0]
    frames = [seg(s, k) for k in range(4) for s in eight + [other]]
    got = kernel_view(session, frames)
    # bucket 2 first, then bucket 5's eight aggregates oldest first
    assert shape(got) == [(4, tuple(range(8, 36, 9)))] + [(4, tuple(range(f, 36, 9))) for f in range(8)]
    assert_same(got, sim_view(frames), "eight in one bucket plus one")


def test_eviction_takes_the_first_held_not_the_least_recently_merged(session):
    """Eight flows held in bucket 3; flow 0 then merges two more segments (it is the
    most recently active).  The 9th flow still evicts flow 0: the oldest entry of the
    bucket list is the one held first (gro_flush_oldest), whatever merged since."""
    nine = sports_in_bucket(3, 9)
    frames = [seg(s, 0) for s in nine[:8]]                       # 0..7 held, flow 0 oldest
    frames += [seg(nine[0], 1), seg(nine[0], 2)]                  # 8, 9: merged into flow 0
    frames += [seg(nine[8], 0)]                                   # 10: evicts flow 0 (3 segments)
    frames += [seg(nine[1], 1)]                                   # 11: merges into flow 1
    frames += [seg(nine[0], 3)]                                   # 12: flow 0 again: evicts flow 1
    got = kernel_view(session, frames)
    assert shape(got) == [(3, (0, 8, 9)), (2, (1, 11))] + [(1, (i,)) for i in range(2, 8)] + [(1, (10,)), (1, (12,))]
    assert_same(got, sim_view(frames), "eviction order")


def test_end_of_poll_flush_goes_by_bucket_index_then_age(session):
    """Flows arrive in descending bucket order, two per bucket; the poll's end
    delivers bucket 0 first and, inside a bucket, the older flow first."""
    pairs = {b: sports_in_bucket(b, 2) for b in range(8)}
    flows = [s for b in range(7, -1, -1) for s in pairs[b]]
    frames = [seg(s, k) for k in range(3) for s in flows]
    got = kernel_view(session, frames)
    expected_flows = [s for b in range(8) for s in pairs[b]]
    assert [parse_sport(d) for d, _, _ in got] == expected_flows
    assert [segs for _, segs, _ in got] == [3] * 16
    assert_same(got, sim_view(frames), "flush order")


def parse_sport(described) -> int:
    return described[0][3]


def test_ipv6_flows_spread_over_buckets(session):
    sports = [sports_in_bucket(b, 1, family=6)[0] for b in (4, 0, 5, 1)] + sports_in_bucket(6, 3, family=6)
    sports += [sports_in_bucket(1, 2, family=6)[1], sports_in_bucket(0, 2, family=6)[1]]
    frames = [seg(s, k, family=6) for k in range(6) for s in sports]
    got = kernel_view(session, frames)
    order = sorted(range(9), key=lambda f: (bucket(frames[f]), f))
    assert order == [1, 8, 3, 7, 0, 2, 4, 5, 6]
    assert shape(got) == [(6, tuple(range(f, 54, 9))) for f in order]
    assert {tuple(p.gso_type) for p in session.replay(frames).packets} == {("tcpv6",)}
    assert_same(got, sim_view(frames), "ipv6")


def test_non_ip_frames_have_hash_zero_and_go_up_at_once(session):
    """ARP (hash 0, no GRO handler) goes up where it arrives; it neither joins nor
    disturbs bucket 0, where eight flows are held."""
    eight = sports_in_bucket(0, 8)
    frames = []
    for k in range(3):
        frames += [seg(s, k) for s in eight]
        frames.append(ks.arp_frame())
    assert HASH(ks.arp_frame()) == 0
    got = kernel_view(session, frames)
    arps = [8, 17, 26]
    assert shape(got) == [(1, (i,)) for i in arps] + [(3, (f, f + 9, f + 18)) for f in range(8)]
    assert_same(got, sim_view(frames), "non-IP")


def test_tunnel_flows_share_the_outer_pair_hash(session):
    """IP-in-IP hashes by the outer address pair: ten inner flows of one tunnel
    collide in one bucket and evict each other; the same ten flows bare spread out."""
    def inner(sport, k):
        return S.tcp_frame(sport=sport, seq=1 + k * 1000, payload=1000, ip_id=k,
                           outer={"src": "172.16.0.1", "dst": "172.16.0.2"})

    sports = list(range(41000, 41010))
    frames = [inner(s, k) for k in range(3) for s in sports]
    assert len({bucket(f) for f in frames}) == 1
    got = kernel_view(session, frames)
    assert shape(got) == [(1, (i,)) for i in range(30)]
    assert_same(got, sim_view(frames), "ipip")
    bare = [S.tcp_frame(sport=s, seq=1 + k * 1000, payload=1000, ip_id=k) for k in range(3) for s in sports]
    got = kernel_view(session, bare)
    order = sorted(range(10), key=lambda f: (bucket(bare[f]), f))
    assert [bucket(bare[f]) for f in order] == [0, 1, 2, 2, 3, 3, 6, 6, 7, 7]
    assert shape(got) == [(3, (f, f + 10, f + 20)) for f in order]
    assert_same(got, sim_view(bare), "bare")


def test_the_key_is_honoured(tmp_path):
    """Another key, another placement: the kernel follows the key it was given."""
    sports = list(range(42000, 42012))
    frames = [seg(s, k) for k in range(5) for s in sports]
    with KernelSession(rss_key=OTHER_KEY) as other:
        got = kernel_view(other, frames)
    assert_same(got, sim_view(frames, key=OTHER_KEY), "other key")
    assert got != sim_view(frames, key=DEFAULT_RSS_KEY)


# =============================================================================
# 9 to 64 interleaved flows
# =============================================================================
def interleaved(seed: int, n_flows: int, n_frames: int, rounds: bool = False):
    """TCP flows (IPv4 and IPv6) in random bursts (``rounds``: one segment of each
    flow per round, in a shuffled order, so that a poll sees up to 64 flows), with
    PSH, small segments, pure ACKs, gaps, ACK changes; UDP datagrams, ICMP, IPv4
    fragments and ARP in between."""
    rng = random.Random(seed)
    flows = [{"family": rng.choice((4, 4, 6)), "sport": 20000 + rng.randrange(40000), "seq": rng.randrange(1 << 32),
              "ack": 1000, "id": rng.randrange(65536)} for _ in range(n_flows)]
    frames = []
    turn = []
    while len(frames) < n_frames:
        r = rng.random()
        if r < 0.03:
            frames.append(ks.arp_frame())
            continue
        if r < 0.06:
            frames.append(ks.udp(rng.randint(10, 1400), sport=rng.choice((5000, 5001, 5002)), salt=len(frames),
                                 family=rng.choice((4, 6))))
            continue
        if r < 0.07:
            frames.append(S.icmp_echo_frame())
            continue
        if r < 0.08:
            frames.append(S.tcp_frame(sport=flows[0]["sport"], frag=(True, 0), df=False))
            continue
        if rounds:
            if not turn:
                turn = rng.sample(flows, len(flows))
            f = turn.pop()
        else:
            f = rng.choice(flows)
        for _ in range(1 if rounds else rng.choice((1, 1, 2, 3, 5))):
            payload, flags = ks.MSS, ks.ACK
            x = rng.random()
            if x < 0.07:
                flags |= ks.PSH
            elif x < 0.10:
                payload = rng.randint(1, ks.MSS - 1)
            elif x < 0.12:
                payload = 0
            elif x < 0.14:
                f["seq"] = (f["seq"] + ks.MSS) & 0xFFFFFFFF
            elif x < 0.17:
                f["ack"] += 1
            frames.append(ks.tcp(payload, seq=f["seq"], ack=f["ack"], sport=f["sport"], flags=flags,
                                 family=f["family"], ip_id=f["id"]))
            f["seq"] = (f["seq"] + payload) & 0xFFFFFFFF
            f["id"] = (f["id"] + 1) & 0xFFFF
    return frames[:n_frames]


CASES = [(9, 300), (12, 300), (16, 400), (24, 400), (33, 500), (48, 600), (64, 800), (64, 1200)]


@pytest.mark.parametrize("rounds", [False, True], ids=["bursts", "rounds"])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("n_flows,n_frames", CASES, ids=[f"{n}flows" for n, _ in CASES])
def test_interleaved_flows_match_kernel(session, n_flows, n_frames, seed, rounds):
    frames = interleaved(1000 * n_flows + seed, n_flows, n_frames, rounds)
    got = kernel_view(session, frames)
    assert_same(got, sim_view(frames), f"{n_flows} flows, seed {seed}")
    assert sorted(i for _, _, covers in got for i in covers) == list(range(len(frames)))


def test_nic_device_matches_kernel_rss(session):
    """The default nic device, with moderation that makes each poll take 64 frames
    as the oracle's do, delivers what the kernel does."""
    frames = interleaved(6464, 64, 700, rounds=True)
    recs = [(i * 10, f, len(f)) for i, f in enumerate(frames)]
    config = netns.kernel_config()
    settings = Settings(device="nic", rx_frames=64, rx_usecs=1_000_000, hz=int(config.get("CONFIG_HZ", "250")),
                        vlan_gro=config.get("CONFIG_VLAN_8021Q", "y") != "n")
    nic = [(describe(d.data), d.segs, tuple(d.indices)) for d in simulate(recs, 1, settings)]
    assert_same(kernel_view(session, frames), nic, "nic device")


@pytest.mark.parametrize("csum", ["trust", "verify"])
def test_checksum_modes_with_rss_match_kernel(session, csum):
    """trust sends a virtio_net_hdr before each frame: the mark rides along all the same."""
    frames = interleaved(99, 20, 300, rounds=True)
    frames[10] = ks.tcp(ks.MSS, seq=5, sport=44444, check="bad")
    assert_same(kernel_view(session, frames, csum=csum), sim_view(frames, csum=csum), csum)


@pytest.mark.parametrize("batch", [32, 17])
def test_smaller_polls_match_kernel(session, batch):
    frames = interleaved(77 + batch, 24, 400)
    assert_same(kernel_view(session, frames, batch=batch), sim_view(frames, budget=batch), f"batch {batch}")


def test_bulk_flows_match_kernel(session):
    frames = [f for _, (_, f) in zip(range(1500), S.bulk_flows(40, 60, interleave="round_robin", seed=9,
                                                                 family="mixed"))]
    got = kernel_view(session, frames)
    assert_same(got, sim_view(frames), "40 bulk flows")
    # 40 flows over 8 buckets: some merging survives, unlike the single shared bucket
    assert sum(1 for _, segs, _ in got if segs > 1) > 0


# =============================================================================
# the command line, files, determinism and cleanup
# =============================================================================
def cli(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "grotool", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def mine(pid):
    return [n for n in ks.grotool_netns() if n.startswith(f"{netns.PREFIX}{pid}-")]


def test_cli_kernel_rss_against_replay_rss_files_deterministic(tmp_path):
    frames = interleaved(4242, 30, 500)
    src = tmp_path / "in.pcap"
    ks.write_pcap(src, frames)
    outs = []
    for i in range(2):
        kpcap, kjson = tmp_path / f"k{i}.pcap", tmp_path / f"k{i}.json"
        proc = subprocess.run([sys.executable, "-m", "grotool", "kernel", "-q", "--rss", str(src), str(kpcap),
                               "--json", str(kjson)], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append((kpcap.read_bytes(), json.loads(kjson.read_text())))
    assert outs[0][0] == outs[1][0]                                   # byte-identical
    assert outs[0][1]["packets"] == outs[1][1]["packets"]
    doc = outs[0][1]
    assert doc["settings"]["rss"] is True and doc["settings"]["rss_key"] == DEFAULT_RSS_KEY.hex()
    assert doc["reliable"] is True and doc["summary"]["frames_in"] == 500
    spcap, sjson = tmp_path / "s.pcap", tmp_path / "s.jsonl"
    replay(str(src), str(spcap), machine_settings(veth_rss=True), packets_path=str(sjson))
    result = compare_captures(str(tmp_path / "k0.pcap"), str(spcap), require_order=True,
                              sidecar_a=str(tmp_path / "k0.json"), sidecar_b=str(sjson))
    assert result.identical, [f for f in result.to_json()["flows"] if f["status"] != "identical"][:2]
    # the same capture without --rss is a different result (one shared bucket)
    plain = run_kernel_replay(str(src), str(tmp_path / "plain.pcap"))
    assert (tmp_path / "plain.pcap").read_bytes() != outs[0][0] and plain.settings["rss"] is False


def own_programs():
    """This process's hash programs (the module's shared session holds one)."""
    return len(bpf.our_programs(os.getpid()))


def programs_back_to(count, timeout=2.0):
    return wait_for(lambda: own_programs() == count, timeout)


def test_nothing_left_behind_after_a_run_or_an_exception():
    before, spaces = own_programs(), mine(os.getpid())
    with KernelSession(rss_key=DEFAULT_RSS_KEY) as s:
        assert own_programs() == before + 1 and len(mine(os.getpid())) == len(spaces) + 1
        s.replay([seg(30000, 0)])
    assert programs_back_to(before) and mine(os.getpid()) == spaces
    with pytest.raises(RuntimeError):
        with KernelSession(rss_key=DEFAULT_RSS_KEY):
            assert own_programs() == before + 1
            raise RuntimeError("boom")
    assert programs_back_to(before) and mine(os.getpid()) == spaces


def test_a_program_that_cannot_attach_is_an_environment_problem_and_cleans_up(monkeypatch):
    before, spaces = own_programs(), mine(os.getpid())

    def refuse(prog_fd, ifindex):
        raise EnvironmentProblem("grotool kernel --rss: attaching the eBPF program failed: Invalid argument")

    monkeypatch.setattr(bpf, "attach_egress", refuse)
    with pytest.raises(EnvironmentProblem, match="attaching the eBPF program failed") as info:
        with KernelSession(rss_key=DEFAULT_RSS_KEY):
            pass
    assert info.value.exit_code == 4
    assert programs_back_to(before) and mine(os.getpid()) == spaces


def test_a_program_the_verifier_refuses_is_an_environment_problem(monkeypatch):
    monkeypatch.setattr(bpf, "PROGRAM", bpf.PROGRAM[:8] + bpf._insn(0x85, imm=1_000_000) + bpf.PROGRAM[16:])
    with pytest.raises(EnvironmentProblem, match=r"loading the eBPF program failed: .+ \(invalid func .+\)") as info:
        bpf.load_program()
    assert info.value.exit_code == 4 and "\n" not in str(info.value)


def long_input(tmp_path, n=3000):
    src = tmp_path / "long.pcap"
    ks.write_pcap(src, [ks.tcp(100, seq=1 + i * 100, ip_id=i, sport=30000 + i % 40) for i in range(n)])
    return src


def wait_for(predicate, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGKILL, -9)])
def test_signal_mid_run_leaves_no_program(tmp_path, sig, code):
    out = tmp_path / "o.pcap"
    proc = cli("kernel", "-q", "--rss", "--batch", "1", str(long_input(tmp_path)), str(out))
    try:
        assert wait_for(lambda: bpf.our_programs(proc.pid)), "the run never loaded its program"
        time.sleep(0.3)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert proc.returncode == code, err.decode()
    assert b"Traceback" not in err and not out.exists()
    assert bpf.our_programs(proc.pid, wait=2.0) == []        # fds closed, even by SIGKILL: program freed
    left = mine(proc.pid)
    if sig == signal.SIGKILL:
        assert len(left) == 1                                 # the next run removes it (stale pid)
        subprocess.run(["ip", "netns", "del", left[0]], capture_output=True)
    else:
        assert left == []
