"""The statistics' total flush reasons are tallied as deliveries come, beside each
flow's own counts: they must keep the order in which each reason was first seen
across all flows (which breaks ties in the JSON's most-frequent-first order),
not the flows' order.  A
flow counts its first reasons in place and any further ones in a dict: the
counts and their order are a plain dict's either way."""

import random

from grotool.engine.skb import Delivery
from grotool.report import stats
from grotool.report.stats import StatsCollector

UNPARSED_LINKTYPE = 147          # a link type grotool does not parse: one flow per interface


def feed(collector, deliveries):
    for index, (interface, reason, segs) in enumerate(deliveries):
        collector.add(Delivery(index, b"\x00" * 60 * segs, segs, reason, tuple(range(segs)),
                               interface=interface))


def test_totals_in_first_seen_order_across_flows():
    collector = StatsCollector(UNPARSED_LINKTYPE)
    # interface 0's flow is made first and sees "b" only after interface 1 saw "c"
    feed(collector, [(0, "a", 2), (1, "c", 1), (0, "b", 1), (1, "a", 3), (2, "b", 1), (2, "c", 1)])
    assert list(collector.reason_counts.items()) == [("a", 2), ("c", 2), ("b", 2)]
    assert [(fs.interface, list(fs.reason_counts.items())) for fs in collector.flows.values()] == [
        (0, [("a", 1), ("b", 1)]), (1, [("c", 1), ("a", 1)]), (2, [("b", 1), ("c", 1)])]
    totals = collector.document({}, {})["totals"]
    # a three-way tie: first seen first
    assert list(totals["flush_reasons"].items()) == [("a", 2), ("c", 2), ("b", 2)]
    assert (totals["packets_in"], totals["packets_out"], totals["super_packets"], totals["max_segs"]) == (9, 6, 2, 3)


def test_totals_follow_later_deliveries():
    collector = StatsCollector(UNPARSED_LINKTYPE)
    feed(collector, [(0, "x", 1), (1, "y", 1)])
    assert collector.reason_counts == {"x": 1, "y": 1}
    feed(collector, [(1, "y", 1), (0, "z", 2), (1, "y", 1)])
    assert list(collector.reason_counts.items()) == [("x", 1), ("y", 3), ("z", 1)]
    assert collector.reasons.most_common() == [("y", 3), ("x", 1), ("z", 1)]
    assert list(collector.document({}, {})["totals"]["flush_reasons"].items()) == [("y", 3), ("x", 1), ("z", 1)]


def test_no_deliveries_no_reasons():
    collector = StatsCollector(UNPARSED_LINKTYPE)
    assert collector.reason_counts == {}
    assert collector.document({}, {})["totals"]["flush_reasons"] == {}


def test_flow_reasons_most_frequent_first_ties_in_first_seen_order():
    collector = StatsCollector(UNPARSED_LINKTYPE)
    # one flow: c and a tie at 2 (c seen first), b once, d three times
    feed(collector, [(0, "c", 1), (0, "b", 1), (0, "a", 1), (0, "d", 1), (0, "c", 1), (0, "d", 1),
                     (0, "a", 1), (0, "d", 1)])
    (flow,) = collector.document({}, {})["flows"]
    assert list(flow["flush_reasons"].items()) == [("d", 3), ("c", 2), ("a", 2), ("b", 1)]
    # the order Counter.most_common gives, without building a Counter per flow
    assert list(flow["flush_reasons"].items()) == collector.flows[(0, collector.namer.flow)].reasons.most_common()


def test_a_flow_counts_any_number_of_reasons_as_a_dict_would():
    # stats.pxd sizes the in-place counters by this number
    assert stats.REASON_SLOTS == 8
    rng = random.Random(5)
    names = [f"reason_{i}" for i in range(20)]
    for distinct in (1, 7, 8, 9, 20):
        collector = StatsCollector(UNPARSED_LINKTYPE)
        expected = {}
        deliveries = []
        for _ in range(400):
            # equal strings that are not the same object count as one reason
            reason = "".join(list(rng.choice(names[:distinct])))
            expected[reason] = expected.get(reason, 0) + 1
            deliveries.append((0, reason, 1))
        feed(collector, deliveries)
        (fs,) = collector.flows.values()
        assert list(fs.reason_counts.items()) == list(expected.items())
        assert list(collector.reason_counts.items()) == list(expected.items())
        assert fs.reasons == expected


def test_flows_delivered_again_are_counted_as_a_dict_by_identity_would():
    # the compiled collector finds a repeat delivery's flow in a 4096-slot table of
    # recent flows (by a hash of the identity's bytes) before its dict: 6,000 flows
    # over 20,000 deliveries share slots, and identities of one flow on another
    # interface are another flow
    from framebuild import tcp_frame

    rng = random.Random(7)
    collector = StatsCollector(1)
    expected = {}
    for index in range(20_000):
        flow = rng.randrange(6000)
        interface = 1 if flow % 7 == 0 and rng.random() < 0.5 else 0
        sport, dport = 1024 + flow, 80 + flow % 3
        frame = tcp_frame(10, sport=sport, dport=dport)
        key = b"\x08\x00" + frame[26:34] + sport.to_bytes(2, "big") + dport.to_bytes(2, "big") + b"\x06" * 4
        segs = 1 + index % 3
        collector.add(Delivery(index, frame, segs, "tcp_push", tuple(range(segs)), key=key, interface=interface))
        counts = expected.setdefault((interface, sport, dport), [0, 0])
        counts[0] += segs
        counts[1] += 1
    got = {(fs.interface, fs.flow[3], fs.flow[4]): [fs.packets_in, fs.packets_out] for fs in collector.flows.values()}
    assert got == expected
    assert len(got) > 6000
