"""grotool kernel: the real kernel's GRO through veth in a private namespace.

Marked `kernel`: skipped off root, required (a failure) in CI (tests/conftest.py).
The numbers are what Linux 6.18 does (shared/spec/kernel-oracle.md section 5).
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grotool import scenarios as S
from grotool.errors import EnvironmentProblem
from grotool.io.capture import read_capture
from grotool.oracle import netns, replay_frames, run_kernel_replay
from grotool.oracle.kernel import parse

pytestmark = pytest.mark.kernel
ROOT = Path(__file__).resolve().parent.parent


def bulk(n=20, **kw):
    return [S.tcp_frame(4, seq=100 + i * 1448, payload=1448, ip_id=i, **{k: v(i) for k, v in kw.items()})
            for i in range(n)]


def segs(run):
    return [p.segs for p in run.packets]


def ours():
    """Namespaces of this process (other runs may be going on at the same time)."""
    return [n for n in netns.list_namespaces() if n.startswith(f"{netns.PREFIX}{os.getpid()}-")]


def test_one_flow_in_order_merges_into_one_super_packet():
    run = replay_frames(bulk(20))
    assert run.reliable and run.drops == {"capture_socket": 0, "veth_rx_dropped": 0, "veth_tx_dropped": 0}
    assert len(run.packets) == 1
    pkt = run.packets[0]
    assert (pkt.segs, pkt.gso_size, pkt.gso_type) == (20, 1448, "tcpv4")
    assert parse(pkt.data).payload == 28960
    assert pkt.covers == list(range(20))
    assert pkt.csum == "partial"


def test_psh_and_ttl_split_the_aggregate():
    psh = bulk(20, flags=lambda i: "PA" if i == 9 else "A")
    assert segs(replay_frames(psh)) == [10, 10]
    ttl = bulk(20, ttl=lambda i: 64 if i < 10 else 63)
    assert segs(replay_frames(ttl)) == [10, 10]


def test_budget_and_size_limit():
    # 64 frames per poll; 45 x 1448 is the most that fits in 65535 bytes of IP length
    run = replay_frames(bulk(100))
    assert segs(run) == [45, 19, 36]
    assert [b.frames for b in run.batches] == [64, 36]


def test_checksum_modes():
    bad = [S.tcp_frame(4, seq=100 + i * 1448, payload=1448, ip_id=i, bad_tcp_csum=True) for i in range(20)]
    assert segs(replay_frames(bad, csum="verify")) == [1] * 20
    assert segs(replay_frames(bad, csum="fix")) == [20]
    assert segs(replay_frames(bad, csum="trust")) == [20]
    # auto: only a field holding the pseudo-header seed is taken as offloaded
    assert segs(replay_frames(bad, csum="auto")) == [1] * 20


def test_ipv6_and_pure_acks():
    v6 = [S.tcp_frame(6, seq=100 + i * 1428, payload=1428) for i in range(10)]
    run = replay_frames(v6)
    assert [(p.segs, p.gso_type) for p in run.packets] == [(10, "tcpv6")]
    acks = [S.tcp_frame(4, seq=100, payload=0, ack=100 + i) for i in range(3)]
    assert segs(replay_frames(acks)) == [1, 1, 1]


def test_deterministic_and_leaves_nothing(tmp_path):
    src = ROOT / "captures" / "bulk-4flows.pcap"
    outs = []
    for i in range(2):
        out = tmp_path / f"k{i}.pcap"
        side = tmp_path / f"k{i}.json"
        run = run_kernel_replay(str(src), str(out), str(side))
        assert run.reliable
        outs.append((out.read_bytes(), side.read_text()))
    assert outs[0][0] == outs[1][0]
    _, recs = read_capture(str(tmp_path / "k0.pcap"))
    _, inp = read_capture(str(src))
    assert sum(p.segs for p in run.packets) == len(inp)
    assert len(recs) == len(run.packets)
    assert ours() == []


def test_stale_namespace_of_a_dead_process_is_removed():
    dead = 4_194_000
    while True:
        try:
            os.kill(dead, 0)
            dead += 1
        except ProcessLookupError:
            break
    name = f"{netns.PREFIX}{dead}-abcdef"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        replay_frames(bulk(2))
        assert name not in netns.list_namespaces()
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_sigterm_mid_run_cleans_up(tmp_path):
    src = tmp_path / "big.pcap"
    frames = [S.tcp_frame(4, sport=1000 + (i % 7), seq=100 + (i // 7) * 1448, payload=1448) for i in range(6000)]
    S.write_pcap(str(src), frames)
    proc = subprocess.Popen([sys.executable, "-m", "grotool", "kernel", "-q", str(src), str(tmp_path / "o.pcap")],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    mine = f"{netns.PREFIX}{proc.pid}-"
    deadline = time.time() + 20
    while time.time() < deadline and not any(n.startswith(mine) for n in netns.list_namespaces()):
        time.sleep(0.02)
    assert any(n.startswith(mine) for n in netns.list_namespaces()), "the run never created its namespace"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert b"Traceback" not in err
    assert not any(n.startswith(mine) for n in netns.list_namespaces())
    assert not (tmp_path / "o.pcap").exists()


def test_not_root_is_exit_4(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from grotool.cli import main

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(EnvironmentProblem, match="needs root"):
        netns.check_environment()
    result = CliRunner().invoke(main, ["kernel", str(ROOT / "captures" / "bulk-4flows.pcap"), str(tmp_path / "o")])
    assert result.exit_code == 4
    assert "needs root" in result.output and "Traceback" not in result.output


def test_missing_tool_is_exit_4(monkeypatch):
    import shutil

    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "ethtool" else real(tool))
    with pytest.raises(EnvironmentProblem, match="ethtool"):
        netns.check_environment()
