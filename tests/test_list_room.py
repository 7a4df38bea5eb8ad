"""skb.clear_keeping_room and skb.delete_keeping_room: list.clear() and
``del items[i]`` for the lists that fill and empty every poll (the NIC ring,
the GRO buckets, the replay's deliveries), which the compiled build empties
keeping their storage.  In either build they must leave exactly what
clear() and del leave, and drop the references they held."""

import sys

import pytest

from grotool.engine.skb import clear_keeping_room, delete_keeping_room


class Item:
    """An object whose references can be counted (and whose release is seen)."""

    released = 0

    def __init__(self, n):
        self.n = n

    def __del__(self):
        Item.released += 1


def _items(count):
    return [Item(n) for n in range(count)]


def test_clear_empties_the_list_and_releases_every_item():
    for count in (0, 1, 3, 8, 100):
        items = _items(count)
        kept = items[0] if items else None
        base = sys.getrefcount(kept) if kept is not None else 0
        Item.released = 0
        clear_keeping_room(items)
        assert items == [] and len(items) == 0
        assert Item.released == max(count - 1, 0)          # all but the one still referenced here
        if kept is not None:
            assert sys.getrefcount(kept) == base - 1          # the list's reference dropped
        items.extend(_items(5))                               # and the list is usable as ever
        items.append(Item(99))
        assert [i.n for i in items] == [0, 1, 2, 3, 4, 99]


@pytest.mark.parametrize("count", [1, 2, 5, 8])
def test_delete_removes_that_item_keeps_the_order_and_releases_it(count):
    for at in range(count):
        items = _items(count)
        gone = items[at]
        base = sys.getrefcount(gone)
        Item.released = 0
        delete_keeping_room(items, at)
        assert [i.n for i in items] == [n for n in range(count) if n != at]
        assert sys.getrefcount(gone) == base - 1 and Item.released == 0
        del gone
        assert Item.released == 1
        while items:                                          # emptied one by one, then refilled
            delete_keeping_room(items, 0)
        assert items == [] and Item.released == count
        items.append(Item(7))
        assert [i.n for i in items] == [7]


def test_a_bucket_fills_empties_and_fills_again_in_order():
    # veth without RSS: every flow in bucket 0.  Eight flows of three segments
    # each fill it; a ninth flow evicts the oldest aggregate (deleted at 0), the
    # poll's budget flushes the rest oldest first (each deleted at 0, the
    # bucket emptied), and the ninth flow's segment is held in it alone
    from grotool import scenarios as S
    from grotool.engine import Settings, simulate

    frames = [S.tcp_frame(seq=1 + burst * 1000, payload=1000, sport=40000 + flow, ip_id=burst)
              for burst in range(3) for flow in range(8)]
    frames.append(S.tcp_frame(seq=3001, payload=1000, sport=40008, ip_id=3))
    out = list(simulate([(i * 1000, f, len(f)) for i, f in enumerate(frames)], 1, Settings(device="veth")))
    assert [(d.indices, d.reason) for d in out] == (
        [((0, 8, 16), "bucket_full_evict_oldest")]
        + [((flow, flow + 8, flow + 16), "budget_exhausted_all") for flow in range(1, 8)]
        + [((24,), "budget_exhausted_all")])
