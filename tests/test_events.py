"""Decision events (grotool.engine events=...): one event per input frame and
per completion, with the reason, the kernel function, the held entry compared
and the evidence, for each reason family.  Every test also checks that the
delivering events agree with the deliveries, and that events change nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import GRE, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

import framebuild as F
import tunnel_frames as T
from grotool.engine import Engine, Settings
from grotool.engine.events import EventRecorder
from grotool.engine.gro import GroNode

VETH = Settings(device="veth")
BASE_TS = 1_700_000_000 * 10**9
US = 1000
MSS = 1448


def run(frames: Sequence[bytes], settings: Settings = VETH, wirelens=None, linktype: int = 1):
    """(deliveries, events); checks agreement and that events change no delivery."""
    plain = Engine(linktype, settings)
    recorded = Engine(linktype, settings, events=True)
    out_plain, out = [], []
    for i, frame in enumerate(frames):
        wl = wirelens[i] if wirelens else len(frame)
        out_plain += plain.feed(BASE_TS + i * US, frame, wl)
        out += recorded.feed(BASE_TS + i * US, frame, wl)
    out_plain += plain.finish()
    out += recorded.finish()
    events = recorded.drain_events()
    assert [(d.data, d.reason, d.indices, d.layer) for d in out] == \
        [(d.data, d.reason, d.indices, d.layer) for d in out_plain]
    delivered = Counter((e.reason, e.frames, e.layer) for e in events if e.delivered)
    assert delivered == Counter((d.reason, tuple(i + 1 for i in d.indices), d.layer) for d in out)
    assert sorted(e.frame for e in events if e.kind == "frame") == list(range(1, len(frames) + 1))
    return out, events


def frame_event(events, n):
    (event,) = [e for e in events if e.kind == "frame" and e.frame == n]
    return event


def completions(events):
    return [e for e in events if e.kind == "completion"]


def tcp(i: int, **kw) -> bytes:
    """Segment i of one flow: seq, IP ID and payload follow i."""
    kw.setdefault("ip_id", i)
    kw.setdefault("seq", 1000 + i * MSS)
    return F.tcp_frame(kw.pop("payload", MSS), **kw)


# -- engine with events off --------------------------------------------------------------
def test_events_attach_a_recorder_and_shadow_no_method():
    # the node tells its recorder of each receive, complete and normal (GroNode.events):
    # no method is replaced on the instance, with or without events
    engine = Engine(1, VETH)
    gro = engine.device.gro
    assert gro.events is None
    on = Engine(1, VETH, events=True)
    assert isinstance(on.device.gro.events, EventRecorder) and not on.device.gro.events.receiving
    for node in (gro, on.device.gro):
        assert "receive" not in vars(node) and "complete" not in vars(node) and "normal" not in vars(node)
    assert GroNode.receive.__name__ == "receive"


def test_each_queue_records_its_own_node():
    # nic with four RX queues: each GRO node has a recorder of its own, and the
    # interleaved flows' frames and aggregates are told apart (run() checks every
    # frame has one event and the delivered events are the deliveries)
    settings = Settings(rx_queues=4, rx_usecs=50)
    frames = [tcp(i // 8, sport=40000 + i % 8, ip_id=i // 8) for i in range(32)]
    out, events = run(frames, settings)
    engine = Engine(1, settings, events=True)
    recorders = [q.gro.events for q in engine.device.queues]
    assert all(isinstance(r, EventRecorder) for r in recorders) and len({id(r) for r in recorders}) == 4
    queues = {e.queue for e in events}
    assert len(queues) > 1
    merged = Counter(e.outcome for e in events if e.kind == "frame")
    assert merged == {"held": 8, "merged": 24}
    assert sorted(len(e.frames) for e in completions(events)) == [4] * 8
    assert [len(d.indices) for d in out] == [4] * 8


def test_sink_callable_receives_events_in_order():
    got = []
    engine = Engine(1, VETH, events=got.append)
    for i in range(3):
        engine.feed(BASE_TS + i, tcp(i))
    engine.finish()
    assert [(e.kind, e.frame, e.outcome) for e in got] == [
        ("frame", 1, "held"), ("frame", 2, "merged"), ("frame", 3, "merged"), ("completion", 1, "flushed")]
    assert engine.drain_events() == []
    last = got[-1]
    assert (last.reason, last.function, last.frames, last.segs, last.cause) == \
        ("budget_exhausted_all", "__napi_poll", (1, 2, 3), 3, None)
    assert got[1].held_frame == 1 and got[1].held_segs == 1
    assert got[2].held_frame == 1 and got[2].held_segs == 2


# -- TCP ------------------------------------------------------------------------------------
def test_tcp_ack_changed_evidence_both_values():
    _, events = run([tcp(0, ack=0x1A2B3C4D), tcp(1, ack=0x1A2B3C51)])
    e = frame_event(events, 2)
    assert (e.outcome, e.reason, e.function, e.evidence, e.held_frame, e.held_segs) == \
        ("held", "tcp_ack_changed", "tcp_gro_receive", "ack 0x1a2b3c51 != 0x1a2b3c4d", 1, 1)
    c = completions(events)[0]
    assert (c.outcome, c.reason, c.frames, c.cause, c.evidence) == \
        ("completed_held", "tcp_ack_changed", (1,), 2, "ack 0x1a2b3c51 != 0x1a2b3c4d")


def test_tcp_seq_gap_evidence_expected_sequence():
    _, events = run([tcp(0), tcp(1), tcp(3, ip_id=2)])
    e = frame_event(events, 3)
    assert (e.outcome, e.reason, e.evidence, e.held_frame, e.held_segs) == \
        ("held", "tcp_seq_mismatch", f"seq {1000 + 3 * MSS} != expected {1000 + 2 * MSS}", 1, 2)


@pytest.mark.parametrize("changed, reason, evidence", [
    ({"window": 1000}, "tcp_window_changed", "window 1000 != 65535"),
    ({"flags": "AE"}, "tcp_flags_changed", "flags ACK|ECE != ACK"),
    ({"flags": "AC"}, "tcp_cwr", "flags ACK|CWR"),
    ({"tcp_options": F.tcp_opt_ts(101, 7)}, "tcp_ts_changed", "tsval 101 != 100"),
    ({"ttl": 63}, "ip_ttl_changed", "ttl 63 != 64"),
    ({"tos": 2}, "ip_tos_changed", "tos 0x02 != 0x00"),
    ({"df": False}, "ip_df_changed", "df 0 != 1"),
    ({"ip_id": 7}, "ip_id_not_incrementing", "ip id 0x0007 != expected 0x0001"),
])
def test_tcp_and_ipv4_differences(changed, reason, evidence):
    first = {"tcp_options": F.tcp_opt_ts(100, 7)} if "tcp_options" in changed else {}
    _, events = run([tcp(0, **first), tcp(1, **{**first, **changed})])
    e = frame_event(events, 2)
    assert (e.reason, e.evidence, e.held_frame) == (reason, evidence, 1)


def test_ipv6_hop_limit_and_traffic_class():
    _, events = run([tcp(0, family=6), tcp(1, family=6, hop_limit=63), tcp(2, family=6, hop_limit=63, tclass=4)])
    assert (frame_event(events, 2).reason, frame_event(events, 2).evidence, frame_event(events, 2).function) == \
        ("ipv6_hoplimit_changed", "hop limit 63 != 64", "ipv6_gro_flush")
    assert (frame_event(events, 3).reason, frame_event(events, 3).evidence) == \
        ("ipv6_tclass_changed", "traffic class 0x04 != 0x00")


def test_push_merged_then_completed():
    _, events = run([tcp(0), tcp(1, flags="PA"), tcp(2)])
    e = frame_event(events, 2)
    assert (e.outcome, e.reason, e.evidence, e.held_frame, e.held_segs) == \
        ("merged", "tcp_push", "flags PSH|ACK", 1, 1)
    c = completions(events)[0]
    assert (c.outcome, c.reason, c.frames, c.segs, c.cause) == ("completed_held", "tcp_push", (1, 2), 2, 2)
    assert frame_event(events, 3).outcome == "held" and frame_event(events, 3).reason is None


def test_pure_ack_and_syn_sent_up():
    _, events = run([tcp(0, payload=0), tcp(1, flags="S", payload=0)])
    assert (frame_event(events, 1).outcome, frame_event(events, 1).reason, frame_event(events, 1).evidence,
            frame_event(events, 1).frames) == ("sent_up", "tcp_no_payload", "payload 0", (1,))
    assert (frame_event(events, 2).reason, frame_event(events, 2).evidence) == ("tcp_syn", "flags SYN")


def test_merge_size_limit_evidence():
    settings = Settings(device="veth", gro_max_size=4000, gro_ipv4_max_size=4000)
    _, events = run([tcp(0), tcp(1), tcp(2)], settings)
    e = frame_event(events, 3)
    # p->len counts from the IP header: 2 * (20 + 20 + 1448) - 40 of the second header
    assert (e.reason, e.function, e.evidence, e.held_segs) == \
        ("merge_max_size", "skb_gro_receive", "size 2936 + 1448 >= 4000", 2)


def test_checksum_and_length_problems_alone():
    _, events = run([tcp(0, tcp_csum=True), tcp(1, trailer=b"\x00" * 4)], Settings(device="veth", csum="verify"))
    e1, e2 = frame_event(events, 1), frame_event(events, 2)
    assert (e1.outcome, e1.reason, e1.function) == ("sent_up", "tcp_csum_bad", "tcp4/6_gro_receive")
    assert e1.evidence.startswith("tcp checksum 0x") and e1.evidence.endswith(" does not verify")
    assert (e2.outcome, e2.reason, e2.evidence) == \
        ("sent_up", "ip_len_mismatch", f"total length {40 + MSS} != {44 + MSS} bytes present")


def test_arp_and_truncated_and_unknown_link():
    arp = F.arp_frame()
    _, events = run([arp, tcp(1)], Settings(), wirelens=[len(arp), len(tcp(1)) + 10])     # nic: passed through
    assert (frame_event(events, 1).reason, frame_event(events, 1).evidence, frame_event(events, 1).function) == \
        ("no_l2_handler", "ethertype 0x0806", "dev_gro_receive")
    assert (frame_event(events, 2).outcome, frame_event(events, 2).reason) == ("sent_up", "capture_truncated")
    _, events = run([b"\x01\x02\x03"], linktype=105)
    assert (events[0].outcome, events[0].reason, events[0].frames) == ("sent_up", "unknown_link_type", (1,))


# -- list and poll level ------------------------------------------------------------------
def test_bucket_full_evicts_oldest():
    frames = [tcp(0, sport=2000 + k) for k in range(9)]      # nine flows, one veth bucket
    _, events = run(frames)
    (evicted,) = [e for e in events if e.outcome == "evicted"]
    assert (evicted.reason, evicted.function, evicted.frames, evicted.cause, evicted.evidence) == \
        ("bucket_full_evict_oldest", "gro_flush_oldest", (1,), 9, "bucket 0 held 8 packets")
    assert frame_event(events, 9).outcome == "held"


def test_nic_polls_and_napi_complete():
    _, events = run([tcp(0), tcp(1)], Settings(rx_usecs=0))
    flushed = completions(events)
    assert [(c.outcome, c.reason, c.frames) for c in flushed] == \
        [("flushed", "napi_complete", (1,)), ("flushed", "napi_complete", (2,))]
    assert [frame_event(events, n).poll for n in (1, 2)] == [1, 2]


# -- UDP and fraglist ----------------------------------------------------------------------
def test_udp_without_gro_path():
    _, events = run(T.udp_flow(2))
    assert (frame_event(events, 1).reason, frame_event(events, 1).evidence) == \
        ("udp_no_gro_path", "no GRO path for udp port 5202")


def test_udp_segment_gro_length_evidence():
    settings = Settings(device="veth", udp_gro_forwarding=True)
    frames = T.udp_flow(3, 1000, last=500) + [T.udp_flow(5, 1000)[4]]
    _, events = run(frames, settings)
    assert [frame_event(events, n).outcome for n in (1, 2, 3)] == ["held", "merged", "merged"]
    e = frame_event(events, 3)
    assert (e.reason, e.function, e.evidence, e.held_segs) == \
        ("udp_short_last", "udp_gro_receive_segment", "udp len 508 < 1008", 2)
    larger = T.udp_flow(1, 1000) + [T.udp_flow(2, 1200)[1]]
    _, events = run(larger, settings)
    assert (frame_event(events, 2).reason, frame_event(events, 2).evidence) == \
        ("udp_len_larger", "udp len 1208 > 1008")


def test_udp_fraglist_merges():
    _, events = run(T.udp_flow(3), Settings(device="veth", rx_gro_list=True))
    assert [frame_event(events, n).outcome for n in (1, 2, 3)] == ["held", "merged", "merged"]
    (c,) = completions(events)
    assert (c.frames, c.reason) == ((1, 2, 3), "budget_exhausted_all")


def test_tcp_fraglist_flag_word_mismatch():
    frames = T.tcp_flow(3, src="10.0.0.1", dst="10.0.0.2", sport=4000, dport=5201, flags_at={2: "PA"})
    _, events = run(frames, Settings(device="veth", rx_gro_list=True))
    assert frame_event(events, 2).outcome == "merged"
    e = frame_event(events, 3)
    assert (e.outcome, e.reason, e.evidence) == ("sent_up", "tcp_push", "flags PSH|ACK")
    (c,) = [c for c in completions(events) if c.cause == 3]
    assert (c.reason, c.evidence, c.frames) == ("tcp_flist_mismatch", "flags PSH|ACK != ACK", (1, 2))


# -- tunnels ---------------------------------------------------------------------------------
def _vxlan(i: int, inner_ttl: int = 64) -> bytes:
    inner = Ether(dst=T.INNER_MAC_DST, src=T.INNER_MAC_SRC) / IP(
        src=T.INNER4[0], dst=T.INNER4[1], id=i, flags="DF", ttl=inner_ttl) / TCP(
        sport=33000, dport=5201, seq=1000 + i * T.MSS, ack=7000, flags="A", window=1000) / Raw(T.data(T.MSS, i))
    udp = UDP(sport=49152, dport=4789, chksum=0)
    return bytes(Ether(dst=T.OUTER_MAC_DST, src=T.OUTER_MAC_SRC) / IP(
        src=T.OUTER4[0], dst=T.OUTER4[1], id=100 + i, flags="DF", ttl=64) / udp / VXLAN(vni=42, flags=0x08) / inner)


def test_vxlan_inner_ttl_names_the_inner_header():
    settings = Settings(device="veth", vxlan_ports=(4789,))
    _, events = run([_vxlan(0), _vxlan(1), _vxlan(2, inner_ttl=63)], settings)
    assert frame_event(events, 2).outcome == "merged"
    e = frame_event(events, 3)
    assert (e.outcome, e.reason, e.layer, e.evidence, e.held_segs) == \
        ("held", "ip_ttl_changed", "inner", "inner ttl 63 != 64", 2)
    (c,) = [c for c in completions(events) if c.cause == 3]
    assert (c.layer, c.frames) == ("inner", (1, 2))


def test_vxlan_without_port_is_udp_without_gro_path():
    _, events = run([_vxlan(0)])
    assert frame_event(events, 1).reason == "udp_no_gro_path"


def _gre(i: int, outer_ttl: int = 64) -> bytes:
    inner = T.inner_tcp(i)
    return bytes(Ether(dst=T.OUTER_MAC_DST, src=T.OUTER_MAC_SRC) / IP(
        src=T.OUTER4[0], dst=T.OUTER4[1], id=100 + i, flags="DF", ttl=outer_ttl, proto=47) / GRE(proto=0x0800) / inner)


def test_gre_outer_ttl_names_the_outer_header():
    _, events = run([_gre(0), _gre(1), _gre(2, outer_ttl=60)])
    assert frame_event(events, 2).outcome == "merged"
    e = frame_event(events, 3)
    assert (e.reason, e.layer, e.evidence) == ("ip_ttl_changed", "outer", "outer ttl 60 != 64")


def test_event_json_fields():
    _, events = run([tcp(0, ack=1), tcp(1, ack=2)])
    doc = frame_event(events, 2).as_json()
    assert doc == {"event": "frame", "frame": 2, "ts_ns": BASE_TS + US, "outcome": "held",
                   "reason": "tcp_ack_changed", "function": "tcp_gro_receive",
                   "evidence": "ack 0x00000002 != 0x00000001", "queue": 0, "poll": 1, "bucket": 0,
                   "held": {"frame": 1, "segs": 1}}


# -- the Python API --------------------------------------------------------------------------
def test_api_events_need_events_true_and_follow_the_packet_iteration():
    import grotool

    mixed = str(Path(__file__).resolve().parent.parent / "captures" / "mixed.pcap")
    with pytest.raises(RuntimeError, match="events=True"):
        grotool.Replay(mixed).events()
    run = grotool.Replay(mixed, events=True)
    packets = iter(run)
    next(packets)
    with pytest.raises(RuntimeError, match="still running"):
        run.events()
    rest = list(packets)
    decisions = list(run.events())
    assert len(rest) + 1 == 271
    assert sum(1 for d in decisions if d.kind == "frame") == 318
    assert Counter(d.reason for d in decisions if d.frames) == Counter(run.statistics.flush_reasons)
    lazy = grotool.Replay(mixed, events=True)
    assert [(d.kind, d.frame, d.outcome, d.reason, d.frames) for d in lazy.events()] == \
        [(d.kind, d.frame, d.outcome, d.reason, d.frames) for d in decisions]
    assert lazy.statistics.packets_out == 271


def test_vlan_tagged_segments_and_a_changed_tag():
    tag10 = [(0x8100, F.vlan_tci(10))]
    tag11 = [(0x8100, F.vlan_tci(11))]
    _, events = run([tcp(0, vlans=tag10), tcp(1, vlans=tag10), tcp(2, vlans=tag11)])
    assert (frame_event(events, 2).outcome, frame_event(events, 2).held_frame) == ("merged", 1)
    # another tag is another flow: nothing to compare with, nothing completed
    e = frame_event(events, 3)
    assert (e.outcome, e.reason, e.held_frame) == ("held", None, None)
    assert [(c.frames, c.reason) for c in completions(events)] == \
        [((1, 2), "budget_exhausted_all"), ((3,), "budget_exhausted_all")]


def test_geneve_inner_flow_merges_and_names_the_held_entry():
    from scapy.contrib.geneve import GENEVE

    def frame(i: int, vni: int = 7) -> bytes:
        inner = Ether(dst=T.INNER_MAC_DST, src=T.INNER_MAC_SRC) / T.inner_tcp(i)
        return bytes(Ether(dst=T.OUTER_MAC_DST, src=T.OUTER_MAC_SRC) / IP(
            src=T.OUTER4[0], dst=T.OUTER4[1], id=100 + i, flags="DF") / UDP(sport=50000, dport=6081, chksum=0)
            / GENEVE(vni=vni, proto=0x6558) / inner)
    _, events = run([frame(0), frame(1), frame(2, vni=8)], Settings(device="veth", geneve_ports=(6081,)))
    assert (frame_event(events, 2).outcome, frame_event(events, 2).held_frame) == ("merged", 1)
    assert (frame_event(events, 3).outcome, frame_event(events, 3).held_frame) == ("held", None)
    assert [c.frames for c in completions(events)] == [(1, 2), (3,)]
