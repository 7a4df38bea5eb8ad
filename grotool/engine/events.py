"""Decision events: what the GRO engine decided for each input frame and each
completed aggregate, as plain data (sans-IO; nothing is printed here).

Off by default.  ``Engine(..., events=sink)`` attaches an ``EventRecorder`` to
every GroNode: the node's ``receive``, ``complete`` and ``normal`` tell it of
each call (GroNode.events; without events, one test per call).
Evidence strings are derived after the decision, from the two packets'
headers (evidence.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional, Tuple

from .config import GRO_HASH_BUCKETS
from .evidence import evidence, flush_evidence, version_row
from .reasons import REASONS
from .skb import rebase, segment_indices, settled_key

SCHEMA = "grotool.events/1"
FRAME_OUTCOMES = ("merged", "held", "sent_up")
COMPLETION_OUTCOMES = ("completed_held", "evicted", "flushed")


@dataclass(frozen=True)
class Event:
    """One decision.  ``kind`` "frame": what happened to input frame ``frame``
    (outcome merged / held / sent_up); ``kind`` "completion": a held aggregate
    was completed and delivered (completed_held: by an arriving frame, ``cause``;
    evicted: its bucket was full; flushed: by the poll loop).  Frame numbers are
    1-based, as tshark and Wireshark show them."""

    kind: str
    frame: int                       # the input frame; for a completion, the aggregate's first frame
    ts: int                          # that frame's capture timestamp, ns
    outcome: str
    reason: Optional[str]            # vocabulary name (reasons.py), None for a plain merge or hold
    function: str                    # kernel function that decided (REASONS[reason][1]), "" without reason
    evidence: str                    # the field that differed, both values ("ttl 64 != 63"), or ""
    layer: str = ""                  # "outer"/"inner": header of an L3 reason in a tunnelled packet
    queue: int = 0                   # RX queue (NAPI instance)
    poll: int = 0                    # poll number on that queue
    bucket: int = 0                  # GRO hash bucket
    held_frame: Optional[int] = None  # the held aggregate compared with: its first frame
    held_segs: int = 0               # ... and its segments at that moment
    frames: Tuple[int, ...] = ()     # frames delivered: (frame,) when sent up, the aggregate's on completion
    segs: int = 0                    # segments delivered (0 when nothing was delivered)
    cause: Optional[int] = None      # completion: the frame whose arrival completed it
    interface: int = 0               # capture interface (device)
    key: bytes = field(default=b"", repr=False)    # the engine's flow identity (b"" when not parsed)
    data: bytes = field(default=b"", repr=False)   # the frame (for a completion, its first frame)
    row: str = ""                    # the kernel history row whose version-dependent branch decided, or ""

    @property
    def delivered(self) -> bool:
        """True when this event is the one that delivered a packet."""
        return self.segs > 0

    def as_json(self) -> dict:
        """The grotool.events/1 object without the flow (docs/events.md)."""
        doc = {"event": self.kind, "frame": self.frame, "ts_ns": self.ts, "outcome": self.outcome,
               "reason": self.reason, "function": self.function or None, "evidence": self.evidence or None,
               "queue": self.queue, "poll": self.poll, "bucket": self.bucket}
        if self.layer:
            doc["layer"] = self.layer
        if self.held_frame is not None:
            doc["held"] = {"frame": self.held_frame, "segs": self.held_segs}
        if self.segs:
            doc["frames"] = list(self.frames)
            doc["segs"] = self.segs
        if self.cause is not None:
            doc["cause"] = self.cause
        if self.interface:
            doc["interface"] = self.interface
        if self.row:
            doc["row"] = self.row
        return doc


def _function(reason: Optional[str]) -> str:
    return REASONS[reason][1] if reason else ""


def _layer(p, reason: str) -> str:
    # as GroNode.complete names it for the Delivery
    return p.flush_layer if p.encap_mark and reason == p.flush else ""


class EventRecorder:
    """Records one GroNode's decisions into ``sink`` (a callable taking an Event).
    The node tells it of each receive, complete and normal call (GroNode.events)."""

    def __init__(self, sink: Callable[[Event], None], interface: int = 0):
        self.sink = sink
        self.interface = interface
        self._skb = None                # the frame being received, while it is
        self._completed: List = []      # (p, event) of the aggregates it completed
        self._sent: Optional[str] = None   # the reason it went up alone, if it did

    def attach(self, gro) -> None:
        gro.events = self

    @property
    def receiving(self) -> bool:
        """Inside record_receive: the node's receive runs its rules."""
        return self._skb is not None

    def record_complete(self, gro, p, reason: str) -> None:
        """Before gro.complete(p, reason): the completion event (a tunnel's
        completion rewrites encap_mark)."""
        skb = self._skb
        frames = tuple(i + 1 for i in segment_indices(p))
        layer = _layer(p, reason)
        if reason == "bucket_full_evict_oldest":
            outcome, cause, why = "evicted", skb.index + 1, flush_evidence(reason, p, gro)
        elif skb is not None:
            outcome, cause = "completed_held", skb.index + 1
            why = evidence(reason, p, skb, gro, layer)
        else:
            outcome, cause, why = "flushed", None, flush_evidence(reason, p, gro)
        event = Event("completion", p.index + 1, p.ts, outcome, reason, _function(reason), why, layer,
                      gro.queue, gro.poll, p.hash & (GRO_HASH_BUCKETS - 1), None, 0, frames, p.count,
                      cause, self.interface, p.key, p.data,
                      version_row(reason, p, skb, gro, layer) if outcome == "completed_held" else "")
        if skb is not None:
            self._completed.append((p, event))
        else:
            self.sink(event)

    def record_normal(self, reason: str) -> None:
        """Before gro.normal(skb, reason)."""
        self._sent = reason

    def record_receive(self, gro, skb) -> None:
        """gro.receive(skb), and the frame's event with the completions it caused."""
        # the frame gets its own bytes first: the evidence reads the arriving
        # frame and the held packet's at the same header offsets
        rebase(skb)
        self._skb = skb
        self._sent = None
        completed: List = []
        self._completed = completed
        try:
            gro.receive(skb)
        finally:
            self._skb = None
        compared = next((p for p, e in completed if e.outcome == "completed_held"), None)
        sent = self._sent
        bucket = skb.hash & (GRO_HASH_BUCKETS - 1)
        key = settled_key(skb) if skb.l4_off else b""
        if skb.same_flow:
            outcome = "merged"
            if compared is None:
                compared = gro.buckets[bucket].find(skb.hash, key)
            reason = compared.flush if compared is not None and compared.flush and \
                any(p is compared for p, _ in completed) else None
            held_segs = compared.count - skb.count if compared is not None else 0
        else:
            outcome = "sent_up" if sent is not None else "held"
            reason = sent if sent is not None else (compared.flush if compared is not None else None)
            if compared is None and sent == "udp_flist_csum_state":
                compared = gro.buckets[bucket].find(skb.hash, settled_key(skb))   # it stays held
            held_segs = compared.count if compared is not None else 0
        done = next((e for p, e in completed if p is compared and e.reason == reason), None)
        if done is not None and outcome != "sent_up":
            # as recorded before complete() (a tunnel's completion clears encap_mark)
            layer, why = done.layer, done.evidence
        else:
            layer = _layer(compared, reason) if compared is not None and reason and outcome != "sent_up" else ""
            why = evidence(reason, compared, skb, gro, layer) if reason else ""
        frame = skb.index + 1
        sink = self.sink
        sink(Event("frame", frame, skb.ts, outcome, reason, _function(reason), why, layer, gro.queue,
                   gro.poll, bucket, compared.index + 1 if compared is not None else None, held_segs,
                   (frame,) if sent is not None else (), 1 if sent is not None else 0, None, self.interface,
                   key, skb.data, version_row(reason, compared, skb, gro, layer)))
        for _, e in completed:
            sink(e)


def outside_gro_event(index: int, ts: int, data: bytes, reason: str, interface: int = 0) -> Event:
    """A frame the engine passes through before GRO (cut by snaplen, unknown link type)."""
    frame = index + 1
    return Event("frame", frame, ts, "sent_up", reason, _function(reason), "", "", 0, 0, 0, None, 0,
                 (frame,), 1, None, interface, b"", data)
