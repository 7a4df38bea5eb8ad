"""The NAPI poll loop on top of the GRO core (net/core/dev.c): which frames
share a poll, when held packets are flushed, and the delivery order.

Two device models:

* ``VethDevice``: the conditions of the kernel oracle (shared/spec/kernel-oracle.md).
  No receive hash, so every flow shares bucket 0; every poll takes the next
  ``budget`` frames of the capture and, padded to the budget as the oracle pads
  it, exhausts it, which at HZ < 1000 flushes everything.  Timestamps do not
  matter.

* ``NicDevice``: a NIC with RSS.  Frames arrive at their capture timestamps on
  the queue their Toeplitz hash picks; an interrupt fires ``rx_usecs`` after the
  first frame that finds the interrupt armed, or at once when ``rx_frames`` are
  waiting; the poll it schedules runs at once and takes at most ``budget``
  frames; a poll that exhausts its budget flushes (everything at HZ < 1000, only
  packets held since an earlier jiffy at HZ >= 1000) and polls again; a poll
  that does not completes with napi_complete_done semantics, including
  gro_flush_timeout and napi_defer_hard_irqs.  Polls take no simulated time, so
  a poll sees exactly the frames that arrived before it.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Deque, List, Optional

from .config import Settings
from .gro import GroNode
from .rss import Toeplitz, hash_input
from .skb import Delivery, Skb, Stats

NS_PER_S = 1_000_000_000


class VethDevice:
    def __init__(self, settings: Settings, stats: Stats, deliver: Callable[[List[Delivery]], None]):
        self.settings = settings
        self.stats = stats
        self.gro = GroNode(settings, stats, deliver, queue=0)
        self.pending: List[Skb] = []
        self.budget = settings.budget

    def feed(self, skb: Skb) -> None:
        self.pending.append(skb)
        if len(self.pending) >= self.budget:
            self._poll()

    def _poll(self) -> None:
        gro = self.gro
        self.stats.polls += 1
        gro.poll += 1
        # each oracle batch is its own timer poll, milliseconds after the previous one
        gro.jiffies = gro.poll
        receive = gro.receive
        for skb in self.pending:
            receive(skb)
        self.pending = []
        # the oracle pads every batch to the budget: __napi_poll sees work == weight
        if self.settings.hz >= 1000:
            gro.flush_normal(True, "budget_exhausted_old")
            # the repoll finds no work and completes: napi_complete_done(n, 0)
            gro.flush_normal(False, "napi_complete")
        else:
            gro.flush_normal(False, "budget_exhausted_all")

    def finish(self) -> None:
        if self.pending:
            self._poll()
        self.gro.flush_normal(False, "end_of_capture")


class _Queue:
    """One RX queue and its NAPI instance."""

    __slots__ = ("index", "gro", "ring", "irq_enabled", "irq_at", "timer_at", "defer_count",
                 "poll_at", "work", "timer_poll")

    def __init__(self, index: int, gro: GroNode):
        self.index = index
        self.gro = gro
        self.ring: Deque[Skb] = deque()
        self.irq_enabled = True
        self.irq_at: Optional[int] = None
        self.timer_at: Optional[int] = None
        self.defer_count = 0
        self.poll_at: Optional[int] = None   # with a per-frame poll cost: when the running poll takes its next frame
        self.work = 0
        self.timer_poll = False


class NicDevice:
    def __init__(self, settings: Settings, stats: Stats, deliver: Callable[[List[Delivery]], None]):
        self.settings = settings
        self.stats = stats
        self.queues = [_Queue(i, GroNode(settings, stats, deliver, queue=i)) for i in range(settings.rx_queues)]
        self.toeplitz = Toeplitz(settings.rss_key)
        self.now = 0
        self.rx_usecs_ns = settings.rx_usecs * 1000
        self.rx_frames = settings.rx_frames
        self.budget = settings.budget
        self.hz = settings.hz
        self.cost = settings.poll_ns_per_frame
        self.next_at: Optional[int] = None     # earliest pending IRQ or timer, any queue

    # -- arrival ------------------------------------------------------------------
    def feed(self, skb: Skb) -> None:
        ts = skb.ts if skb.ts > self.now else self.now      # clamp a clock going backwards
        if self.next_at is not None and self.next_at < ts:
            self._run_until(ts, inclusive=False)
        self.now = ts
        tup = hash_input(skb.data, skb.l2_len, skb.protocol)
        skb.hash = self.toeplitz.hash(tup) if tup else 0
        q = self.queues[(skb.hash & 127) % len(self.queues)] if len(self.queues) > 1 else self.queues[0]
        q.ring.append(skb)
        if q.irq_enabled:
            if q.irq_at is None:
                q.irq_at = ts + self.rx_usecs_ns
            if self.rx_usecs_ns == 0 or (self.rx_frames and len(q.ring) >= self.rx_frames):
                q.irq_at = ts
            if self.next_at is None or q.irq_at < self.next_at:
                self.next_at = q.irq_at
        if self.next_at is not None and self.next_at <= ts:
            self._run_until(ts, inclusive=True)

    def finish(self) -> None:
        self._run_until(None, inclusive=True)
        for q in self.queues:
            q.gro.flush_normal(False, "end_of_capture")

    # -- events -------------------------------------------------------------------
    def _next_event(self):
        best = None
        for q in self.queues:
            if q.irq_at is not None and (best is None or q.irq_at < best[0]):
                best = (q.irq_at, "irq", q)
            if q.timer_at is not None and (best is None or q.timer_at < best[0]):
                best = (q.timer_at, "timer", q)
            if q.poll_at is not None and (best is None or q.poll_at < best[0]):
                best = (q.poll_at, "step", q)
        self.next_at = best[0] if best else None
        return best

    def _run_until(self, limit: Optional[int], inclusive: bool) -> None:
        while True:
            ev = self._next_event()
            if ev is None:
                return
            at, kind, q = ev
            if limit is not None and (at > limit or (at == limit and not inclusive)):
                return
            if at > self.now:
                self.now = at
            if kind == "step":
                self._step(q, at)
                continue
            if kind == "irq":
                q.irq_at = None
                q.irq_enabled = False        # the driver masks its IRQ and schedules NAPI
                self.stats.irqs += 1
                timer = False
            else:
                q.timer_at = None            # napi_watchdog schedules the poll
                self.stats.timer_polls += 1
                timer = True
            if q.poll_at is not None:
                continue                     # already polling: napi_schedule finds it scheduled
            if self.cost:
                self._start_poll(q, at, timer)
            else:
                self._poll(q, at, timer)

    # -- polls that take time: --poll-ns-per-frame ---------------------------------
    def _start_poll(self, q: _Queue, now: int, timer: bool) -> None:
        self.stats.polls += 1
        q.gro.poll += 1
        q.work = 0
        q.timer_poll = timer
        q.poll_at = now

    def _step(self, q: _Queue, now: int) -> None:
        """One frame of a running poll at `now`, or its end when the ring is empty.
        Frames that arrive while the poll runs join it, up to the budget."""
        gro = q.gro
        gro.jiffies = now * self.hz // NS_PER_S
        if q.ring:
            gro.receive(q.ring.popleft())
            q.work += 1
            q.poll_at = now + self.cost
            if q.work == self.budget:
                self._budget_exhausted(gro)
                self._start_poll(q, q.poll_at, False)
            return
        q.poll_at = None
        self._complete_done(q, now, q.work, q.timer_poll)

    def _poll(self, q: _Queue, now: int, timer: bool) -> None:
        """A poll that takes no time: it sees exactly the frames already in the ring."""
        gro = q.gro
        gro.jiffies = now * self.hz // NS_PER_S
        while True:
            self.stats.polls += 1
            gro.poll += 1
            ring = q.ring
            work = min(self.budget, len(ring))
            receive = gro.receive
            for _ in range(work):
                receive(ring.popleft())
            if work == self.budget:
                self._budget_exhausted(gro)
                timer = False
                continue
            self._complete_done(q, now, work, timer)
            return

    def _budget_exhausted(self, gro: GroNode) -> None:
        """__napi_poll with work == weight: flush (all at HZ < 1000) and poll again."""
        if self.hz >= 1000:
            gro.flush_normal(True, "budget_exhausted_old")
        else:
            gro.flush_normal(False, "budget_exhausted_all")

    def _complete_done(self, q: _Queue, now: int, work: int, timer: bool) -> None:
        """napi_complete_done(n, work)"""
        gro = q.gro
        settings = self.settings
        ring = q.ring
        timeout = 0
        if work:
            if gro.held_count:
                timeout = settings.gro_flush_timeout
            q.defer_count = settings.napi_defer_hard_irqs
        rearm = True
        if q.defer_count > 0:
            q.defer_count -= 1
            timeout = settings.gro_flush_timeout
            if timeout:
                rearm = False            # keep the IRQ masked, the timer polls
        if timeout:
            gro.flush_normal(True, "napi_complete_old")
            q.timer_at = now + timeout
        else:
            gro.flush_normal(False, "flush_timeout" if timer and not work else "napi_complete")
        if rearm:
            q.irq_enabled = True
            if ring:
                q.irq_at = now + self.rx_usecs_ns
