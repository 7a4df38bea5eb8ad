#!/usr/bin/env python3
"""Record small captures of real Linux TCP for grotool's differential tests.

Run as root from anywhere:  python3 tests/data/record_real_tcp.py [SCENARIO ...]

For each scenario it builds a private pair of network namespaces joined by one
veth pair, sends real TCP between Python sockets in the two namespaces, and
captures with tcpdump on the *sender's* veth, outgoing direction only.  The
result is what a receiver's GRO would be fed: MTU-sized segments exactly as the
Linux TCP stack emitted them.

* Namespaces are named ``grorec-s<pid>-<rand>`` / ``grorec-r<pid>-<rand>`` and
  removed in ``finally`` (and on SIGTERM/SIGHUP/SIGINT).  A pair left behind by
  a killed run (its pid no longer alive) is removed by the next run.  The veth
  pair is created inside the sender namespace with its peer moved straight into
  the receiver namespace: nothing is ever created in the root namespace, and the
  addresses (10.199.0.0/24, fd99::/64) exist only inside the two namespaces, so
  no packet can go anywhere else.
* The sender veth has TSO, GSO and GRO off (so every segment on the wire is at
  most one MSS) and MTU 1500 (MSS 1448 for IPv4 and 1428 for IPv6, with TCP
  timestamps).  Its TX checksum offload stays ON, as on any real host: the
  captured TCP checksum fields hold only the pseudo-header seed
  (CHECKSUM_PARTIAL).  That is what real sender-side captures look like, and
  the captures are kept that way on purpose (``grotool replay --csum auto``
  recognises the seed; ``grotool kernel`` has to fix or trust them).
* tcpdump: ``tcpdump -i <sender veth> -Q out -s 0 --immediate-mode -U -Z root
  -w FILE tcp``.  The ``tcp`` filter keeps IPv6 neighbour discovery, MLD and ARP
  out of the captures.

The script also runs itself, inside a namespace, as the socket workers
(``--worker ...``); that is an implementation detail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "grorec-"
PORT = 5001
CLIENT_PORT_BASE = 40001
SND_MAC = "02:00:00:c7:00:01"
RCV_MAC = "02:00:00:c7:00:02"
ADDR = {4: ("10.199.0.1", "10.199.0.2", 24), 6: ("fd99::1", "fd99::2", 64)}

# Request/response scenario: response i is written as these chunks, one send()
# each, with TCP_NODELAY (every write ends in a PSH segment).
REQRESP_PATTERN = [
    [100], [4344], [2000, 3000], [300, 300, 300], [2913], [64], [8000], [1, 1447, 1448],
]
REQRESP_REQUESTS = 128
REQ_SIZE = 8

SCENARIOS = {
    "bulk-ipv4": dict(
        file="real-bulk-ipv4.pcap", family=4, kind="bulk", conns=1, bytes=1_000_000,
        about="one IPv4 bulk transfer of 1 000 000 bytes, default socket options, one sendall()"),
    "bulk-ipv6": dict(
        file="real-bulk-ipv6.pcap", family=6, kind="bulk", conns=1, bytes=400_000,
        about="one IPv6 bulk transfer of 400 000 bytes, default socket options"),
    "parallel4-ipv4": dict(
        file="real-parallel4-ipv4.pcap", family=4, kind="parallel", conns=4, bytes=100_000,
        about="4 IPv4 connections of 100 000 bytes each, written round-robin in 4096-byte "
              "non-blocking sends from one thread, so their segments interleave on the wire"),
    "reqresp-nodelay-ipv4": dict(
        file="real-reqresp-nodelay-ipv4.pcap", family=4, kind="reqresp", conns=1,
        bytes=sum(map(sum, REQRESP_PATTERN)) * (REQRESP_REQUESTS // len(REQRESP_PATTERN)),
        about=f"{REQRESP_REQUESTS} requests of {REQ_SIZE} bytes (client in the receiver namespace); "
              "the server in the sender namespace answers each with 1-3 small writes, TCP_NODELAY "
              f"(pattern of chunk sizes {REQRESP_PATTERN}): PSH-heavy"),
    "applimited-ipv4": dict(
        file="real-applimited-ipv4.pcap", family=4, kind="applimited", conns=1, bytes=300_000,
        chunk=10_000, sleep_s=0.001,
        about="an application-limited IPv4 bulk flow: write 10 000 bytes, sleep 1 ms, repeat (30 times)"),
}


def payload(n: int, salt: int = 0) -> bytes:
    """Deterministic, easily compressed payload."""
    block = bytes((i * 7 + salt) & 0xFF for i in range(4096))
    return (block * (n // 4096 + 1))[:n]


# ----------------------------------------------------------------------------
# Workers (run inside a namespace through `ip netns exec`)
# ----------------------------------------------------------------------------
def _family(fam: int) -> int:
    return socket.AF_INET if fam == 4 else socket.AF_INET6


def _listen(fam: int, addr: str, port: int) -> socket.socket:
    s = socket.socket(_family(fam), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    return s


def _connect(fam: int, src: str, dst: str, port: int, cport: int, nodelay: bool = False) -> socket.socket:
    s = socket.socket(_family(fam), socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if nodelay:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.bind((src, cport))
    s.settimeout(10)
    s.connect((dst, port))
    s.settimeout(None)
    return s


def worker_sink(a) -> None:
    """Accept N connections and read each until EOF; print the byte counts."""
    ls = _listen(a.family, a.addr, a.port)
    print("READY", flush=True)
    ls.settimeout(20)
    counts = {}
    threads = []

    def drain(conn, peer):
        n = 0
        while True:
            data = conn.recv(1 << 16)
            if not data:
                break
            n += len(data)
        conn.close()
        counts[str(peer[1])] = n

    for _ in range(a.conns):
        conn, peer = ls.accept()
        t = threading.Thread(target=drain, args=(conn, peer))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(30)
    print(json.dumps({"received": counts}), flush=True)


def worker_bulk(a) -> None:
    s = _connect(a.family, a.src, a.dst, a.port, CLIENT_PORT_BASE)
    s.sendall(payload(a.bytes))
    s.shutdown(socket.SHUT_WR)
    s.recv(1)          # wait for the peer's FIN
    s.close()


def worker_applimited(a) -> None:
    s = _connect(a.family, a.src, a.dst, a.port, CLIENT_PORT_BASE)
    data = payload(a.bytes)
    for off in range(0, a.bytes, a.chunk):
        s.sendall(data[off:off + a.chunk])
        time.sleep(a.sleep_s)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()


def worker_parallel(a) -> None:
    socks = [_connect(a.family, a.src, a.dst, a.port, CLIENT_PORT_BASE + i) for i in range(a.conns)]
    for s in socks:
        s.setblocking(False)
    data = [payload(a.bytes, salt=i) for i in range(a.conns)]
    sent = [0] * a.conns
    step = 4096
    while any(n < a.bytes for n in sent):
        pending = [s for i, s in enumerate(socks) if sent[i] < a.bytes]
        _, writable, _ = select.select([], pending, [], 5)
        # Round-robin in connection order, one small write each, for interleaving.
        for i, s in enumerate(socks):
            if s in writable and sent[i] < a.bytes:
                try:
                    sent[i] += s.send(data[i][sent[i]:sent[i] + step])
                except BlockingIOError:
                    pass
    for s in socks:
        s.setblocking(True)
        s.shutdown(socket.SHUT_WR)
    for s in socks:
        s.recv(1)
        s.close()


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        more = s.recv(n - len(buf))
        if not more:
            break
        buf += more
    return buf


def worker_responder(a) -> None:
    """Server in the sender namespace: answers each request with small writes."""
    ls = _listen(a.family, a.addr, a.port)
    print("READY", flush=True)
    ls.settimeout(20)
    conn, _ = ls.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = 0
    while True:
        req = _recv_exact(conn, REQ_SIZE)
        if len(req) < REQ_SIZE:
            break
        i = int.from_bytes(req, "big")
        for j, size in enumerate(REQRESP_PATTERN[i % len(REQRESP_PATTERN)]):
            conn.sendall(payload(size, salt=i + j))
            sent += size
    conn.close()
    print(json.dumps({"sent": sent}), flush=True)


def worker_requester(a) -> None:
    s = _connect(a.family, a.src, a.dst, a.port, CLIENT_PORT_BASE, nodelay=True)
    got = 0
    for i in range(REQRESP_REQUESTS):
        s.sendall(i.to_bytes(REQ_SIZE, "big"))
        want = sum(REQRESP_PATTERN[i % len(REQRESP_PATTERN)])
        got += len(_recv_exact(s, want))
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    s.close()
    print(json.dumps({"received": got}), flush=True)


WORKERS = {"sink": worker_sink, "bulk": worker_bulk, "applimited": worker_applimited,
           "parallel": worker_parallel, "responder": worker_responder, "requester": worker_requester}


# ----------------------------------------------------------------------------
# Orchestration (root namespace; only runs `ip`, `ethtool`, `tcpdump`)
# ----------------------------------------------------------------------------
def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


def netns_list() -> list:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def remove_stale() -> None:
    for name in netns_list():
        if not name.startswith(PREFIX):
            continue
        try:
            pid = int(name[len(PREFIX) + 1:].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            run("ip", "netns", "del", name, check=False)


class Pair:
    """Two namespaces joined by a veth pair: sender `gs0` and receiver `gr0`."""

    def __init__(self):
        tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.snd, self.rcv = f"{PREFIX}s{tag}", f"{PREFIX}r{tag}"
        self.sdev, self.rdev = "gs0", "gr0"
        self.created = []

    def up(self) -> None:
        for ns in (self.snd, self.rcv):
            run("ip", "netns", "add", ns)
            self.created.append(ns)
        run("ip", "-n", self.snd, "link", "add", self.sdev, "type", "veth", "peer", "name", self.rdev,
            "netns", self.rcv)
        for ns, dev, mac, idx in ((self.snd, self.sdev, SND_MAC, 0), (self.rcv, self.rdev, RCV_MAC, 1)):
            run("ip", "-n", ns, "link", "set", dev, "address", mac, "mtu", "1500")
            run("ip", "-n", ns, "addr", "add", f"{ADDR[4][idx]}/{ADDR[4][2]}", "dev", dev)
            run("ip", "-n", ns, "-6", "addr", "add", f"{ADDR[6][idx]}/{ADDR[6][2]}", "dev", dev, "nodad")
            run("ip", "-n", ns, "link", "set", "lo", "up")
            run("ip", "-n", ns, "link", "set", dev, "up")
        # Static neighbours: no ARP/ND round trip before the first SYN.
        run("ip", "-n", self.snd, "neigh", "replace", ADDR[4][1], "lladdr", RCV_MAC, "dev", self.sdev, "nud", "permanent")
        run("ip", "-n", self.snd, "neigh", "replace", ADDR[6][1], "lladdr", RCV_MAC, "dev", self.sdev, "nud", "permanent")
        run("ip", "-n", self.rcv, "neigh", "replace", ADDR[4][0], "lladdr", SND_MAC, "dev", self.rdev, "nud", "permanent")
        run("ip", "-n", self.rcv, "neigh", "replace", ADDR[6][0], "lladdr", SND_MAC, "dev", self.rdev, "nud", "permanent")
        self.exec_(self.snd, "ethtool", "-K", self.sdev, "tso", "off", "gso", "off", "gro", "off")

    def exec_(self, ns: str, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return run("ip", "netns", "exec", ns, *cmd, check=check)

    def popen(self, ns: str, *cmd: str) -> subprocess.Popen:
        return subprocess.Popen(("ip", "netns", "exec", ns) + cmd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def down(self) -> None:
        for ns in self.created:
            run("ip", "netns", "del", ns, check=False)
        self.created = []


def _readline(p: subprocess.Popen, stream, timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise RuntimeError(f"timed out waiting for {p.args[3:]!r}")
    return stream.readline()


def _wait_for(p: subprocess.Popen, stream, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        line = _readline(p, stream, max(0.01, deadline - time.monotonic()))
        if not line:
            raise RuntimeError(f"{p.args[3:]!r} exited before saying {needle!r}: {p.stderr.read() if stream is p.stdout else ''}")
        if needle in line:
            return


def _stop(p) -> None:
    if p is not None and p.poll() is None:
        p.kill()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            pass


def record(name: str, spec: dict, outdir: str) -> dict:
    pair = Pair()
    procs = []
    tmp = os.path.join(outdir, f".tmp-{os.getpid()}-{spec['file']}")
    fam = spec["family"]
    s_addr, r_addr = ADDR[fam][0], ADDR[fam][1]
    me = [sys.executable, os.path.abspath(__file__), "--worker"]
    common = ["--family", str(fam), "--port", str(PORT), "--conns", str(spec["conns"]),
              "--bytes", str(spec["bytes"])]
    try:
        pair.up()
        info = {
            "ethtool_k": pair.exec_(pair.snd, "ethtool", "-k", pair.sdev).stdout,
            "cc": pair.exec_(pair.snd, "sysctl", "-n", "net.ipv4.tcp_congestion_control").stdout.strip(),
        }
        dump = pair.popen(pair.snd, "tcpdump", "-i", pair.sdev, "-Q", "out", "-s", "0", "--immediate-mode",
                          "-U", "-Z", "root", "-w", tmp, "tcp")
        procs.append(dump)
        _wait_for(dump, dump.stderr, "listening on", 10)
        if spec["kind"] == "reqresp":
            server = pair.popen(pair.snd, *me, "responder", *common, "--addr", s_addr)
            procs.append(server)
            _wait_for(server, server.stdout, "READY", 10)
            client = pair.popen(pair.rcv, *me, "requester", *common, "--src", r_addr, "--dst", s_addr)
        else:
            server = pair.popen(pair.rcv, *me, "sink", *common, "--addr", r_addr)
            procs.append(server)
            _wait_for(server, server.stdout, "READY", 10)
            extra = []
            if spec["kind"] == "applimited":
                extra = ["--chunk", str(spec["chunk"]), "--sleep-s", str(spec["sleep_s"])]
            client = pair.popen(pair.snd, *me, spec["kind"], *common, "--src", s_addr, "--dst", r_addr, *extra)
        procs.append(client)
        c_out, c_err = client.communicate(timeout=60)
        s_out, s_err = server.communicate(timeout=60)
        if client.returncode or server.returncode:
            raise RuntimeError(f"{name}: worker failed: {c_err.strip()} {s_err.strip()}")
        time.sleep(0.3)          # let the last FIN/ACK reach tcpdump
        dump.send_signal(signal.SIGINT)
        _, d_err = dump.communicate(timeout=10)
        result = json.loads(s_out.strip().splitlines()[-1])
        dropped = [line for line in d_err.splitlines() if "dropped by kernel" in line]
        if not dropped or not dropped[0].startswith("0 "):
            raise RuntimeError(f"{name}: tcpdump reports drops: {d_err.strip()}")
        final = os.path.join(outdir, spec["file"])
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
        return {"worker": result, "tcpdump": d_err.strip().splitlines(), **info}
    finally:
        for p in reversed(procs):
            _stop(p)
        pair.down()
        if os.path.exists(tmp):
            os.unlink(tmp)


def tshark_summary(path: str) -> dict:
    """Per-flow data segments and bytes as tshark dissects them."""
    out = subprocess.run(
        ["tshark", "-n", "-r", path, "-T", "fields", "-E", "separator=,",
         "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "tcp.len", "-e", "frame.len",
         "-e", "tcp.flags.push", "-e", "tcp.analysis.retransmission", "-e", "tcp.analysis.out_of_order"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True, timeout=120).stdout
    flows, frames, max_frame, retrans = {}, 0, 0, 0
    for line in out.splitlines():
        f = line.split(",")
        frames += 1
        key = f"{f[0] or f[1]}:{f[2]}"
        st = flows.setdefault(key, {"data_segments": 0, "payload_bytes": 0, "psh": 0, "other_packets": 0})
        n = int(f[3] or 0)
        if n:
            st["data_segments"] += 1
            st["payload_bytes"] += n
            st["psh"] += f[5] in ("1", "True")
        else:
            st["other_packets"] += 1
        max_frame = max(max_frame, int(f[4]))
        retrans += bool(f[6]) or bool(f[7])
    return {"frames": frames, "max_frame_len": max_frame, "retransmissions_or_ooo": retrans,
            "flows": dict(sorted(flows.items()))}


def main_record(names: list, outdir: str) -> int:
    if os.geteuid() != 0:
        print("record_real_tcp.py: needs root (network namespaces)", file=sys.stderr)
        return 4
    for tool in ("ip", "ethtool", "tcpdump", "tshark"):
        if shutil.which(tool) is None:
            print(f"record_real_tcp.py: needs {tool}", file=sys.stderr)
            return 4

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    remove_stale()
    manifest_path = os.path.join(outdir, "real-captures.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        manifest = {}
    manifest["kernel"] = os.uname().release
    manifest.setdefault("captures", {})
    for name in names:
        spec = SCENARIOS[name]
        info = record(name, spec, outdir)
        path = os.path.join(outdir, spec["file"])
        summary = tshark_summary(path)
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        data_segments = sum(st["data_segments"] for st in summary["flows"].values())
        payload_bytes = sum(st["payload_bytes"] for st in summary["flows"].values())
        expect = spec["bytes"] * (spec["conns"] if spec["kind"] == "parallel" else 1)
        if payload_bytes != expect:
            raise RuntimeError(f"{name}: capture holds {payload_bytes} payload bytes, {expect} were sent")
        if summary["max_frame_len"] > 1514:
            raise RuntimeError(f"{name}: frame of {summary['max_frame_len']} bytes: segmentation offload was on")
        manifest["captures"][name] = {
            "file": spec["file"], "about": spec["about"], "family": spec["family"],
            "bytes_sent": expect, "size": os.path.getsize(path), "sha256": digest,
            "congestion_control": info["cc"], "tcpdump": info["tcpdump"], **summary,
        }
        print(f"{spec['file']}: {summary['frames']} frames, {data_segments} data segments, "
              f"{payload_bytes} payload bytes, {os.path.getsize(path)} bytes on disk, "
              f"{summary['retransmissions_or_ooo']} retransmitted/out-of-order")
        for line in info["ethtool_k"].splitlines():
            if any(k in line for k in ("tx-checksumming", "segmentation-offload", "generic-receive")):
                print("   ", line.strip())
    manifest["captures"] = dict(sorted(manifest["captures"].items()))
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    leftover = [n for n in netns_list() if n.startswith(PREFIX)]
    if leftover:
        print(f"warning: namespaces left behind: {leftover}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    ap.add_argument("--outdir", default=HERE)
    ap.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    for opt, typ in (("--family", int), ("--port", int), ("--conns", int), ("--bytes", int),
                     ("--chunk", int), ("--sleep-s", float)):
        ap.add_argument(opt, type=typ, help=argparse.SUPPRESS)
    for opt in ("--addr", "--src", "--dst"):
        ap.add_argument(opt, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        WORKERS[a.worker](a)
        return 0
    names = a.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s): {', '.join(unknown)}")
    try:
        return main_record(names, a.outdir)
    except KeyboardInterrupt as exc:
        print(f"record_real_tcp.py: interrupted ({exc})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
