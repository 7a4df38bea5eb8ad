"""grotool's GRO engine: sans-IO.  Feed (timestamp, frame) pairs, get
Delivery objects back in the order Linux would hand them to the stack.

    engine = Engine(linktype=1, settings=Settings(device="veth"))
    for ts, frame, wirelen in records:
        for delivery in engine.feed(ts, frame, wirelen):
            ...
    for delivery in engine.finish():
        ...
"""

from __future__ import annotations

from typing import Iterable, Iterator, List, Tuple

from .config import Settings
from .link import LinkLayer
from .napi import NicDevice, VethDevice
from .reasons import REASONS
from .skb import Delivery, Stats

__all__ = ["Engine", "Settings", "Delivery", "Stats", "REASONS", "simulate"]


class Engine:
    def __init__(self, linktype: int = 1, settings: Settings = Settings()):
        settings.validate()
        self.settings = settings
        self.stats = Stats()
        self.link = LinkLayer(linktype)
        self._out: List[Delivery] = []
        device = VethDevice if settings.device == "veth" else NicDevice
        self.device = device(settings, self.stats, self._out.extend)
        self._index = 0
        # bound once: feed runs for every frame
        self._make = self.link.make
        self._device_feed = self.device.feed

    def feed(self, ts: int, data: bytes, wirelen: int = -1) -> List[Delivery]:
        """Receive one captured frame; returns the deliveries it caused (often none)."""
        index = self._index
        self._index = index + 1
        self.stats.frames += 1
        out = self._out
        if 0 <= wirelen and len(data) < wirelen:
            # cut by snaplen: the kernel never saw this frame as captured
            out.append(Delivery(ts, data, 1, "capture_truncated", (index,)))
        else:
            self._device_feed(self._make(data, ts, index))
        if not out:
            return []
        result = out[:]                 # drain(), inlined
        out.clear()
        return result

    def finish(self) -> List[Delivery]:
        """End of capture: run the remaining polls and timers, flush what is held."""
        self.device.finish()
        return self.drain()

    def drain(self) -> List[Delivery]:
        out = self._out
        if not out:
            return []
        result = list(out)
        out.clear()
        return result


def simulate(records: Iterable[Tuple[int, bytes, int]], linktype: int = 1,
             settings: Settings = Settings()) -> Iterator[Delivery]:
    """Convenience generator over a whole capture."""
    engine = Engine(linktype, settings)
    feed = engine.feed
    for ts, data, wirelen in records:
        out = feed(ts, data, wirelen)
        if out:
            yield from out
    yield from engine.finish()
