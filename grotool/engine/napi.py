"""The NAPI poll loop on top of the GRO core (net/core/dev.c): which frames
share a poll, when held packets are flushed, and the delivery order.

Two device models:

* ``VethDevice``: the conditions of the kernel oracle (shared/spec/kernel-oracle.md).
  No receive hash, so every flow shares bucket 0 (with ``veth_rss``, the
  oracle's --rss, each frame gets the nic device's Toeplitz hash); every poll takes the next
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

from typing import TYPE_CHECKING, Callable, List, Optional

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only (see _interpreted.py)
else:
    from ._interpreted import cython

from . import csum
from .config import Settings
from .gro import GroNode
from .rss import Toeplitz, hash_input
from .skb import Delivery, Skb, Stats, clear_keeping_room, frame_bytes

NS_PER_S = 1_000_000_000
# The NIC model's clock is a 64-bit integer of nanoseconds (a C integer in the
# compiled build).  Frame timestamps lie within +-TIMESTAMP_LIMIT_NS (the
# Engine refuses others); the settings' delays are bounded (config.py) so that
# a timestamp plus a delay stays below NEVER, which means "no event".
NEVER = (1 << 63) - 1
# what the next event of a queue is (NicDevice.next_kind)
EVENT_IRQ = 0
EVENT_TIMER = 1
EVENT_STEP = 2


def jiffies_at(now: int, hz: int) -> int:
    """The jiffy count at `now` ns, floor(now * hz / 1e9), without the product
    leaving 64 bits."""
    return now // NS_PER_S * hz + now % NS_PER_S * hz // NS_PER_S


# Frames shorter than this are left to tcp.py's per-frame checksum (cheap for them).
CSUM_PRIME_MIN_LEN = 256


def prime_checksums(skbs: List[Skb]) -> int:
    """Sum the bytes of a poll's frames in one pass and leave each total in
    skb.csum, as a CHECKSUM_COMPLETE NIC hands skb->csum to the stack; TCP
    validation (tcp.py) then only takes the pulled headers away.  Pure
    arithmetic: every verdict is the one the per-frame sum gives.  Nothing is
    primed when the one-pass route would not pay (no numpy, or too few bytes),
    so validation sums the frames that actually reach it.  Returns how many
    frames were primed."""
    big = []
    datas = []
    total = 0
    for skb in skbs:
        data = frame_bytes(skb)
        n = len(data)
        if n >= CSUM_PRIME_MIN_LEN:
            big.append(skb)
            datas.append(data)
            total += n
    if not csum.batch_worthwhile(total):
        return 0
    for skb, value in zip(big, csum.one_pass_sums(datas)):
        skb.csum = value
    return len(big)


# Frames summed one by one before the first priming: a small capture does not
# pay numpy's import (tens of milliseconds) for the little it would save.
CSUM_PRIME_AFTER_FRAMES = 5000


class ChecksumPrimer:
    """Primes each poll's checksums while that pays: not for the first
    CSUM_PRIME_AFTER_FRAMES frames, and when most primed frames never reach a
    software check (a capture whose checksums were offloaded, which --csum auto
    accepts without summing), it backs off for 1, 2, 4 ... 256 polls.  Only the
    amount of arithmetic depends on this, never a result."""

    __slots__ = ("stats", "skip", "backoff", "primed", "verified", "warmup")

    def __init__(self, stats: Stats):
        self.stats = stats
        self.skip = 0
        self.backoff = 1
        self.primed = 0
        self.verified = 0
        self.warmup = CSUM_PRIME_AFTER_FRAMES

    def before(self, skbs: List[Skb]) -> None:
        if self.warmup > 0:
            self.warmup -= len(skbs)
            self.primed = 0
            return
        if self.skip:
            self.skip -= 1
            self.primed = 0
            return
        self.primed = prime_checksums(skbs)
        self.verified = self.stats.csum_verified

    def after(self) -> None:
        if self.primed:
            if (self.stats.csum_verified - self.verified) * 2 < self.primed:
                self.skip = self.backoff
                self.backoff = min(self.backoff * 2, 256)
            else:
                self.backoff = 1


# The compiled build sums a frame in C (csum.sum16_range) in less than numpy's
# per-frame share of a poll, and without numpy's import: it does not prime.
PRIME_CHECKSUMS = not cython.compiled


def make_primer(settings: Settings, stats: Stats) -> Optional[ChecksumPrimer]:
    """A primer when TCP checksums are summed at all (not --csum trust, GRO on)
    and priming pays (PRIME_CHECKSUMS)."""
    if not PRIME_CHECKSUMS:
        return None
    return ChecksumPrimer(stats) if settings.gro and settings.csum != "trust" else None


def receive_batch(gro: GroNode, skbs: List[Skb], primer: Optional["ChecksumPrimer"]) -> None:
    """The driver poll handing its frames to GRO, checksums primed per poll."""
    if primer is not None:
        primer.before(skbs)
    for skb in skbs:
        gro.receive(skb)
    if primer is not None:
        primer.after()


def budget_exhausted(gro: GroNode, hz: int) -> None:
    """__napi_poll with work == weight: flush (only jiffy-old packets at HZ >= 1000,
    everything below) before polling again."""
    if hz >= 1000:
        gro.flush_normal(True, "budget_exhausted_old")
    else:
        gro.flush_normal(False, "budget_exhausted_all")


class VethDevice:
    def __init__(self, settings: Settings, stats: Stats, deliver: Callable[[List[Delivery]], None]):
        self.settings = settings
        self.stats = stats
        self.gro = GroNode(settings, stats, deliver, queue=0)
        self.pending: List[Skb] = []
        self.budget = settings.budget
        self.primer = make_primer(settings, stats)
        # --rss: the hash the nic device computes, as grotool kernel --rss sets it
        self.toeplitz = Toeplitz(settings.rss_key) if settings.veth_rss else None

    def feed(self, skb: Skb) -> None:
        if self.toeplitz is not None:
            skb.hash = self.toeplitz.flow_hash(skb.data, skb.start + skb.l2_len, skb.protocol, skb.end)
        self.pending.append(skb)
        if len(self.pending) >= self.budget:
            self._poll()

    def _poll(self) -> None:
        gro = self.gro
        self.stats.polls += 1
        gro.poll += 1
        # each oracle batch is its own timer poll, milliseconds after the previous one
        gro.jiffies = gro.poll
        receive_batch(gro, self.pending, self.primer)
        self.pending = []
        # the oracle pads every batch to the budget: __napi_poll sees work == weight
        budget_exhausted(gro, self.settings.hz)
        if self.settings.hz >= 1000:
            # the repoll finds no work and completes: napi_complete_done(n, 0)
            gro.flush_normal(False, "napi_complete")

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
        self.ring: List[Skb] = []            # frames the NIC has written, oldest first
        self.irq_enabled = True
        self.irq_at = NEVER
        self.timer_at = NEVER
        self.defer_count = 0
        self.poll_at = NEVER                 # with a per-frame poll cost: when the running poll takes its next frame
        self.work = 0
        self.timer_poll = False


class NicDevice:
    def __init__(self, settings: Settings, stats: Stats, deliver: Callable[[List[Delivery]], None]):
        self.settings = settings
        self.stats = stats
        self._to_stack = deliver
        self.queues = [_Queue(i, GroNode(settings, stats, self.deliver, queue=i)) for i in range(settings.rx_queues)]
        self.toeplitz = Toeplitz(settings.rss_key)
        self._hash_cache = self.toeplitz.cache      # input -> hash, as Toeplitz.hash fills it
        self.now = 0
        self.rx_usecs_ns = settings.rx_usecs * 1000
        self.rx_frames = settings.rx_frames
        self.single_queue = self.queues[0] if len(self.queues) == 1 else None
        # ring length that raises the interrupt at once (rx_usecs 0: any; rx_frames 0: never)
        self.irq_frames = 0 if self.rx_usecs_ns == 0 else self.rx_frames if self.rx_frames else 1 << 62
        self.budget = settings.budget
        self.hz = settings.hz
        self.cost = settings.poll_ns_per_frame
        self.gro_flush_timeout = settings.gro_flush_timeout
        self.napi_defer_hard_irqs = settings.napi_defer_hard_irqs
        self.primer = make_primer(settings, stats)
        self.next_at = NEVER                   # earliest pending event, any queue
        self.next_kind = EVENT_IRQ             # its kind, as _next_event leaves it

    def deliver(self, batch: List[Delivery]) -> None:
        """A batch GRO hands to the stack (gro_normal_list) carries the device's
        clock: Delivery.delivered_ns, once per delivery, not per frame."""
        stamp = self.now          # (a C integer in the compiled build)
        for d in batch:
            d._delivered_ns = stamp
        self._to_stack(batch)

    # -- arrival ------------------------------------------------------------------
    def feed(self, skb: Skb) -> None:
        ts = skb.ts
        if ts < self.now:
            ts = self.now                                # clamp a clock going backwards
        if self.next_at < ts:
            self._run_until(ts, inclusive=False)
        self.now = ts
        if cython.compiled:
            h = self.toeplitz.flow_hash(skb.data, skb.start + skb.l2_len, skb.protocol, skb.end)
        else:
            # Toeplitz.flow_hash, inlined: this runs for every frame
            tup = hash_input(skb.data, skb.start + skb.l2_len, skb.protocol, skb.end)
            if tup:
                h = self._hash_cache.get(tup)
                if h is None:
                    h = self.toeplitz.hash(tup)
            else:
                h = 0
        skb.hash = h
        q = self.single_queue
        if q is None:
            queues = self.queues
            q = queues[(h & 127) % len(queues)]
        ring = q.ring
        ring.append(skb)
        if q.irq_enabled:
            irq_at = q.irq_at
            if irq_at == NEVER:
                irq_at = ts + self.rx_usecs_ns
            # at once without moderation delay, or when rx_frames are waiting
            if len(ring) >= self.irq_frames:
                irq_at = ts
            q.irq_at = irq_at
            if irq_at < self.next_at:
                self.next_at = irq_at
        if self.next_at <= ts:
            self._run_until(ts, inclusive=True)

    def finish(self) -> None:
        self._run_until(NEVER, inclusive=True)
        for q in self.queues:
            q.gro.flush_normal(False, "end_of_capture")

    # -- events -------------------------------------------------------------------
    def _next_event(self) -> Optional[_Queue]:
        """The queue whose event comes first (irq, then timer, then poll step on a
        tie, lower queues first); its time and kind are left in next_at and
        next_kind.  None, with next_at NEVER, when nothing is pending."""
        best = None
        at = NEVER
        kind = EVENT_IRQ
        for q in self.queues:
            if q.irq_at < at:
                best, at, kind = q, q.irq_at, EVENT_IRQ
            if q.timer_at < at:
                best, at, kind = q, q.timer_at, EVENT_TIMER
            if q.poll_at < at:
                best, at, kind = q, q.poll_at, EVENT_STEP
        self.next_at = at
        self.next_kind = kind
        return best

    def _run_until(self, limit: int, inclusive: bool) -> None:
        """Run the events due before `limit` (and at it, with inclusive); NEVER: all."""
        while True:
            q = self._next_event()
            if q is None:
                return
            at = self.next_at
            if at > limit or (at == limit and not inclusive):
                return
            if at > self.now:
                self.now = at
            kind = self.next_kind
            if kind == EVENT_STEP:
                self._step(q, at)
                continue
            if kind == EVENT_IRQ:
                q.irq_at = NEVER
                q.irq_enabled = False        # the driver masks its IRQ and schedules NAPI
                self.stats.irqs += 1
                timer = False
            else:
                q.timer_at = NEVER           # napi_watchdog schedules the poll
                self.stats.timer_polls += 1
                timer = True
            if q.poll_at != NEVER:
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
        gro.jiffies = jiffies_at(now, self.hz)
        if q.ring:
            gro.receive(q.ring.pop(0))
            q.work += 1
            q.poll_at = now + self.cost
            if q.work == self.budget:
                budget_exhausted(gro, self.hz)
                self._start_poll(q, q.poll_at, False)
            return
        q.poll_at = NEVER
        self._complete_done(q, now, q.work, q.timer_poll)

    def _poll(self, q: _Queue, now: int, timer: bool) -> None:
        """A poll that takes no time: it sees exactly the frames already in the ring."""
        gro = q.gro
        gro.jiffies = jiffies_at(now, self.hz)
        while True:
            self.stats.polls += 1
            gro.poll += 1
            ring = q.ring
            work = min(self.budget, len(ring))
            if work:
                if work == len(ring):
                    # the whole ring, no copy, emptied after: compiled with its storage kept (it fills each poll)
                    receive_batch(gro, ring, self.primer)
                    if cython.compiled:
                        clear_keeping_room(ring)
                    else:
                        q.ring = []
                else:
                    batch = ring[:work]
                    del ring[:work]
                    receive_batch(gro, batch, self.primer)
            if work == self.budget:
                budget_exhausted(gro, self.hz)
                timer = False
                continue
            self._complete_done(q, now, work, timer)
            return

    def _complete_done(self, q: _Queue, now: int, work: int, timer: bool) -> None:
        """napi_complete_done(n, work)"""
        gro = q.gro
        ring = q.ring
        timeout = 0
        if work:
            if gro.held_count:
                timeout = self.gro_flush_timeout
            q.defer_count = self.napi_defer_hard_irqs
        rearm = True
        if q.defer_count > 0:
            q.defer_count -= 1
            timeout = self.gro_flush_timeout
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
