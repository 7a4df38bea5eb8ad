"""Replay frames through the real kernel's GRO and capture what it delivers.

The batch protocol of shared/spec/kernel-oracle.md: for each batch of at most
64 frames, a primer control frame puts the receiving veth's NAPI into deferred
mode with its gro_flush_timeout timer armed; the batch, padded to exactly 64
frames with non-IP fillers, then waits in veth's ring until the timer poll
takes all of it at once, exhausts the budget and (HZ < 1000) flushes
everything.  So every batch is exactly one NAPI poll that starts and ends with
empty GRO state: the conditions `grotool replay --device veth` models.

Completion is known by accounting (segments seen == frames sent), never by a
sentinel: a non-GRO frame is delivered before the aggregates still held.
"""

from __future__ import annotations

import atexit
import os
import platform
import select
import signal
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..engine import csum as ck
from ..errors import EnvironmentProblem
from .netns import RX_DEV, TX_DEV, VethNamespace

ETH_P_ALL = 0x0003
CONTROL_ETHERTYPE = 0x88B5
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
TP_STATUS_CSUMNOTREADY = 1 << 3
TP_STATUS_CSUM_VALID = 1 << 7
VNET_HDR = struct.Struct("=BBHHHH")
VNET_F_NEEDS_CSUM = 1
VNET_F_DATA_VALID = 2
VNET_GSO_NAMES = {0: "none", 1: "tcpv4", 3: "udp", 4: "tcpv6", 5: "udp_l4"}
VNET_GSO_ECN = 0x80
BATCH = 64

CSUM_MODES = ("auto", "fix", "trust", "verify")


# -- frame parsing ---------------------------------------------------------------------
@dataclass
class Parsed:
    l3: int
    l4: int
    family: int
    proto: int
    flow: tuple
    seq: Optional[int] = None
    payload: int = 0
    flags: int = 0
    payload_off: int = 0


def parse(frame: bytes) -> Optional[Parsed]:
    """Ethernet (+VLANs) / IPv4 / IPv6 (+HBH, Routing, DstOpts), one level of
    IP-in-IP, then TCP or UDP; else None."""
    if len(frame) < 14:
        return None
    vlans = []
    etype = (frame[12] << 8) | frame[13]
    off = 14
    while etype in (0x8100, 0x88A8) and len(frame) >= off + 4:
        vlans.append(((frame[off] << 8) | frame[off + 1]) & 0x0FFF)
        etype = (frame[off + 2] << 8) | frame[off + 3]
        off += 4
    outer = ()
    for _level in range(2):
        if etype == 0x0800 and len(frame) >= off + 20 and frame[off] >> 4 == 4:
            ihl = (frame[off] & 0x0F) * 4
            if struct.unpack_from("!H", frame, off + 6)[0] & 0x3FFF:
                return None
            proto = frame[off + 9]
            end = off + struct.unpack_from("!H", frame, off + 2)[0]
            src, dst = frame[off + 12:off + 16], frame[off + 16:off + 20]
            l4 = off + ihl
            family = 4
        elif etype == 0x86DD and len(frame) >= off + 40:
            proto = frame[off + 6]
            l4 = off + 40
            end = l4 + struct.unpack_from("!H", frame, off + 4)[0]
            src, dst = frame[off + 8:off + 24], frame[off + 24:off + 40]
            while proto in (0, 43, 60) and len(frame) >= l4 + 8:
                proto, l4 = frame[l4], l4 + (frame[l4 + 1] + 1) * 8
            family = 6
        else:
            return None
        if proto in (4, 41) and not outer:
            outer = (src, dst)
            etype = 0x0800 if proto == 4 else 0x86DD
            off = l4
            continue
        break
    end = min(end, len(frame))
    if proto == 6 and len(frame) >= l4 + 20:
        sport, dport, seq = struct.unpack_from("!HHI", frame, l4)
        thlen = (frame[l4 + 12] >> 4) * 4
        flow = ("tcp", src, dst, sport, dport, tuple(vlans)) + outer
        return Parsed(off, l4, family, 6, flow, seq, max(0, end - l4 - thlen), frame[l4 + 13], l4 + thlen)
    if proto == 17 and len(frame) >= l4 + 8:
        sport, dport = struct.unpack_from("!HH", frame, l4)
        flow = ("udp", src, dst, sport, dport, tuple(vlans)) + outer
        return Parsed(off, l4, family, 17, flow, None, max(0, end - l4 - 8), 0, l4 + 8)
    return None


def _pseudo(frame: bytes, p: Parsed, length: int) -> int:
    if p.family == 4:
        return ck.pseudo4(frame[p.l3 + 12:p.l3 + 16], frame[p.l3 + 16:p.l3 + 20], p.proto, length)
    return ck.pseudo6(frame[p.l3 + 8:p.l3 + 24], frame[p.l3 + 24:p.l3 + 40], p.proto, length)


def _l4_end(frame: bytes, p: Parsed) -> int:
    if p.family == 4:
        return min(len(frame), p.l3 + struct.unpack_from("!H", frame, p.l3 + 2)[0])
    return min(len(frame), p.l3 + 40 + struct.unpack_from("!H", frame, p.l3 + 4)[0])


def holds_seed(frame: bytes, p: Parsed) -> bool:
    """The L4 checksum field holds exactly the pseudo-header seed (sender offload)."""
    at = p.l4 + (16 if p.proto == 6 else 6)
    if len(frame) < at + 2:
        return False
    field_value = (frame[at] << 8) | frame[at + 1]
    return field_value == ck.fold(_pseudo(frame, p, _l4_end(frame, p) - p.l4))


def fix_checksums(frame: bytes) -> bytes:
    """Recompute the IPv4 header checksum and the TCP/UDP checksum."""
    p = parse(frame)
    if p is None:
        return frame
    buf = bytearray(frame)
    if p.family == 4:
        ihl = (buf[p.l3] & 0x0F) * 4
        buf[p.l3 + 10:p.l3 + 12] = b"\0\0"
        buf[p.l3 + 10:p.l3 + 12] = struct.pack("!H", ck.complement(ck.sum16(bytes(buf[p.l3:p.l3 + ihl]))))
    end = _l4_end(frame, p)
    at = p.l4 + (16 if p.proto == 6 else 6)
    if p.proto == 17 and frame[at:at + 2] == b"\0\0":
        return bytes(buf)              # UDP without checksum stays without one
    buf[at:at + 2] = b"\0\0"
    total = _pseudo(frame, p, end - p.l4) + ck.sum16(bytes(buf[p.l4:end]))
    buf[at:at + 2] = struct.pack("!H", ck.complement(total))
    return bytes(buf)


# -- link types ------------------------------------------------------------------------
FAKE_MACS = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")


def to_ethernet(linktype: int, data: bytes) -> bytes:
    """Frames as veth takes them: raw IP and cooked captures get a fixed Ethernet header."""
    if linktype == 1:
        return data
    if linktype in (101, 228, 229, 12, 14):
        version = data[0] >> 4 if data else 0
        etype = 0x86DD if version == 6 else 0x0800
        return FAKE_MACS + struct.pack("!H", etype) + data
    if linktype == 113 and len(data) >= 16:
        return FAKE_MACS + data[14:16] + data[16:]
    if linktype == 276 and len(data) >= 20:
        return FAKE_MACS + data[0:2] + data[20:]
    return FAKE_MACS + b"\x88\xb6" + data


# -- results ---------------------------------------------------------------------------
@dataclass
class DeliveredPacket:
    data: bytes
    gso_type: str
    gso_size: int
    segs: int
    csum: str
    covers: List[int] = field(default_factory=list)
    ts: int = 0
    batch: int = 0


@dataclass
class BatchInfo:
    index: int
    frames: int
    attempts: int
    send_us: float
    ok: bool


@dataclass
class KernelRun:
    packets: List[DeliveredPacket]
    batches: List[BatchInfo]
    drops: Dict[str, int]
    reliable: bool
    settings: dict
    warnings: List[str]


class _Abort(BaseException):
    """Raised from a signal handler so every cleanup path runs."""


# -- the replay ------------------------------------------------------------------------
class KernelOracle:
    def __init__(self, ns: VethNamespace, csum: str, batch: int, nonce: bytes):
        self.ns = ns
        self.csum = csum
        self.batch = batch
        self.nonce = nonce
        self.vnet_tx = csum in ("auto", "trust")
        self.timer_s = ns.flush_timeout_ns / 1e9
        self.counter = 0

    def open(self) -> None:
        back = self.ns.enter()
        try:
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            rx.setsockopt(socket.SOL_SOCKET, 33, 256 << 20)        # SO_RCVBUFFORCE
            rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            rx.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            rx.bind((RX_DEV, ETH_P_ALL))
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
            if self.vnet_tx:
                tx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            tx.bind((TX_DEV, 0))
        finally:
            self.ns.leave(back)
        self.rx, self.tx = rx, tx
        self._drain()

    def close(self) -> None:
        for s in (getattr(self, "rx", None), getattr(self, "tx", None)):
            if s is not None:
                s.close()

    # control frames carry the run's nonce, so stray traffic is never mistaken for them
    def _control(self, kind: int) -> bytes:
        self.counter += 1
        body = b"GROTOOL" + self.nonce + bytes([kind]) + struct.pack("!I", self.counter)
        frame = b"\xff" * 6 + bytes.fromhex("020000000001") + struct.pack("!H", CONTROL_ETHERTYPE) + body
        return frame + b"\0" * (60 - len(frame))

    def _is_control(self, frame: bytes) -> bool:
        return len(frame) >= 29 and frame[12:14] == b"\x88\xb5" and frame[14:21] == b"GROTOOL" \
            and frame[21:29] == self.nonce

    def _prepare(self, frame: bytes) -> Tuple[bytes, bytes]:
        """(vnet header or b"", frame) for injection under the --csum mode."""
        if self.csum == "fix":
            return b"", fix_checksums(frame)
        if not self.vnet_tx:
            return b"", frame
        p = parse(frame)
        needs = p is not None and (self.csum == "trust" or holds_seed(frame, p))
        if needs:
            # CHECKSUM_PARTIAL: the kernel treats the L4 checksum as still to be filled in
            return VNET_HDR.pack(VNET_F_NEEDS_CSUM, 0, 0, 0, p.l4, 16 if p.proto == 6 else 6), frame
        return VNET_HDR.pack(0, 0, 0, 0, 0, 0), frame

    def _send(self, frame: bytes, vnet: bool = None) -> None:
        if self.vnet_tx:
            self.tx.send(VNET_HDR.pack(0, 0, 0, 0, 0, 0) + frame)
        else:
            self.tx.send(frame)

    def _recv(self, timeout: float) -> Optional[Tuple[bytes, tuple, int]]:
        ready, _, _ = select.select([self.rx], [], [], max(0.0, timeout))
        if not ready:
            return None
        data, anc, _flags, addr = self.rx.recvmsg(1 << 20, socket.CMSG_SPACE(20))
        if addr[2] == PACKET_OUTGOING:
            return (b"", (), -1)
        vnet = VNET_HDR.unpack_from(data, 0)
        frame = data[VNET_HDR.size:]
        status = 0
        for level, ctype, cdata in anc:
            if level == SOL_PACKET and ctype == PACKET_AUXDATA and len(cdata) >= 20:
                status, _len, _snap, _mac, _net, tci, tpid = struct.unpack_from("=IIIHHHH", cdata)
                if status & TP_STATUS_VLAN_VALID:
                    tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID and tpid else 0x8100
                    frame = frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
        return frame, vnet, status

    def _drain(self) -> None:
        while self._recv(0.0) is not None:
            pass

    def stats(self) -> Tuple[int, int]:
        raw = self.rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        return struct.unpack("=II", raw)

    def run_batch(self, frames: Sequence[bytes]) -> Tuple[List[DeliveredPacket], int, float, bool]:
        """One poll's worth; returns (packets, attempts, send time in µs, complete)."""
        prepared = [self._prepare(f) for f in frames]
        fillers = [self._control(2) for _ in range(self.batch - len(frames))]
        attempts = 0
        while True:
            attempts += 1
            primer = self._control(1)
            self._send(primer)
            deadline = time.monotonic() + 1.0 + 3 * self.timer_s
            seen_primer = False
            while time.monotonic() < deadline:
                got = self._recv(deadline - time.monotonic())
                if got is None:
                    break
                if got[0][:33] == primer[:33]:
                    seen_primer = True
                    break
            if not seen_primer:
                raise EnvironmentProblem("kernel replay: the primer frame never came back (is veth GRO working?)")
            start = time.monotonic()
            for vh, fr in prepared:
                self.tx.send(vh + fr)
            for fr in fillers:
                self._send(fr)
            send_s = time.monotonic() - start
            packets, complete = self._collect(len(frames))
            if send_s <= self.timer_s / 2 or attempts >= 3:
                ok = complete and send_s <= self.timer_s / 2
                return packets, attempts, send_s * 1e6, ok
            self._drain()            # too slow: the timer may have split the batch; replay it

    def _collect(self, expected: int) -> Tuple[List[DeliveredPacket], bool]:
        packets: List[DeliveredPacket] = []
        segs_seen = 0
        deadline = time.monotonic() + 3 * self.timer_s + 0.5
        while segs_seen < expected:
            got = self._recv(deadline - time.monotonic())
            if got is None:
                return packets, False
            frame, vnet, status = got
            if not frame or self._is_control(frame):
                continue
            flags, gso_type, _hdr_len, gso_size, _cs, _co = vnet
            base = gso_type & ~VNET_GSO_ECN
            segs = 1
            if base and gso_size:
                p = parse(frame)
                payload = p.payload if p is not None else 0
                segs = max(1, -(-payload // gso_size))
            name = VNET_GSO_NAMES.get(base, f"type{base}") + ("+ecn" if gso_type & VNET_GSO_ECN else "")
            cs = "partial" if flags & VNET_F_NEEDS_CSUM else "valid" if flags & VNET_F_DATA_VALID else "none"
            packets.append(DeliveredPacket(frame, name if base else "none", gso_size if base else 0, segs, cs))
            segs_seen += segs
        # anything still arriving belongs to this batch only if it is not a control frame
        return packets, segs_seen == expected


def map_inputs(inputs: Sequence[bytes], packets: List[DeliveredPacket], first_index: int) -> int:
    """Fill each packet's `covers` with the input indices it is made of; returns unmatched count."""
    parsed = [parse(f) for f in inputs]
    used = [False] * len(inputs)
    unmatched = 0
    for pkt in packets:
        p = parse(pkt.data)
        covers: List[int] = []
        if p is not None and p.proto == 6:
            start = None
            for i, q in enumerate(parsed):
                if not used[i] and q is not None and q.flow == p.flow and q.seq == p.seq:
                    start = i
                    break
            if start is not None:
                need_bytes, need_segs = p.payload, pkt.segs
                seq = p.seq
                for i in range(start, len(inputs)):
                    q = parsed[i]
                    if used[i] or q is None or q.flow != p.flow or q.seq != seq:
                        continue
                    covers.append(i)
                    used[i] = True
                    seq = (seq + q.payload) & 0xFFFFFFFF
                    need_bytes -= q.payload
                    need_segs -= 1
                    if need_segs <= 0 or need_bytes <= 0:
                        break
        elif p is not None and p.proto == 17 and pkt.segs > 1:
            for i, q in enumerate(parsed):
                if not used[i] and q is not None and q.flow == p.flow:
                    covers.append(i)
                    used[i] = True
                    if len(covers) == pkt.segs:
                        break
        if not covers:
            for i, f in enumerate(inputs):
                if not used[i] and f == pkt.data:
                    covers.append(i)
                    used[i] = True
                    break
        if not covers:
            for i, q in enumerate(parsed):      # a single packet whose bytes the kernel changed
                if not used[i] and p is not None and q is not None and q.flow == p.flow and q.seq == p.seq:
                    covers.append(i)
                    used[i] = True
                    break
        if not covers:
            unmatched += 1
        pkt.covers = [first_index + i for i in covers]
    return unmatched


def replay_frames(frames: Sequence[bytes], timestamps: Optional[Sequence[int]] = None, *, csum: str = "auto",
                  udp_gro: str = "off", batch: int = BATCH, max_seconds: float = 300,
                  log: Optional[Callable[[str], None]] = None) -> KernelRun:
    """Replay Ethernet frames through the real kernel's veth GRO (root needed)."""
    if csum not in CSUM_MODES:
        raise ValueError(f"csum must be one of {CSUM_MODES}")
    if not 1 <= batch <= BATCH:
        raise ValueError("batch must be 1..64 (the veth NAPI budget)")
    if timestamps is None:
        timestamps = list(range(len(frames)))
    ns = VethNamespace(udp_gro=udp_gro)
    warnings: List[str] = []
    packets: List[DeliveredPacket] = []
    batches: List[BatchInfo] = []
    old_handlers = {}

    def abort(signum, _frame):
        raise _Abort(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        old_handlers[sig] = signal.signal(sig, abort)
    atexit.register(ns.remove)
    signal.setitimer(signal.ITIMER_REAL, max_seconds)
    oracle = None
    try:
        with ns:
            oracle = KernelOracle(ns, csum, batch, os.urandom(8))
            oracle.open()
            oracle.stats()                    # PACKET_STATISTICS resets on read: start from zero
            for b, start in enumerate(range(0, len(frames), batch)):
                chunk = frames[start:start + batch]
                got, attempts, send_us, ok = oracle.run_batch(chunk)
                if attempts > 1:
                    warnings.append(f"batch {b} replayed {attempts} times (sending was slow)")
                if not ok:
                    warnings.append(f"batch {b}: not every segment was accounted for")
                unmatched = map_inputs(chunk, got, start)
                if unmatched:
                    warnings.append(f"batch {b}: {unmatched} delivered packets not matched to inputs")
                for pkt in got:
                    pkt.batch = b
                    pkt.ts = timestamps[pkt.covers[0]] if pkt.covers else timestamps[start]
                packets.extend(got)
                batches.append(BatchInfo(b, len(chunk), attempts, round(send_us, 1), ok))
                if log:
                    log(f"batch {b}: {len(chunk)} frames -> {len(got)} packets")
            stats1 = oracle.stats()
            links = ns.link_stats()
            settings = ns.settings()
            settings.update({"csum": csum, "batch": batch, "kernel": platform.release()})
    except _Abort as exc:
        signum = exc.args[0]
        if signum == signal.SIGALRM:
            raise EnvironmentProblem(f"kernel replay did not finish within {max_seconds:g} s") from None
        raise SystemExit(128 + signum) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if oracle is not None:
            oracle.close()
        ns.remove()
        atexit.unregister(ns.remove)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    drops = {"capture_socket": stats1[1] - 0, "veth_rx_dropped": sum(v["rx_dropped"] for v in links.values()),
             "veth_tx_dropped": sum(v["tx_dropped"] for v in links.values())}
    reliable = all(b.ok for b in batches) and not any(drops.values())
    if any(drops.values()):
        warnings.append(f"drops seen: {drops}")
    return KernelRun(packets, batches, drops, reliable, settings, warnings)
