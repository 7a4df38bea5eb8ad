"""UDP GRO, fraglist GRO, GRE and VXLAN against the real kernel, byte for byte.

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
from grotool.engine.config import DEFAULT_RSS_KEY
from grotool.oracle import HostState
from kernel_support import oracle_kernel_config, oracle_kernel_profile, oracle_replay_frames as replay_frames
from kernel_support import oracle_supports_rss

pytestmark = pytest.mark.kernel

FWD = {"udp_gro_forwarding": True}
FLIST = {"rx_gro_list": True}
VXLAN = {"vxlan_ports": (4789,)}


def mixed():
    """Everything at once: UDP, TCP, GRE and VXLAN flows interleaved in polls."""
    groups = [F.udp_mixed(), F.tcp_for_fraglist(), F.gre_mixed(), F.vxlan_mixed()]
    out = []
    while any(groups):
        for g in groups:
            out += g[:7]
            del g[:7]
    return out


# (name, traffic, host options, --csum, rss)
CASES = [
    ("udp", F.udp_mixed, {}, "auto", False),
    ("udp", F.udp_mixed, FWD, "auto", False),
    ("udp", F.udp_mixed, FWD, "trust", False),
    ("udp", F.udp_mixed, FLIST, "auto", False),
    ("udp", F.udp_mixed, FLIST, "verify", False),
    ("udp", F.udp_mixed, {"udp_gro_sockets": (5000,)}, "auto", False),
    ("udp", F.udp_mixed, {"udp_gro_sockets": (5000,), **FLIST}, "verify", False),
    ("udp", F.udp_mixed, FWD, "auto", True),
    ("tcp", F.tcp_for_fraglist, FLIST, "auto", False),
    ("tcp", F.tcp_for_fraglist, FLIST, "trust", False),
    ("tcp", F.tcp_for_fraglist, {**FLIST, "local_tcp": ("192.168.1.100:8000",)}, "auto", False),
    ("tcp", F.tcp_for_fraglist, {**FLIST, "local_tcp": ("[fdaa::2]:1500>[fdaa::1]:8000",)}, "auto", False),
    ("flagged", F.flagged_for_fraglist, FLIST, "auto", False),
    ("flagged", F.flagged_for_fraglist, FLIST, "trust", False),
    ("flagged", F.flagged_for_fraglist, FWD, "verify", False),
    ("gre", F.gre_mixed, {}, "auto", False),
    ("gre", F.gre_mixed, {}, "trust", False),
    ("gre", F.gre_mixed, FLIST, "verify", False),
    ("vxlan", F.vxlan_mixed, {}, "auto", False),
    ("vxlan", F.vxlan_mixed, VXLAN, "auto", False),
    ("vxlan", F.vxlan_mixed, VXLAN, "trust", False),
    ("vxlan", F.vxlan_mixed, VXLAN, "verify", False),
    ("vxlan", F.vxlan_mixed, FWD, "auto", False),
    ("vxlan", F.vxlan_mixed, {**VXLAN, **FLIST}, "auto", False),
    ("vxlan", F.vxlan_mixed, {**VXLAN, **FWD}, "auto", True),
    ("mixed", mixed, {**VXLAN, **FWD}, "auto", False),
    ("mixed", mixed, {**VXLAN, **FLIST, "local_tcp": ("192.168.1.100:8000",)}, "verify", False),
]


def machine_settings(**kw) -> Settings:
    config = oracle_kernel_config()
    kw.setdefault("kernel", oracle_kernel_profile())       # the profile of the oracle's release
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


def case_id(case):
    name, _, host, csum, rss = case
    opts = "+".join(f"{k}={v}" if not isinstance(v, bool) else k for k, v in host.items()) or "plain"
    return f"{name}-{opts}-{csum}" + ("-rss" if rss else "")


# --rss needs the oracle's hash program (tcx links, 6.6+): its cases run where the oracle can make them
RUNNABLE = [c for c in CASES if not c[4] or oracle_supports_rss()]


@pytest.mark.parametrize("name,build,host,csum,rss", RUNNABLE, ids=[case_id(c) for c in RUNNABLE])
def test_breadth_matches_kernel(name, build, host, csum, rss):
    frames = build()
    kernel = replay_frames(frames, csum=csum, host=HostState.build(**host), require_reliable=True,
                           rss_key=DEFAULT_RSS_KEY if rss else None)
    settings = machine_settings(csum=csum, veth_rss=rss, **host)
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, settings))
    assert_identical(frames, kernel, sim, case_id((name, build, host, csum, rss)))


RANDOM_HOSTS = [{}, FWD, FLIST, VXLAN, {**VXLAN, **FWD}, {**VXLAN, **FLIST, "local_tcp": ("192.168.1.100:8000",)},
                {"udp_gro_sockets": (5000, 5001)}, {"udp_gro_sockets": (5000,), **FLIST}]


def random_mix(rng):
    """All the crafted families plus VXLAN and GRE (IPv6 outer) carrying IPv6 TCP,
    interleaved in random runs of 1-6 frames per flow group."""
    import grotool.scenarios as S

    groups = [F.udp_mixed(), F.tcp_for_fraglist(), F.gre_mixed(), F.vxlan_mixed(), F.flagged_for_fraglist(),
              [S.vxlan_frame(S.tcp_frame(family=6, seq=5000 + i * 900, payload=900), family=rng.choice([4, 6]),
                             ip_id=i, zero_csum=rng.random() < 0.5) for i in range(6)],
              [S.gre_frame(S.tcp_frame(family=6, seq=5000 + i * 700, payload=700)[14:], family=6,
                           key=rng.choice([None, 9])) for i in range(5)]]
    out = []
    while any(groups):
        group = rng.choice([g for g in groups if g])
        take = rng.randint(1, 6)
        out += group[:take]
        del group[:take]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_random_mixed_traffic_matches_kernel(seed):
    import random

    rng = random.Random(seed)
    frames = random_mix(rng)
    host = rng.choice(RANDOM_HOSTS)
    csum = rng.choice(["auto", "trust", "verify"])
    rss = rng.random() < 0.3 and oracle_supports_rss()       # (the same traffic without RSS before 6.6)
    kernel = replay_frames(frames, csum=csum, host=HostState.build(**host), require_reliable=True,
                           rss_key=DEFAULT_RSS_KEY if rss else None)
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1,
                        machine_settings(csum=csum, veth_rss=rss, **host)))
    assert_identical(frames, kernel, sim, f"seed {seed}: {host} csum={csum} rss={rss}")


def test_records_cut_by_the_snaplen_go_through_gro_in_their_place():
    """A record shorter than its wire length (dccp_options-oobr.pcap of the tcpdump
    corpus) is injected by grotool kernel as captured, and the kernel takes it
    through GRO where it stands: a cut TCP segment's IP total length exceeds the
    bytes present (inet_gro_receive flushes), so its flow's held packet goes up
    first and the cut segment after it; a cut frame of another protocol goes up
    after the packets before it, not ahead of them."""
    import kernel_support as ks

    flow = ks.tcp_flow(5)
    other = ks.tcp_flow(3, sport=40100, family=6)
    icmp_like = ks.udp(200, sport=41000)
    records = [(flow[0], 0), (flow[1], 0), (flow[2][:100], len(flow[2])), (other[0], 0), (other[1], 0),
               (flow[3], 0), (icmp_like, 0), (icmp_like[:40], len(icmp_like)), (flow[4], 0),
               (other[2][:90], len(other[2]))]
    frames = [data for data, _ in records]
    kernel = replay_frames(frames, csum="auto", host=HostState.build(), require_reliable=True)
    sim = list(simulate([(i, data, wire or len(data)) for i, (data, wire) in enumerate(records)], 1,
                        machine_settings(csum="auto")))
    assert not any(d.reason == "capture_truncated" for d in sim)
    assert_identical(frames, kernel, sim, "cut records")


# Keys whose 16-bit ones' complement sums are equal (0x0001 + 0x0000 = 0x0000 + 0x0001),
# and one that differs: over equal inner bytes the first two give equal GRE checksums.
GRE_KEYS = (0x00010000, 0x00000001, 0x12345678)


def gre_keyed_flows(family: int, teb: bool, checksum: bool):
    """Four 1000-byte segments of one inner TCP flow in each of three GRE tunnels
    (keys GRE_KEYS), interleaved: frame 3*i + k is segment i with key k."""
    import grotool.scenarios as S

    out = []
    for i in range(4):
        for key in GRE_KEYS:
            inner = S.tcp_frame(seq=1000 + i * 1000, payload=1000, ip_id=i)
            out.append(S.gre_frame(inner if teb else inner[14:], proto=S.ETH_P_TEB if teb else None,
                                   key=key, checksum=checksum, family=family, ip_id=i))
    return out


@pytest.mark.parametrize("family", [4, 6])
@pytest.mark.parametrize("teb", [False, True])
@pytest.mark.parametrize("checksum", [False, True])
def test_gre_keys_as_gro_compares_them(family, teb, checksum):
    """gre_gro_receive holds two packets for one tunnel when the flags and
    protocol words and, with the K flag, the word right after them are equal.
    With C and K that word is the checksum field, not the key: the segments
    keyed 0x00010000 and 0x00000001 carry equal checksums and merge with each
    other as one flow, and the oracle must map those aggregates to both keys'
    frames (it used to look for the frames of one key only and found none)."""
    frames = gre_keyed_flows(family, teb, checksum)
    kernel = replay_frames(frames, csum="auto", host=HostState.build(), require_reliable=True)
    sim = list(simulate([(i, f, len(f)) for i, f in enumerate(frames)], 1, machine_settings(csum="auto")))
    if checksum:
        # 0x10000's first segment goes up alone when 1's (one flow to GRO, seq
        # 1000 again) pushes it out; from then on each segment of 1 and 0x10000
        # continues the other's, and 0x12345678 is a flow of its own
        expected = [[0], [1, 3], [4, 6], [7, 9], [2, 5, 8, 11], [10]]
    else:
        expected = [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    assert [p.covers for p in kernel] == expected
    assert_identical(frames, kernel, sim, f"gre keys {family} teb={teb} csum={checksum}")
