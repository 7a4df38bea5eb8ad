#!/usr/bin/env python3
"""Rebuild the bundled captures in this directory from grotool.scenarios.

    python captures/make_captures.py [--out DIR]

Everything is synthetic, with fixed seeds and fixed timestamps, so two runs
write byte-identical files.  See README.md next to this script for what each
capture holds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grotool import scenarios as S  # noqa: E402

T0 = 1_700_000_000_000_000_000          # 2023-11-14T22:13:20Z, in ns: every capture starts here
CASE_GAP_NS = 10_000_000                # idle time between two selftest cases
SELFTEST_SPORT, SELFTEST_SPORT_STEP = 10000, 100
MAX_BYTES = 1 << 20

Record = Tuple[int, bytes]


POLL = 64                               # frames per NAPI poll in a veth replay
FILLER_ETHERTYPE = 0x88B5               # IEEE 802 local experimental: GRO never looks at it


def filler_frame(n: int) -> bytes:
    """A 60-byte non-IP frame that keeps the next case inside one 64-frame poll."""
    body = b"grotool poll filler %04d" % n
    return (S._mac(S.SELFTEST_DMAC) + S._mac(S.SELFTEST_SMAC) + FILLER_ETHERTYPE.to_bytes(2, "big")
            + body + bytes(46 - len(body)))


def selftest_capture(proto: str, out: Path) -> dict:
    """All cases of one protocol back to back, each on its own source port(s).

    No case straddles a 64-frame boundary: where one would, filler frames pad
    up to the boundary, so a veth replay polls every case from a clean start
    (only ip_v6ext_* leave packets held until the end of their poll).
    """
    records: List[Record] = []
    cases = []
    fillers = 0
    t = T0
    for sc in S.selftest_scenarios(proto, sport=SELFTEST_SPORT, sport_step=SELFTEST_SPORT_STEP):
        if len(records) % POLL + len(sc.frames) > POLL:
            pad = POLL - len(records) % POLL
            base = t - CASE_GAP_NS // 2
            records += [(base + i * 1_000, filler_frame(fillers + i)) for i in range(pad)]
            fillers += pad
        first = len(records)
        records += sc.records(t)
        cases.append({
            "name": sc.name,
            "first_frame": first,
            "frames": len(sc.frames),
            "sport": sc.sport,
            "sports": sorted({sp for sp, _ in sc.expected_order}),
            "first_ts_ns": t,
            "pauses": [[first + i, ns] for i, ns in sc.pauses],
            "expected_kernel": sc.expected_kernel,
            "expected_paused": sc.expected_paused,
            "expected_selftest": sc.expected_selftest,
        })
        t += sc.duration_ns + CASE_GAP_NS
    name = f"selftest-{proto}.pcap"
    S.write_pcap(str(out / name), records)
    index = {
        "capture": name,
        "made_by": "captures/make_captures.py (grotool.scenarios.selftest_scenarios)",
        "note": "expected_* are per case, for the case replayed alone from an empty GRO state. "
                "Cases never straddle a 64-frame boundary (non-IP filler frames, ethertype 0x88b5, "
                "pad where needed) and use distinct ports, so a veth replay of the whole file gives "
                "every case's flows their expected_kernel sizes; the interleaving of deliveries "
                "between neighbouring cases in one poll is not described here",
        "poll_frames": POLL,
        "filler_frames": fillers,
        "cases": cases,
    }
    (out / f"selftest-{proto}.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def bulk_capture(out: Path) -> None:
    records = list(S.bulk_flows(4, 100, interleave="bursty", seed=4, start_ts_ns=T0))
    S.write_pcap(str(out / "bulk-4flows.pcap"), records)


def _spaced(frames: List[bytes], start: int, gap_ns: int) -> List[Record]:
    return [(start + i * gap_ns, f) for i, f in enumerate(frames)]


def mixed_capture(out: Path) -> None:
    """Several kinds of traffic interleaved by timestamp."""
    us = 1_000
    streams: List[List[Record]] = []
    # bulk TCP over IPv4 (2 flows, TSO-like bursts) and IPv6 (2 flows, round robin), 2.5 Gbit/s each
    streams.append(list(S.bulk_flows(2, 60, interleave="bursty", seed=11, start_ts_ns=T0,
                                     rate_bps=2_500_000_000, sport_base=40000)))
    streams.append(list(S.bulk_flows(2, 40, interleave="round_robin", seed=12, family=6,
                                     start_ts_ns=T0 + 3 * us, rate_bps=2_500_000_000, sport_base=41000)))
    # a VLAN 100 tagged bulk flow
    streams.append(list(S.bulk_flows(1, 30, seed=13, vlan=[100], start_ts_ns=T0 + 7 * us,
                                     rate_bps=1_000_000_000, sport_base=42000)))
    # pure ACKs flowing back to the first IPv4 bulk sender
    acks = [S.tcp_frame(4, "10.0.0.1", "10.1.0.1", 5201, 40000, seq=7_000_000, ack=1_000_000 + 2896 * i,
                        flags="A", window=4096, payload=0, ttl=64, ip_id=500 + i,
                        src_mac="02:00:00:00:00:02", dst_mac="02:00:00:00:00:01") for i in range(30)]
    streams.append(_spaced(acks, T0 + 11 * us, 20 * us))
    # a flow whose TTL drops from 64 to 63 at segment #11 (a route change)
    ttl = [S.tcp_frame(4, "10.2.0.1", "10.0.0.1", 43000, 80, seq=5000 + 1448 * i, ack=1, payload=1448,
                       ttl=64 if i < 10 else 63, ip_id=1000 + i, src_mac="02:00:00:00:00:01",
                       dst_mac="02:00:00:00:00:02") for i in range(20)]
    streams.append(_spaced(ttl, T0 + 13 * us, 9 * us))
    # an out-of-order flow: segment 6 arrives before segment 5
    order = [0, 1, 2, 3, 4, 6, 5, 7, 8, 9]
    ooo = [S.tcp_frame(4, "10.2.0.2", "10.0.0.1", 43001, 80, seq=9000 + 1448 * k, ack=1, payload=1448,
                       ttl=64, ip_id=2000 + k, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02")
           for k in order]
    streams.append(_spaced(ooo, T0 + 17 * us, 11 * us))
    # 1448, 1448, then a 1-byte segment and a pure ACK, both padded to 60 bytes
    pad = [S.tcp_frame(4, "10.2.0.3", "10.0.0.1", 43002, 80, seq=100 + 1448 * i, ack=1, payload=1448,
                       ttl=64, ip_id=3000 + i, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02")
           for i in range(2)]
    pad.append(S.tcp_frame(4, "10.2.0.3", "10.0.0.1", 43002, 80, seq=100 + 2896, ack=1, payload=1, ttl=64,
                           ip_id=3002, pad_to_60=True, src_mac="02:00:00:00:00:01",
                           dst_mac="02:00:00:00:00:02"))
    pad.append(S.tcp_frame(4, "10.2.0.3", "10.0.0.1", 43002, 80, seq=100 + 2897, ack=1, payload=0, ttl=64,
                           ip_id=3003, pad_to_60=True, src_mac="02:00:00:00:00:01",
                           dst_mac="02:00:00:00:00:02"))
    streams.append(_spaced(pad, T0 + 19 * us, 15 * us))
    # an ICMP echo exchange
    icmp = [S.icmp_echo_frame(4, "10.3.0.1", "10.0.0.1", ident=77, seqno=1, ip_id=4000,
                              src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02"),
            S.icmp_echo_frame(4, "10.0.0.1", "10.3.0.1", ident=77, seqno=1, reply=True, ip_id=4001,
                              src_mac="02:00:00:00:00:02", dst_mac="02:00:00:00:00:01")]
    streams.append(_spaced(icmp, T0 + 23 * us, 40 * us))
    # a UDP flow: 20 datagrams of 1000 bytes
    udp = [S.udp_frame(4, "10.4.0.1", "10.0.0.1", 50123, 5001, payload=bytes([0x30 + i % 10]) * 1000,
                       ip_id=6000 + i, src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02")
           for i in range(20)]
    streams.append(_spaced(udp, T0 + 29 * us, 13 * us))
    # ARP who-has and is-at
    arp = [S.arp_frame(1, "02:00:00:00:00:01", "10.0.0.9", "00:00:00:00:00:00", "10.0.0.1"),
           S.arp_frame(2, "02:00:00:00:00:02", "10.0.0.1", "02:00:00:00:00:01", "10.0.0.9")]
    streams.append(_spaced(arp, T0 + 1 * us, 30 * us))
    merged = sorted(((ts, k, i, frame) for k, stream in enumerate(streams)
                     for i, (ts, frame) in enumerate(stream)), key=lambda r: r[:3])
    S.write_pcap(str(out / "mixed.pcap"), [(ts, frame) for ts, _k, _i, frame in merged])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent),
                    help="directory to write into (default: the directory of this script)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    selftest_capture("ipv4", out)
    selftest_capture("ipv6", out)
    bulk_capture(out)
    mixed_capture(out)
    for name in ("selftest-ipv4.pcap", "selftest-ipv6.pcap", "bulk-4flows.pcap", "mixed.pcap"):
        size = os.path.getsize(out / name)
        if size >= MAX_BYTES:
            raise SystemExit(f"{name} is {size} bytes; bundled captures must stay under 1 MB")
        print(f"{out / name}: {size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
