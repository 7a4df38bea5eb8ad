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

from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from ..linktypes import COOKED_LINKTYPES, is_outgoing
from .config import TIMESTAMP_YEARS, Settings, timestamp_fits
from .link import LinkLayer
from .napi import NicDevice, VethDevice
from .reasons import REASONS
from .skb import Delivery, Stats

__all__ = ["Engine", "Settings", "Delivery", "Stats", "REASONS", "Event", "simulate"]


class Engine:
    """One capture's receive path.  Each capture interface (pcapng) is its own
    device with its own NAPI state and GRO lists, created on its first frame:
    packets of different devices never merge (gro_list_prepare compares p->dev).
    Frames of a link type grotool does not parse are passed through unchanged,
    and so are, with ``settings.outgoing == "pass"`` (the default), frames the
    capture marks as sent by the capturing host (a cooked capture's packet type
    PACKET_OUTGOING; ``receive_sent`` for a pcapng packet's direction flag):
    they never went through the receive path.

    ``events``: None (off, the default), True (decision events are collected;
    take them with ``drain_events()``), or a callable that receives each
    ``Event`` (events.py) as it is decided.  Events never change a delivery."""

    def __init__(self, linktype: int = 1, settings: Settings = Settings(),
                 events: Union[None, bool, Callable[["Event"], None]] = None):
        settings.validate()
        self.settings = settings
        self._events: List["Event"] = []
        self._event_sink: Optional[Callable[["Event"], None]] = \
            self._events.append if events is True else (events or None)
        self.stats = Stats()
        self.linktype = linktype
        self._out: List[Delivery] = []
        self._index = 0
        # interface 0, kept by class too: the compiled build calls its feed (and the link layer's make) directly
        self.device, self._link, self._device_feed = self._new_device(0, linktype)
        # the direct paths take every frame to GRO: not for a link type whose frames
        # are screened for their direction first (_new_device)
        self._nic = self.device if type(self.device) is NicDevice and self._link is not None else None
        self._veth = self.device if type(self.device) is VethDevice and self._link is not None else None
        self._others: Dict[int, tuple] = {}          # interface id -> (device, link layer, feed)
        self.interface_linktypes: Dict[int, int] = {}  # link type of interfaces other than 0's, when it differs

    def _new_device(self, interface: int, linktype: int):
        out = self._out
        if interface == 0:
            deliver = out.extend
        else:
            def deliver(batch: List[Delivery], _extend=out.extend, _interface=interface) -> None:
                for d in batch:
                    d.interface = _interface
                _extend(batch)
        try:
            link = LinkLayer(linktype)
        except ValueError:
            return None, None, self._pass_through(interface)
        device_class = VethDevice if self.settings.device == "veth" else NicDevice
        device = device_class(self.settings, self.stats, deliver)
        if self._event_sink is not None:
            # events.py is imported only when events are asked for: a replay without
            # them does not even compile it
            from .events import EventRecorder

            # a recorder per GRO node: each holds the state of its node's receive
            for gro in ([device.gro] if hasattr(device, "gro") else [q.gro for q in device.queues]):
                EventRecorder(self._event_sink, interface).attach(gro)
        if linktype in COOKED_LINKTYPES and self.settings.outgoing == "pass":
            # the frame says its direction: fed as (ts, data, index), screened, then made
            return device, None, self._screening(interface, linktype, link, device.feed)
        return device, link, device.feed

    def _screening(self, interface: int, linktype: int, link: LinkLayer, device_feed):
        """The feed of a device whose frames say whether the capturing host sent
        them (cooked captures): those pass outside GRO, the others reach it."""
        make = link.make

        def feed(item) -> None:
            ts, data, index = item
            if is_outgoing(linktype, data):
                self._pass_outgoing(ts, data, index, interface)
            else:
                device_feed(make(data, ts, index))
        return feed

    def _pass_outgoing(self, ts: int, data: bytes, index: int, interface: int) -> None:
        """A frame the capturing host sent: delivered unchanged, before and outside GRO."""
        self.stats.outgoing += 1
        self._out.append(Delivery(ts, data, 1, "outgoing", (index,), interface=interface))
        if self._event_sink is not None:
            from .events import outside_gro_event

            self._event_sink(outside_gro_event(index, ts, data, "outgoing", interface))

    def _pass_through(self, interface: int):
        sink = self._event_sink

        def feed(item, _append=self._out.append) -> None:
            ts, data, index = item
            _append(Delivery(ts, data, 1, "unknown_link_type", (index,), interface=interface))
            if sink is not None:
                from .events import outside_gro_event

                sink(outside_gro_event(index, ts, data, "unknown_link_type", interface))
        return feed

    def feed(self, ts: int, data: bytes, wirelen: int = -1, interface: int = 0) -> List[Delivery]:
        """Receive one captured frame; returns the deliveries it caused (often none).
        ``ts``: an int of nanoseconds in [-2**62, 2**62) (TypeError, OverflowError)."""
        out = self.receive(ts, data, wirelen, interface)
        if not out:
            return []
        result = out[:]                 # drain(), inlined
        out.clear()
        return result

    def receive(self, ts: int, data: bytes, wirelen: int = -1, interface: int = 0) -> List[Delivery]:
        """feed() without the copy, for per-frame loops: returns the engine's own
        list of deliveries not yet taken (often empty).  The caller takes them
        and clears the list before feeding the next frame."""
        # the engine's clock is a 64-bit integer (napi.py): a float or an int
        # beyond it is refused, in both builds alike
        if type(ts) is not int:
            raise TypeError(f"frame {self._index + 1}: timestamp {ts!r} is not an int of nanoseconds")
        if not timestamp_fits(ts):
            raise OverflowError(f"frame {self._index + 1}: timestamp {ts} ns is outside the engine's clock "
                                f"(-2**62 to 2**62 ns: {TIMESTAMP_YEARS})")
        return self.receive_record(ts, data, wirelen, interface)

    def receive_record(self, ts: int, data: bytes, wirelen: int = -1, interface: int = 0, start: int = 0,
                       end: int = -1) -> List[Delivery]:
        """receive() for a timestamp known to be an int within the clock's range,
        as grotool's capture readers give them.  With ``end`` given the frame is
        data[start:end]: a record in the reader's buffer, which GRO reads in place
        (the buffer is never changed) and copies only what it holds."""
        index = self._index
        self._index = index + 1
        self.stats.frames = index + 1       # frames fed so far
        out = self._out
        if self._others:
            self._advance_devices(ts, interface)
        if end >= 0:
            if self._nic is not None and not interface and not (0 <= wirelen and end - start < wirelen):
                self._nic.feed(self._link.make(data, ts, index, start, end))
                return out
            if self._veth is not None and not interface:
                self._veth.feed(self._link.make(data, ts, index, start, end))
                return out
            data = data[start:end]          # the other paths take the frame's own bytes
        if 0 <= wirelen and len(data) < wirelen and self._veth is None:
            # cut by snaplen: a NIC received the whole frame, so the bytes captured are not
            # what its kernel saw.  The veth device (grotool kernel's conditions) is given the
            # record as captured, as the oracle injects it, and takes it through GRO in order.
            out.append(Delivery(ts, data, 1, "capture_truncated", (index,), interface=interface))
            if self._event_sink is not None:
                from .events import outside_gro_event

                self._event_sink(outside_gro_event(index, ts, data, "capture_truncated", interface))
        elif interface:
            entry = self._others.get(interface)
            if entry is None:
                entry = self._others[interface] = self._new_device(
                    interface, self.interface_linktypes.get(interface, self.linktype))
            _, link, device_feed = entry
            device_feed(link.make(data, ts, index) if link is not None else (ts, data, index))
        elif self._nic is not None:
            self._nic.feed(self._link.make(data, ts, index))
        elif self._veth is not None:
            self._veth.feed(self._link.make(data, ts, index))
        else:
            self._device_feed((ts, data, index))
        return out

    def receive_sent(self, ts: int, data: bytes, wirelen: int = -1, interface: int = 0) -> List[Delivery]:
        """receive_record() for a frame the capture marks as sent by the capturing
        host (pcapng epb_flags outbound): passed outside GRO, or with
        ``settings.outgoing == "receive"`` taken as received."""
        if self.settings.outgoing != "pass":
            return self.receive_record(ts, data, wirelen, interface)
        index = self._index
        self._index = index + 1
        self.stats.frames = index + 1
        self._pass_outgoing(ts, data, index, interface)
        return self._out

    def _devices(self):
        yield self.device
        for device, _, _ in self._others.values():
            yield device

    def _advance_devices(self, ts: int, interface: int) -> None:
        """Devices run side by side on one clock: before a frame reaches one of
        them, the others' interrupts and timers due before it run."""
        current = self.device if interface == 0 else self._others.get(interface, (None,))[0]
        for device in self._devices():
            if device is None or device is current:
                continue
            next_at = getattr(device, "next_at", None)
            if next_at is not None and next_at < ts:
                device._run_until(ts, inclusive=False)

    def finish(self) -> List[Delivery]:
        """End of capture: run the remaining polls and timers, flush what is held."""
        for device in self._devices():
            if device is not None:
                device.finish()
        return self.drain()

    def drain_events(self) -> List["Event"]:
        """The events collected since the last call (with ``events=True``)."""
        result = list(self._events)
        self._events.clear()
        return result

    def drain(self) -> List[Delivery]:
        out = self._out
        if not out:
            return []
        result = list(out)
        out.clear()
        return result


def __getattr__(name: str):
    # Event lives in events.py, imported on first use (see Engine.__init__)
    if name == "Event":
        from .events import Event
        return Event
    raise AttributeError(name)


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
