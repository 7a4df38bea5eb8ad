"""Decision events for people and scripts: the flow filter of `grotool explain`,
frame ranges, and the grotool.events/1 JSON Lines records (docs/events.md).
No printing here."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

from .flows import IP_PROTO_NAMES, FlowTuple, flow_json, flow_label

SCHEMA = "grotool.events/1"


def parse_frame_range(text: str) -> Tuple[int, int]:
    """"N" or "N-M" (1-based, inclusive) -> (N, M); ValueError when malformed."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m:
        raise ValueError(f"{text!r}: expected N or N-M (frame numbers from 1)")
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) else first
    if first < 1 or last < first:
        raise ValueError(f"{text!r}: expected 1 <= N <= M")
    return first, last


def compress_frames(frames: Iterable[int]) -> str:
    """(3, 4, 5, 9) -> "3-5,9"."""
    parts: List[str] = []
    run: List[int] = []
    for f in frames:
        if run and f == run[-1] + 1:
            run.append(f)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [f]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts)


@dataclass(frozen=True)
class Endpoint:
    address: Optional[str]      # normalised text, None for any
    port: Optional[int]         # None for any

    def matches(self, address: str, port: Optional[int]) -> bool:
        if self.address is not None and self.address != address:
            return False
        return self.port is None or self.port == port


def _endpoint(text: str) -> Endpoint:
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d+))?", text)
    if m:
        address, port = m.group(1), m.group(2)
    elif text.count(":") == 1:
        address, port = text.split(":")
    elif text.count(":") > 1:
        address, port = text, None              # a bare IPv6 address
    elif text.isdigit():
        address, port = None, text              # a bare port
    else:
        address, port = text, None
    if address == "" or address == "*":
        address = None
    if address is not None:
        try:
            address = str(ipaddress.ip_address(address))
        except ValueError:
            raise ValueError(f"{text!r}: not an address[:port]") from None
    if port is not None:
        if not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError(f"{text!r}: bad port")
        port = int(port)
    return Endpoint(address, port)


PROTO_NAMES = frozenset(IP_PROTO_NAMES.values())


class FlowFilter:
    """--flow FILTER: a flow number from replay's table ("3"), a flow label
    as replay prints it, or ``[PROTO] [ENDPOINT] [> | <>] [ENDPOINT]`` where an
    ENDPOINT is ADDR, ADDR:PORT, [IPV6]:PORT, :PORT or PORT.  One endpoint
    matches either side of the innermost packet; two match both sides (``>``:
    in that direction, otherwise either)."""

    def __init__(self, text: str):
        self.text = text.strip()
        self.number: Optional[int] = None
        self.proto: Optional[str] = None
        self.endpoints: Tuple[Endpoint, ...] = ()
        self.directed = False
        if re.fullmatch(r"#?\d+", self.text) and not self.text.lstrip("#").startswith("0"):
            self.number = int(self.text.lstrip("#"))
            return
        tokens = re.findall(r"<>|>|[^\s<>]+", self.text)
        if tokens and tokens[0].lower() in PROTO_NAMES:
            self.proto = tokens.pop(0).lower()
        arrows = [t for t in tokens if t in ("<>", ">")]
        if arrows:
            if len(arrows) > 1 or len(tokens) != 3 or tokens[1] not in ("<>", ">"):
                raise ValueError(f"{text!r}: expected ENDPOINT > ENDPOINT (or <>)")
            self.directed = tokens[1] == ">"
            del tokens[1]
        if len(tokens) > 2 or (not tokens and self.proto is None):
            raise ValueError(f"{text!r}: expected a flow number, or [PROTO] [ADDR[:PORT]] [ADDR[:PORT]]")
        self.endpoints = tuple(_endpoint(t) for t in tokens)

    def matches(self, flow: FlowTuple) -> bool:
        """True when the flow (not a flow number: see matches_number) passes."""
        if self.number is not None:
            return False
        if flow_label(flow) == self.text:
            return True
        proto, src, dst, sport, dport = flow[:5]
        if self.proto is not None and proto != self.proto:
            return False
        a = (src, sport)
        b = (dst, dport)
        if len(self.endpoints) == 1:
            e = self.endpoints[0]
            return e.matches(*a) or e.matches(*b)
        if len(self.endpoints) == 2:
            e1, e2 = self.endpoints
            if e1.matches(*a) and e2.matches(*b):
                return True
            return not self.directed and e1.matches(*b) and e2.matches(*a)
        return True


def event_record(event, flow: FlowTuple, flow_number: Optional[int] = None) -> dict:
    """One grotool.events/1 line (docs/events.md)."""
    doc = event.as_json()
    doc["flow"] = flow_label(flow)
    doc["flow_fields"] = flow_json(flow)
    if flow_number is not None:
        doc["flow_number"] = flow_number
    return doc
