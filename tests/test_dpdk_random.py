"""The DPDK model against the real librte_gro on seeded random traffic: a few
TCP flows and fragmented datagrams with reordering, duplicates, flag, DF,
IP ID, option, ACK, VLAN, TTL and padding variations, under random knobs."""

from __future__ import annotations

import random

import pytest

from dpdk_support import dpdk_library, outcome  # noqa: F401  (fixture)
from framebuild import tcp_frame, tcp_opt_ts
from grotool.dpdk.engine import DpdkSettings, simulate
from test_dpdk_rules import fragments, udp_frame


def random_traffic(rng: random.Random):
    frames = []
    flows = rng.randint(1, 4)
    for flow in range(flows):
        seq = rng.choice([1000, (1 << 32) - 3000])
        ip_id = rng.choice([1, 65533])
        size = rng.choice([1448, 1000, 7000, 30000])
        for _ in range(rng.randint(1, 12)):
            payload = rng.choice([size, size, size, 0, 6, 100])
            kw = dict(sport=2000 + flow, seq=seq & 0xFFFFFFFF, ack=rng.choice([100, 100, 100, 200]),
                      flags=rng.choice(["A"] * 8 + ["PA", "FA", "S", "AU", "AE"]),
                      df=rng.random() < 0.7, ip_id=ip_id & 0xFFFF,
                      ttl=rng.choice([64, 64, 63]), tos=rng.choice([0, 0, 2]),
                      vlans=[(0x8100, rng.choice([5, 5, 6]))] if flow == 3 else [],
                      pad=rng.random() < 0.3)
            if rng.random() < 0.3:
                kw["tcp_options"] = tcp_opt_ts(rng.choice([1, 1, 2]), 7)
            frames.append(tcp_frame(payload, **kw))
            seq += payload if rng.random() < 0.9 else payload * 2
            ip_id += 1 if rng.random() < 0.9 else 2
    for ident in range(rng.randint(0, 2)):
        frames += fragments(ident=ident, size=rng.choice([3000, 40, 9000]), piece=rng.choice([1480, 24, 512]),
                            pad_last=rng.random() < 0.5)
    if rng.random() < 0.5:
        frames.append(udp_frame())
    # local reordering and duplicates
    for _ in range(rng.randint(0, len(frames) // 3)):
        i = rng.randrange(len(frames))
        j = min(len(frames) - 1, i + rng.randint(1, 3))
        frames[i], frames[j] = frames[j], frames[i]
    if rng.random() < 0.3:
        frames.insert(rng.randrange(len(frames)), rng.choice(frames))
    return frames


def random_settings(rng: random.Random) -> DpdkSettings:
    return DpdkSettings(mode=rng.choice(["light", "heavy"]), burst=rng.choice([1, 2, 5, 16, 32, 200]),
                        flush_every=rng.choice([1, 2, 7]), max_flows=rng.choice([1, 2, 64]),
                        max_items=rng.choice([1, 3, 32]), gro_types=rng.choice([("tcp4",), ("tcp4", "udp4"),
                                                                                 ("udp4",)]))


@pytest.mark.parametrize("seed", range(40))
def test_random_traffic_agrees_with_librte_gro(seed, dpdk_library):
    rng = random.Random(seed)
    frames = random_traffic(rng)
    for _ in range(3):
        settings = random_settings(rng)
        assert outcome(simulate(frames, settings)) == outcome(dpdk_library(frames, settings)), (seed, settings)
