"""The benchmark's generated captures (deterministic for a given size).

* ``bulk``: 64 interleaved bulk TCP flows, bursty as TSO senders are (each turn
  a flow sends a burst of 4..44 full segments back to back).
* ``mix``: 10,000 flows of everything a busy server sees: short TCP
  request/response segments with PSH, bulk bursts, pure ACKs of the reverse
  direction, UDP datagrams (DNS-sized to 1400 bytes), IPv4 and IPv6.
* ``real``: the recorded real TCP captures of tests/data (bulk, app-limited,
  request/response, 4 parallel streams) replayed as many overlapping copies,
  each copy with its own ports and a time offset, so their ACK clocking, PSH
  pattern and timing are a real stack's.

Checksums: ``bulk`` and ``mix`` carry correct TCP/UDP and IPv4 header
checksums (``--csum auto``, the default, verifies them: the benchmark measures
it beside ``--csum trust``); ``real`` keeps the recorded TCP fields, the
pseudo-header seeds of senders that offloaded them (auto takes them as offloaded).
"""

from __future__ import annotations

import heapq
import random
import struct
import sys
from pathlib import Path
from typing import Iterator, Tuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grotool.io.capture import PcapWriter, read_capture  # noqa: E402

Record = Tuple[int, bytes]
START_NS = 1_700_000_000_000_000_000
INPUTS = ("bulk", "mix", "real")


def write_input(kind: str, path: str, packets: int) -> None:
    records = {"bulk": bulk, "mix": mix, "real": real}[kind](packets)
    with PcapWriter(path) as w:
        for n, (ts, frame) in enumerate(records):
            if n >= packets:
                break
            w.write(ts, frame)


def bulk(packets: int, flows: int = 64) -> Iterator[Record]:
    from grotool.scenarios import bulk_flows

    return bulk_flows(flows, packets, interleave="bursty", seed=1)


def _ip_csum(header: bytes) -> int:
    s = sum(struct.unpack("!10H", header))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return 0xFFFF - s


ETH_V4 = bytes.fromhex("020000000002020000000001") + b"\x08\x00"
ETH_V6 = bytes.fromhex("020000000002020000000001") + b"\x86\xdd"


def _l4_checksummed(family: int, src: bytes, dst: bytes, proto: int, l4: bytes) -> bytes:
    """``l4`` (its TCP/UDP checksum field zero) with the checksum filled in."""
    if family == 4:
        pseudo = src + dst + struct.pack("!BBH", 0, proto, len(l4))
    else:
        pseudo = src + dst + struct.pack("!IxxxB", len(l4), proto)
    data = pseudo + l4 + (b"\0" if len(l4) & 1 else b"")
    residue = int.from_bytes(data, "big") % 0xFFFF        # the ones'-complement sum, modulo 0xFFFF
    check = 0xFFFF - residue if residue else 0
    if proto == 17 and check == 0:
        check = 0xFFFF                                    # UDP: zero means "no checksum"
    at = 16 if proto == 6 else 6
    return l4[:at] + struct.pack("!H", check) + l4[at + 2:]


def _frame(family: int, src: int, dst: int, proto: int, l4: bytes, ip_id: int) -> bytes:
    if family == 4:
        l4 = _l4_checksummed(4, struct.pack("!I", src), struct.pack("!I", dst), proto, l4)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ip_id & 0xFFFF, 0x4000, 64, proto, 0,
                          struct.pack("!I", src), struct.pack("!I", dst))
        hdr = hdr[:10] + struct.pack("!H", _ip_csum(hdr)) + hdr[12:]
        return ETH_V4 + hdr + l4
    src6 = b"\xfd\x00" + b"\0" * 10 + struct.pack("!I", src)
    dst6 = b"\xfd\x00" + b"\0" * 10 + struct.pack("!I", dst)
    l4 = _l4_checksummed(6, src6, dst6, proto, l4)
    hdr = struct.pack("!IHBB16s16s", 0x60000000, len(l4), proto, 64, src6, dst6)
    return ETH_V6 + hdr + l4


def _tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535,
                       0, 0) + payload


class _MixFlow:
    __slots__ = ("kind", "family", "client", "server", "sport", "dport", "seq", "ack", "ip_id")


def mix(packets: int, flows: int = 10_000, seed: int = 2) -> Iterator[Record]:
    """10,000 flows: 40% request/response TCP (short PSH segments, their ACKs),
    25% bulk TCP bursts of 2..16 full segments, 20% pure-ACK streams, 15% UDP;
    a third IPv6.  The next flow is drawn at random, timestamps 1.2 us apart."""
    rng = random.Random(seed)
    table = []
    for i in range(flows):
        f = _MixFlow()
        r = rng.random()
        f.kind = "rr" if r < 0.40 else "bulk" if r < 0.65 else "ack" if r < 0.85 else "udp"
        f.family = 6 if rng.random() < 1 / 3 else 4
        f.client = 0x0A010000 + i
        f.server = 0x0A000001 + (i % 16)
        f.sport = 10000 + (i * 7) % 50000
        f.dport = rng.choice((80, 443, 5201, 8080)) if f.kind != "udp" else rng.choice((53, 123, 4433, 9000))
        f.seq = rng.randrange(1 << 32)
        f.ack = rng.randrange(1 << 32)
        f.ip_id = rng.randrange(1 << 16)
        table.append(f)
    payload = bytes(range(256)) * 6
    ts = START_NS
    produced = 0
    while produced < packets:
        f = table[rng.randrange(flows)]
        if f.kind == "bulk":
            # full segments: 1488-byte IP packets (within a 1500 MTU) in both families
            mss = 1448 if f.family == 4 else 1428
            burst = [(0x10, mss) for _ in range(rng.randrange(2, 17))]
            burst[-1] = (0x18, mss)
        elif f.kind == "rr":
            burst = [(0x18, rng.randrange(60, 600))]
        elif f.kind == "ack":
            burst = [(0x10, 0) for _ in range(rng.randrange(1, 4))]
        else:
            burst = [(None, rng.choice((48, 120, 512, 1200, 1400))) for _ in range(rng.randrange(1, 4))]
        for flags, size in burst:
            if flags is None:
                l4 = struct.pack("!HHHH", f.sport, f.dport, 8 + size, 0) + payload[:size]
                frame = _frame(f.family, f.client, f.server, 17, l4, f.ip_id)
            else:
                l4 = _tcp(f.sport, f.dport, f.seq, f.ack, flags, payload[:size])
                frame = _frame(f.family, f.client, f.server, 6, l4, f.ip_id)
                f.seq += size
                if f.kind == "ack":
                    f.ack += rng.randrange(1, 64) * 1448
            f.ip_id += 1
            yield ts, frame
            ts += 1200
            produced += 1
            if produced >= packets:
                return


REAL_CAPTURES = ("real-bulk-ipv4.pcap", "real-applimited-ipv4.pcap", "real-reqresp-nodelay-ipv4.pcap",
                 "real-parallel4-ipv4.pcap")
REAL_OVERLAP = 8          # copies running at once


def _shift_ports(frame: bytes, delta: int) -> bytes:
    """Both TCP ports of an Ethernet/IPv4 frame moved by ``delta`` (a distinct flow).
    The checksum field is left as recorded (the senders offloaded it)."""
    if len(frame) < 38 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
        return frame
    at = 14 + (frame[14] & 0x0F) * 4
    sport, dport = struct.unpack_from("!HH", frame, at)
    local, remote = (sport, dport) if sport > dport else (dport, sport)
    moved = (local - 1024 + delta) % 60000 + 1024
    ports = (moved, remote) if sport > dport else (remote, moved)
    return frame[:at] + struct.pack("!HH", *ports) + frame[at + 4:]


def real(packets: int) -> Iterator[Record]:
    """Copies of the recorded captures, each shifted in time and ports; copies
    start a span/REAL_OVERLAP apart so about REAL_OVERLAP run at once."""
    sets = []
    for name in REAL_CAPTURES:
        _, records = read_capture(str(ROOT / "tests" / "data" / name))
        t0 = records[0][0]
        sets.append([(ts - t0, data) for ts, data, _wirelen in records])
    span = max(s[-1][0] for s in sets) + 1
    per_round = sum(len(s) for s in sets)
    copies = packets // per_round + 1

    def copy(k: int):
        start = START_NS + k * span // REAL_OVERLAP
        # the four captures of a round side by side, merged by time
        for ts, _, frame in heapq.merge(*[[(start + ts, n, data) for n, (ts, data) in enumerate(s)] for s in sets]):
            yield ts, _shift_ports(frame, 13 * k)

    merged = heapq.merge(*(copy(k) for k in range(copies)), key=lambda r: r[0])
    for n, record in enumerate(merged):
        if n >= packets:
            return
        yield record
