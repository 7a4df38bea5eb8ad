"""`tcpdump -i any` captures of real traffic against the real kernel.

Two network namespaces joined by a veth pair; iperf3 sends from one to the
other for a second; tcpdump -i any in the receiving namespace records it as
Linux cooked captures, SLL (113) and SLL2 (276) at once.  Each holds the
received segments and the receiver's own ACKs (packet type PACKET_OUTGOING).
The received frames go through the real kernel's GRO (grotool kernel); the
whole capture goes through grotool replay --device veth, which must pass the
ACKs outside GRO (reason outgoing) and deliver, for every received flow,
exactly the packets the kernel delivered: the same segments merged, in the
same order.  Marked `kernel`: needs root, iproute2, ethtool, tcpdump, iperf3.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from collections import defaultdict

import pytest

from grotool.io.capture import PcapWriter, read_capture
from grotool.linktypes import is_outgoing
from grotool.oracle import run_kernel_replay
from grotool.oracle.frames import parse, to_ethernet
from grotool.replay import replay

from test_differential import machine_settings

pytestmark = pytest.mark.kernel

LINKTYPES = {"LINUX_SLL": 113, "LINUX_SLL2": 276}
SENDER, RECEIVER = "10.198.0.1", "10.198.0.2"


def _run(*argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30, **kw)


@pytest.fixture(scope="module")
def cooked_captures(tmp_path_factory):
    """{link type: path} of one iperf3 run captured as SLL and SLL2."""
    missing = [tool for tool in ("tcpdump", "iperf3") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (apt-get install {' '.join(missing)})")
    out = tmp_path_factory.mktemp("cooked")
    tag = f"{os.getpid()}-{secrets.token_hex(3)}"
    snd, rcv = f"grocook-s{tag}", f"grocook-r{tag}"
    dumps = []
    try:
        _run("ip", "netns", "add", snd)
        _run("ip", "netns", "add", rcv)
        # the veth pair is made in one namespace and its peer moved straight into the other:
        # nothing in the root namespace, the addresses exist only in these two
        _run("ip", "-n", snd, "link", "add", "gc0", "type", "veth", "peer", "name", "gc1", "netns", rcv)
        for ns, dev, addr in ((snd, "gc0", SENDER), (rcv, "gc1", RECEIVER)):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            _run("ip", "-n", ns, "link", "set", dev, "up")
        # wire-sized segments leave the sender; the receiver records them before any GRO
        _run("ip", "netns", "exec", snd, "ethtool", "-K", "gc0", "tso", "off", "gso", "off")
        subprocess.run(["ip", "netns", "exec", rcv, "ethtool", "-K", "gc1", "gro", "off"], capture_output=True)
        server = subprocess.Popen(["ip", "netns", "exec", rcv, "iperf3", "-s", "-1", "-B", RECEIVER],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        paths = {}
        for name, linktype in LINKTYPES.items():
            path = out / f"iperf3-{name.lower()}.pcap"
            err = open(out / f"{name}.err", "w+")
            dumps.append((subprocess.Popen(["ip", "netns", "exec", rcv, "tcpdump", "-i", "any", "-y", name, "-s", "0",
                                            "-B", "8192", "--immediate-mode", "-U", "-w", str(path), "tcp"],
                                           stdout=subprocess.DEVNULL, stderr=err), err))
            paths[linktype] = path
        deadline = time.monotonic() + 10
        while not all("listening" in open(err.name).read() for _, err in dumps):
            assert time.monotonic() < deadline, "tcpdump did not start"
            time.sleep(0.1)
        time.sleep(0.5)                 # the server listens by now
        # 1 s at 30 Mbit/s in 16 KiB writes: ~2,600 segments, a PSH ending each write
        client = subprocess.run(["ip", "netns", "exec", snd, "iperf3", "-c", RECEIVER, "-t", "1", "-l", "16K",
                                 "-w", "64K", "-b", "30M"], capture_output=True, text=True, timeout=30)
        assert client.returncode == 0, client.stderr or client.stdout
        server.wait(timeout=10)
        time.sleep(0.3)
        for dump, _ in dumps:
            dump.send_signal(2)
            dump.wait(timeout=10)
        yield paths
    finally:
        for dump, err in dumps:
            if dump.poll() is None:
                dump.kill()
                dump.wait()
            err.close()
        for ns in (snd, rcv):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _flow_of(frame: bytes):
    p = parse(frame)
    return p.flow if p is not None else ("bytes",)


@pytest.mark.parametrize("linktype", sorted(LINKTYPES.values()))
def test_cooked_capture_matches_kernel_for_every_received_flow(cooked_captures, linktype, tmp_path):
    path = cooked_captures[linktype]
    lt, records = read_capture(str(path))
    assert lt == linktype
    received = [i for i, (_, data, _) in enumerate(records) if not is_outgoing(linktype, data)]
    outgoing = len(records) - len(received)
    assert len(records) > 1000 and outgoing > 50, (len(records), outgoing)
    only_received = tmp_path / "received.pcap"
    with PcapWriter(str(only_received), linktype) as writer:
        for i in received:
            writer.write(records[i][0], records[i][1])
    kernel = run_kernel_replay(str(only_received), None, None)
    assert kernel.reliable, kernel.warnings
    # per received flow, in delivery order: (segments, input records covered)
    want = defaultdict(list)
    for p in kernel.packets:
        want[_flow_of(p.data)].append((p.segs, tuple(received[i] for i in p.covers)))
    kernel_super = sum(1 for p in kernel.packets if p.segs > 1)
    # as captured, and with the two address-field bytes past the 6-byte address
    # made different in every record, as some kernels leave them: no part of the identity
    at = 12 if linktype == 113 else 18
    scrambled = tmp_path / "scrambled.pcap"
    with PcapWriter(str(scrambled), linktype) as writer:
        for i, (ts, data, _) in enumerate(records):
            writer.write(ts, data[:at] + (i * 40503 & 0xFFFF or 1).to_bytes(2, "big") + data[at + 2:])
    for capture in (path, scrambled):
        deliveries = []
        result = replay(str(capture), None, machine_settings(), observers=[deliveries.append])
        got = defaultdict(list)
        passed = []
        for d in deliveries:
            if d.reason == "outgoing":
                passed.extend(d.indices)
                continue
            got[_flow_of(to_ethernet(linktype, d.data))].append((d.segs, tuple(d.indices)))
        assert sorted(passed) == sorted(set(range(len(records))) - set(received))
        totals = result.document["totals"]
        assert totals["outgoing"] == outgoing
        assert set(got) == set(want)
        for flow in want:
            assert got[flow] == want[flow], (capture.name, flow)
        assert totals["super_packets"] == kernel_super > 100
        print(f"\n{capture.name} ({path.name}): {len(records)} records ({len(received)} received, {outgoing} "
              f"outgoing), super-packets kernel {kernel_super}, grotool {totals['super_packets']}")
