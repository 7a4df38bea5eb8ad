"""Replay Ethernet frames through the real kernel's GRO and capture what it
delivers (shared/spec/kernel-oracle.md, sections 2 and 3).

The batch protocol.  For each batch of at most 64 frames:

1. a *primer* control frame (ethertype 0x88b5, carrying a per-run nonce) is
   sent.  Its NAPI poll runs at once, inside the send, and with
   napi_defer_hard_irqs = 1 it completes "deferred": the gro_flush_timeout
   timer T is armed and veth stops scheduling NAPI for new frames;
2. once the primer has been captured, the batch is sent, padded to exactly 64
   frames with filler control frames.  The frames wait in veth's ring;
3. the timer's poll takes all 64 (the budget), so at HZ < 1000 GRO is flushed
   completely at its end, and the repoll that follows finds no work and
   completes NAPI.  Every batch is one poll that starts and ends with empty
   GRO state: the model of ``grotool replay --device veth``;
4. completion is known by accounting: the segments of the non-control
   packets captured (gso_segs = ceil(L4 payload / gso_size), or 1) add up to
   the frames sent.  Not by a sentinel: a non-GRO frame is delivered before
   the aggregates still held;
5. if sending took longer than T/2 (measured from the primer), the timer may
   have cut the batch in two: its output is discarded and the batch replayed,
   at most MAX_REPLAYS times, after which the run is marked unreliable.

Checksum modes (``csum``), the kernel counterparts of ``grotool replay --csum``.
Frames injected through AF_PACKET are CHECKSUM_NONE, so GRO validates the
TCP/UDP and IPv4 header checksums in software, and a bad one makes the frame
go up alone:

* ``auto`` (the default): a TCP/UDP checksum field holding the pseudo-header
  seed (what a capture taken on a sender with TX checksum offload shows) is
  recomputed before injection, at every level of a tunnel (the outer UDP
  checksum of VXLAN/GENEVE on a configured port too), innermost first; a
  tunnel checksum that was right stays right, and every other checksum is
  injected as it is, so a really bad checksum stays bad and is treated as
  bad (frames.fix_seed_checksum).  This is what
  ``grotool replay --csum auto`` (also its default) models: seed = offloaded
  and valid, anything else verified.  It was chosen over injecting the seed
  frames as CHECKSUM_PARTIAL because then every frame enters GRO in the same
  checksum state (NONE, validated in software), as in the simulation's verify
  path; a flow mixing PARTIAL and validated frames would be judged differently
  by fraglist GRO, which requires equal checksum states.  The cost: a seed
  frame that goes up alone, or first in a fraglist aggregate (which keeps its
  first segment's headers as they arrived), is delivered with the checksum the
  oracle filled in, not the seed; ``grotool compare`` leaves those fields out.
* ``fix``: the IPv4 header checksum(s) and the TCP/UDP checksum of every frame
  are recomputed: nothing is flushed for a checksum.
* ``trust``: TCP/UDP frames are injected with a virtio_net_hdr carrying
  VIRTIO_NET_HDR_F_NEEDS_CSUM (csum_start/csum_offset at the L4 checksum), so
  the kernel takes them as CHECKSUM_PARTIAL, a checksum still to be computed,
  i.e. valid: the counterpart of ``grotool replay --csum trust``.  The bytes
  are not changed; the IPv4 header checksum is still verified.
* ``verify``: every frame as it is.

Headers are read as GRO reads them (frames.gro_dissect), not as
grotool.dissect reports them: an IPv6 header behind ethertype 0x86DD or
protocol 41 (or GRE/GENEVE protocol 0x86DD) is taken whatever its version
nibble, since ipv6_gro_receive never reads it; the nibble is injected as it is.
"""

from __future__ import annotations

import atexit
import errno
import ipaddress
import os
import platform
import select
import signal
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import EnvironmentProblem, InputError
from . import bpf
from . import frames as fr
from .frames import fix_checksums, parse, to_ethernet  # re-exported: callers use kernel.parse
from .hoststate import Endpoint, HostState, flows_to_local
from .netns import MTU, RX_DEV, TX_DEV, VethNamespace

__all__ = ["KernelSession", "KernelReplayResult", "KernelRun", "DeliveredPacket", "DeliveredList", "BatchInfo",
           "UnreliableRun", "kernel_replay", "replay_frames", "prepare_frame", "check_frame", "frame_problem",
           "parse", "fix_checksums", "to_ethernet", "CSUM_MODES", "DEFAULT_CSUM", "BUDGET", "MAX_REPLAYS"]

ETH_P_ALL = 0x0003
CONTROL_ETHERTYPE = 0x88B5
CONTROL_MAGIC = b"GROTOOL-ORACLE"
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
TP_STATUS_CSUMNOTREADY = 1 << 3
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
TP_STATUS_CSUM_VALID = 1 << 7
AUXDATA = struct.Struct("=IIIHHHH")
VNET_HDR = struct.Struct("=BBHHHH")        # flags, gso_type, hdr_len, gso_size, csum_start, csum_offset
VNET_F_NEEDS_CSUM = 1
VNET_F_DATA_VALID = 2
VNET_GSO_ECN = 0x80
VNET_GSO_NAMES = {1: "tcpv4", 3: "udp", 4: "tcpv6", 5: "udp_l4"}

BUDGET = 64                    # veth's NAPI weight
FLUSH_TIMEOUT_NS = 5_000_000   # gro_flush_timeout T
MAX_REPLAYS = 3
MAX_FRAME = MTU + fr.ETH_HLEN  # plus 4 for a VLAN-tagged frame (AF_PACKET allows one tag beyond the MTU)
CSUM_MODES = ("auto", "fix", "trust", "verify")
DEFAULT_CSUM = "auto"
_RECV_BUF = 1 << 20            # a BIG TCP aggregate is up to GRO_MAX_SIZE (524280) bytes


# -----------------------------------------------------------------------------
# results
# -----------------------------------------------------------------------------
@dataclass
class DeliveredPacket:
    """One packet the kernel delivered, as the capture socket saw it."""

    data: bytes                     # Ethernet frame (a stripped VLAN tag reinserted)
    gso_type: List[str]             # virtio gso type, decoded: [] or e.g. ["tcpv4"], ["tcpv6", "tcp_ecn"]
    gso_size: int
    gso_segs: int                   # ceil(L4 payload / gso_size), 1 for a non-GSO packet
    csum: str                       # vnet header flags: "partial" (NEEDS_CSUM), "valid" (DATA_VALID) or "none"
    covers: List[int] = field(default_factory=list)   # input frame indices (whole run)
    ts: int = 0                     # timestamp of the first input frame it covers
    batch: int = 0
    vnet: Dict[str, int] = field(default_factory=dict)
    tp_status: int = 0
    fraglist: bool = False          # a fraglist GRO packet (inferred: GSO with DATA_VALID, see _delivered)

    @property
    def segs(self) -> int:
        return self.gso_segs

    @property
    def is_gso(self) -> bool:
        return bool(self.gso_type)


@dataclass
class BatchInfo:
    index: int
    first_frame: int
    frames: int
    attempts: int
    send_us: float
    ok: bool
    packets: int = 0


@dataclass
class KernelReplayResult:
    packets: List[DeliveredPacket]
    batches: List[BatchInfo]
    drops: Dict[str, int]
    reliable: bool
    settings: dict = field(default_factory=dict)
    warnings: List[str] = field(default_factory=list)
    kernel: str = ""
    unmatched_packets: int = 0      # delivered packets not traced back to input frames
    uncovered_frames: int = 0       # input frames found in no delivered packet
    link_counters: Dict[str, Dict[str, int]] = field(default_factory=dict)   # per veth end, deltas
    hint: Optional[str] = None      # which host option the capture's traffic would call for


class DeliveredList(list):
    """What replay_frames returns: the list of DeliveredPacket, in delivery
    order, that also carries the rest of the run (``reliable``, ``batches``,
    ``drops``, ``warnings``, ``settings``; ``packets`` is the list itself)."""

    def __init__(self, result: "KernelReplayResult"):
        super().__init__(result.packets)
        self.result = result

    @property
    def packets(self) -> "DeliveredList":
        return self

    def __getattr__(self, name):
        if name == "result":
            raise AttributeError(name)
        return getattr(self.result, name)


KernelRun = KernelReplayResult      # older name


class UnreliableRun(EnvironmentProblem):
    """The kernel dropped frames or a batch could not be replayed cleanly."""


class _Abort(BaseException):
    """Raised from a signal handler so that every cleanup path runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


# -----------------------------------------------------------------------------
# checksum preparation of injected frames
# -----------------------------------------------------------------------------
_NO_VNET = VNET_HDR.pack(0, 0, 0, 0, 0, 0)


def prepare_frame(frame: bytes, csum: str, vxlan_ports=(), geneve_ports=()) -> Tuple[bytes, bytes]:
    """(frame to inject, virtio_net_hdr or b"") under a --csum mode.  Under trust
    csum_start is the innermost transport header (through VXLAN/GENEVE on
    ``vxlan_ports``/``geneve_ports`` too): every checksum before it counts as
    valid in GRO, the outer ones included.  Headers are read as GRO reads them
    (frames.gro_dissect): an IPv6 header behind ethertype 0x86DD or protocol 41
    whatever its version nibble, which is injected unchanged."""
    ports = {"vxlan_ports": vxlan_ports, "geneve_ports": geneve_ports}
    if csum == "auto":
        return fr.fix_seed_checksum(frame, **ports)[0], b""
    if csum == "fix":
        return fr.fix_checksums(frame, any_ipv6_version=True, **ports), b""
    if csum == "trust":
        p = fr.parse(frame, **ports)
        if p is not None and p.l4_end >= p.payload_off and not (
                p.proto == fr.IPPROTO_UDP and fr.l4_check_field(frame, p) == 0):
            return frame, VNET_HDR.pack(VNET_F_NEEDS_CSUM, 0, 0, 0, p.l4, p.check_at - p.l4)
        return frame, _NO_VNET
    return frame, b""


# -----------------------------------------------------------------------------
# the session: one namespace, its two sockets, any number of replays
# -----------------------------------------------------------------------------
class KernelSession:
    """A namespace with its sockets, reusable for many replays (the namespace
    setup costs about 0.1 s).  Use as a context manager::

        with KernelSession(host=HostState.build(rx_gro_list=True)) as ks:
            result = ks.replay(frames)

    Inside the ``with``, SIGTERM and SIGHUP (and SIGALRM for the
    ``max_seconds`` deadline) raise through every cleanup path when the
    session lives in the main thread; the namespace is also removed at exit.
    """

    def __init__(self, udp_gro: Optional[str] = None, *, host: Optional[HostState] = None, max_seconds: float = 300,
                 flush_timeout_ns: int = FLUSH_TIMEOUT_NS, log: Optional[Callable[[str], None]] = None,
                 reported_seconds: Optional[float] = None, rss_key: Optional[bytes] = None):
        self.ns = VethNamespace(udp_gro=udp_gro, flush_timeout_ns=flush_timeout_ns, defer_hard_irqs=1, host=host)
        self.host = self.ns.host
        self.max_seconds = float(max_seconds)
        self.reported_seconds = float(reported_seconds if reported_seconds is not None else max_seconds)
        self.log = log
        self.timer_s = flush_timeout_ns / 1e9
        self.nonce = os.urandom(8)
        self.counter = 0
        self.rx: Optional[socket.socket] = None
        self.tx: Optional[socket.socket] = None
        self.tx_vnet: Optional[socket.socket] = None
        # kernels before 6.2: a clone of the capture without vnet headers (see _recv)
        self.rx_plain: Optional[socket.socket] = None
        self.deadline = 0.0
        self._buf = bytearray(_RECV_BUF)
        self._view = memoryview(self._buf)
        self._plain_view = memoryview(bytearray(_RECV_BUF))
        self._old_handlers: Dict[int, object] = {}
        self._old_timer: Tuple[float, float] = (0.0, 0.0)
        self._signals = False
        self._closing = False
        self._late_signals: List[int] = []
        self._entered_at = 0.0
        # --rss: each frame's mark is its RSS hash, which an egress eBPF program makes skb->hash
        self.hasher = bpf.FrameHasher(rss_key) if rss_key is not None else None
        self.hash_program: Optional[bpf.HashFromMark] = None
        self.xdp_program: Optional[bpf.XdpPass] = None      # kernels before 5.13 (netns.gro_needs_xdp)

    # -- lifetime -------------------------------------------------------------------
    def __enter__(self) -> "KernelSession":
        self._entered_at = time.monotonic()
        self.deadline = self._entered_at + self.max_seconds
        self._install_signals()
        atexit.register(self.ns.remove)
        try:
            self.ns.create()
            if self.ns.xdp:
                self._attach_xdp()
            self._open_sockets()
            if self.hasher is not None:
                self._attach_hash_program()
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Close the sockets and remove the namespace with the signals blocked, so
        that a second SIGTERM cannot cut the teardown short."""
        mask = {signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM}
        old_mask = None
        self._closing = True
        caught = self._late_signals
        if self._signals:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
        try:
            for s in (self.rx, self.tx, self.tx_vnet, self.rx_plain):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass
            self.rx = self.tx = self.tx_vnet = self.rx_plain = None
            for program in (self.hash_program, self.xdp_program):
                if program is not None:
                    program.close()
            self.hash_program = self.xdp_program = None
            self.ns.remove()
            atexit.unregister(self.ns.remove)
            if self._signals:
                signal.setitimer(signal.ITIMER_REAL, 0)
                # signals that came in while blocked are ours to handle, not the
                # restored handlers' (the default for SIGALRM/SIGTERM kills the process)
                pending = signal.sigpending() & {signal.SIGTERM, signal.SIGHUP, signal.SIGALRM}
                for sig in pending:
                    if signal.sigtimedwait({sig}, 0) is not None:
                        caught.append(sig)
            self._restore_signals()
        finally:
            self._closing = False
            if old_mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        if isinstance(exc, _Abort):
            self._raise_abort(exc)
        if exc is None or not isinstance(exc, (SystemExit, KeyboardInterrupt, GeneratorExit)):
            for sig in sorted(set(caught) - {signal.SIGALRM}):   # a deadline hit while finishing is moot
                self._late_signals = []
                self._raise_abort(_Abort(sig))
        self._late_signals = []

    def _raise_abort(self, exc: "_Abort") -> None:
        if exc.signum == signal.SIGALRM:
            raise EnvironmentProblem(f"kernel replay did not finish within {self.reported_seconds:g} s "
                                     f"(--max-seconds)") from None
        raise SystemExit(128 + exc.signum) from None

    def _install_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return                         # deadline is then only checked between steps

        def abort(signum, _frame):
            if self._closing:               # tearing down already: note it, do not interrupt
                self._late_signals.append(signum)
                return
            raise _Abort(signum)

        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
            self._old_handlers[sig] = signal.signal(sig, abort)
        self._old_timer = signal.setitimer(signal.ITIMER_REAL, self.max_seconds)
        self._signals = True

    def _restore_signals(self) -> None:
        if not self._signals:
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        remaining, interval = self._old_timer
        if remaining > 0:                   # give back someone else's timer, minus the time we used
            left = remaining - (time.monotonic() - self._entered_at)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)
        self._old_handlers.clear()
        self._signals = False

    def _check_deadline(self) -> None:
        if time.monotonic() > self.deadline:
            raise EnvironmentProblem(f"kernel replay did not finish within {self.reported_seconds:g} s "
                                     f"(--max-seconds)")

    def _open_sockets(self) -> None:
        back = self.ns.enter()
        try:
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)
            rx.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            rx.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
            rx.bind((RX_DEV, ETH_P_ALL))
            # protocol 0: the sending sockets receive nothing
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            tx.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
            tx.bind((TX_DEV, 0))
            tx_vnet = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
            tx_vnet.setsockopt(socket.SOL_SOCKET, SO_SNDBUFFORCE, 64 << 20)
            tx_vnet.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
            tx_vnet.bind((TX_DEV, 0))
        finally:
            self.ns.leave(back)
        self.rx, self.tx, self.tx_vnet = rx, tx, tx_vnet
        if vnet_lacks_udp_l4():
            back = self.ns.enter()
            try:
                plain = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                plain.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)
                plain.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
                plain.bind((RX_DEV, ETH_P_ALL))
            finally:
                self.ns.leave(back)
            self.rx_plain = plain
        self._drain()
        self._socket_stats()             # reading PACKET_STATISTICS resets it

    def _attach_xdp(self) -> None:
        back = self.ns.enter()
        try:
            self.xdp_program = bpf.XdpPass(socket.if_nametoindex(RX_DEV))
        finally:
            self.ns.leave(back)

    def _attach_hash_program(self) -> None:
        """--rss: the mark-to-hash program on the sending veth's egress (bpf.py)."""
        back = self.ns.enter()
        try:
            self.hash_program = bpf.HashFromMark(socket.if_nametoindex(TX_DEV))
        finally:
            self.ns.leave(back)

    # -- control frames -------------------------------------------------------------------
    def _control(self, kind: int) -> bytes:
        self.counter += 1
        body = CONTROL_MAGIC + self.nonce + bytes([kind]) + struct.pack("!I", self.counter)
        frame = b"\xff" * 6 + fr.FAKE_SRC_MAC + struct.pack("!H", CONTROL_ETHERTYPE) + body
        return frame + b"\0" * (60 - len(frame))

    def _is_control(self, frame) -> bool:
        n = len(CONTROL_MAGIC)
        return (len(frame) >= 14 + n + 8 and frame[12] == 0x88 and frame[13] == 0xB5
                and frame[14:14 + n] == CONTROL_MAGIC and frame[14 + n:22 + n] == self.nonce)

    # -- socket I/O -------------------------------------------------------------------------
    def _recv(self, timeout: float):
        """(frame, vnet tuple, tp_status) of the next captured packet; None on timeout;
        (None, None, 0) for a packet to ignore."""
        ready, _, _ = select.select([self.rx], [], [], max(0.0, timeout))
        if not ready:
            return None
        try:
            n, anc, flags, addr = self.rx.recvmsg_into([self._view], socket.CMSG_SPACE(AUXDATA.size))
        except OSError as exc:
            # before 6.2, virtio_net_hdr_from_skb knows no UDP GSO: recvmsg fails with
            # EINVAL and the packet is gone from this socket; its clone is on rx_plain
            if exc.errno != errno.EINVAL or self.rx_plain is None:
                raise
            return self._recv_plain(vnet=False)
        if self.rx_plain is not None:
            self._recv_plain(vnet=True)            # keep the clone socket in step
        if addr[2] == PACKET_OUTGOING:
            return None, None, 0
        if flags & socket.MSG_TRUNC or n < VNET_HDR.size:
            raise EnvironmentProblem(f"kernel replay: a captured packet did not fit the {_RECV_BUF}-byte buffer")
        vnet = VNET_HDR.unpack_from(self._buf, 0)
        frame = bytes(self._view[VNET_HDR.size:n])
        return self._with_aux(frame, vnet, anc)

    def _recv_plain(self, vnet: bool):
        """The clone of the packet just taken from (``vnet``) or lost to (not ``vnet``) the
        vnet socket; as _recv returns it, with vnet None: its GSO fields are unknown."""
        ready, _, _ = select.select([self.rx_plain], [], [], 1.0)
        if not ready:
            raise EnvironmentProblem("kernel replay: the second capture socket missed a packet")
        n, anc, flags, addr = self.rx_plain.recvmsg_into([self._plain_view], socket.CMSG_SPACE(AUXDATA.size))
        if vnet:
            return None
        if addr[2] == PACKET_OUTGOING:
            return None, None, 0
        if flags & socket.MSG_TRUNC:
            raise EnvironmentProblem(f"kernel replay: a captured packet did not fit the {_RECV_BUF}-byte buffer")
        return self._with_aux(bytes(self._plain_view[:n]), None, anc)

    def _with_aux(self, frame: bytes, vnet, anc):
        status = 0
        for level, ctype, cdata in anc:
            if level == SOL_PACKET and ctype == PACKET_AUXDATA and len(cdata) >= AUXDATA.size:
                status, _len, _snap, _mac, _net, tci, tpid = AUXDATA.unpack_from(cdata)
                if status & TP_STATUS_VLAN_VALID:
                    if not (status & TP_STATUS_VLAN_TPID_VALID and tpid):
                        tpid = 0x8100
                    frame = frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]
        return frame, vnet, status

    def _drain(self) -> None:
        while self._recv(0.0) is not None:
            pass

    def _socket_stats(self) -> Tuple[int, int]:
        raw = self.rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
        return struct.unpack("=II", raw)

    # -- one batch ---------------------------------------------------------------------------
    def _send_batch(self, prepared: Sequence[Tuple[bytes, bytes]], fillers: Sequence[bytes],
                    marks: Optional[Sequence[list]] = None) -> float:
        """Primer, wait for it, then the batch; returns seconds from primer to last frame sent."""
        primer = self._control(1)
        t0 = time.monotonic()
        try:
            self.tx.send(primer)
        except OSError as exc:
            raise EnvironmentProblem(f"kernel replay: sending on {TX_DEV} failed: {exc.strerror}") from None
        wait_until = t0 + 1.0 + 3 * self.timer_s
        while True:
            got = self._recv(wait_until - time.monotonic())
            if got is None:
                raise EnvironmentProblem("kernel replay: the primer frame never arrived on the receiving veth")
            if got[0] is not None and got[0][:len(primer)] == primer:
                break
        tx, tx_vnet = self.tx, self.tx_vnet
        try:
            if marks is not None:
                _send_marked(tx, tx_vnet, prepared, marks)
            else:
                for frame, vnet in prepared:
                    if vnet:
                        tx_vnet.send(vnet + frame)
                    else:
                        tx.send(frame)
            for frame in fillers:
                tx.send(frame)
        except OSError as exc:
            raise EnvironmentProblem(f"kernel replay: sending a frame on {TX_DEV} failed: {exc.strerror}") from None
        return time.monotonic() - t0

    def _collect(self, expected: int, injected: Sequence[bytes] = ()) -> Tuple[List[DeliveredPacket], bool]:
        packets: List[DeliveredPacket] = []
        claimed: set = set()              # injected frames already delivered (only for packets without vnet)
        segs_seen = 0
        until = time.monotonic() + 3 * self.timer_s + 0.5
        while segs_seen < expected:
            got = self._recv(until - time.monotonic())
            if got is None:
                return packets, False
            frame, vnet, status = got
            if frame is None or self._is_control(frame):
                continue
            if vnet is None:
                pkt = _delivered_without_vnet(frame, status, injected, claimed, self.host.vxlan_ports,
                                              self.host.geneve_ports)
            else:
                pkt = _delivered(frame, vnet, status, 1 if status & TP_STATUS_VLAN_VALID else 0,
                                 self.host.vxlan_ports)
                if self.rx_plain is not None and not pkt.gso_type:
                    same = next((i for i, f in enumerate(injected) if i not in claimed and f == frame), None)
                    if same is not None:
                        claimed.add(same)
            packets.append(pkt)
            segs_seen += pkt.gso_segs
        return packets, segs_seen == expected

    def run_batch(self, chunk: Sequence[bytes], csum: str) -> Tuple[List[DeliveredPacket], List[bytes], int, float, bool]:
        """One NAPI poll's worth: (packets, injected frames, attempts, send µs, ok)."""
        prepared = [prepare_frame(f, csum, self.host.vxlan_ports, self.host.geneve_ports) for f in chunk]
        injected = [f for f, _ in prepared]
        marks = [bpf.mark_cmsg(self.hasher(f)) for f in injected] if self.hasher is not None else None
        attempts = 0
        while True:
            attempts += 1
            self._check_deadline()
            fillers = [self._control(2) for _ in range(BUDGET - len(chunk))]
            send_s = self._send_batch(prepared, fillers, marks)
            packets, complete = self._collect(len(chunk), injected)
            in_time = send_s <= self.timer_s / 2
            if in_time and complete:
                return packets, injected, attempts, send_s * 1e6, True
            if attempts > MAX_REPLAYS:
                return packets, injected, attempts, send_s * 1e6, False
            # too slow (the timer may have cut the batch) or not all accounted for: replay it.
            # Anything late from this attempt is discarded while waiting for the next primer.
            if not complete:
                time.sleep(3 * self.timer_s)
            self._drain()

    def _rss_settings(self) -> dict:
        if self.hasher is None:
            return {"rss": False}
        return {"rss": True, "rss_key": self.hasher.key.hex(), "rss_hash": "bpf_set_hash(skb->mark), tcx egress"}

    # -- a replay --------------------------------------------------------------------------------
    def replay(self, frames: Sequence[bytes], timestamps: Optional[Sequence[int]] = None, *,
               csum: str = DEFAULT_CSUM, batch: int = BUDGET) -> KernelReplayResult:
        """Replay Ethernet frames; ``timestamps`` (ns, one per frame) become the
        timestamps of the delivered packets (first frame covered)."""
        if csum not in CSUM_MODES:
            raise ValueError(f"csum must be one of {CSUM_MODES}")
        if not 1 <= batch <= BUDGET:
            raise ValueError(f"batch must be 1..{BUDGET} (the veth NAPI budget)")
        if self.rx is None:
            raise RuntimeError("KernelSession.replay outside its 'with' block")
        frames = [bytes(f) for f in frames]
        for i, f in enumerate(frames):
            check_frame(f, i, self.ns.mtu)
        if timestamps is None:
            timestamps = list(range(len(frames)))
        elif len(timestamps) != len(frames):
            raise ValueError("one timestamp per frame")
        if self.host.local_tcp:
            self.ns.add_local_tcp(flows_to_local(self.host.local_tcp, tcp_flows(frames, self.host.vxlan_ports)))
        links0 = self.ns.link_counters()
        self._socket_stats()
        warnings: List[str] = []
        packets: List[DeliveredPacket] = []
        batches: List[BatchInfo] = []
        unmatched = 0
        covered = [False] * len(frames)
        for b, start in enumerate(range(0, len(frames), batch)):
            chunk = frames[start:start + batch]
            got, injected, attempts, send_us, ok = self.run_batch(chunk, csum)
            if attempts > 1:
                warnings.append(f"batch {b} (frames {start}..{start + len(chunk) - 1}) was sent "
                                f"{attempts} times" + ("" if ok else ", never cleanly: its result is unreliable"))
            elif not ok:
                warnings.append(f"batch {b}: not every segment was accounted for")
            mapping = fr.map_batch(injected, [(p.data, p.gso_segs, p.is_gso) for p in got],
                                   vxlan_ports=self.host.vxlan_ports, geneve_ports=self.host.geneve_ports)
            for pkt, covers in zip(got, mapping):
                pkt.batch = b
                pkt.covers = [start + i for i in covers]
                for i in pkt.covers:
                    covered[i] = True
                if covers:
                    pkt.ts = timestamps[min(pkt.covers)]
                else:
                    unmatched += 1
                    pkt.ts = timestamps[start]
            packets.extend(got)
            batches.append(BatchInfo(b, start, len(chunk), attempts, round(send_us, 1), ok, len(got)))
            if self.log:
                self.log(f"batch {b}: {len(chunk)} frames -> {len(got)} packets"
                         + (f" ({attempts} attempts)" if attempts > 1 else ""))
        _tp_packets, tp_drops = self._socket_stats()
        links1 = self.ns.link_counters()

        def delta(dev: str, counter: str) -> int:
            return links1.get(dev, {}).get(counter, 0) - links0.get(dev, {}).get(counter, 0)

        counters = {dev: {c: delta(dev, c) for c in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}
                    for dev in (TX_DEV, RX_DEV)}
        drops = {"capture_socket": tp_drops,
                 "veth_rx_dropped": counters[TX_DEV]["rx_dropped"] + counters[RX_DEV]["rx_dropped"],
                 "veth_tx_dropped": counters[TX_DEV]["tx_dropped"] + counters[RX_DEV]["tx_dropped"]}
        if any(drops.values()):
            warnings.append("drops: " + ", ".join(f"{k} {v}" for k, v in drops.items() if v))
        uncovered = covered.count(False)
        if unmatched:
            warnings.append(f"{unmatched} delivered packets could not be traced to input frames")
        if uncovered:
            warnings.append(f"{uncovered} input frames are in no delivered packet")
        settings = self.ns.settings()
        settings.update({"csum": csum, "batch": batch, "budget": BUDGET, "max_replays": MAX_REPLAYS,
                         "kernel": platform.release()})
        settings.update(self._rss_settings())
        reliable = all(bt.ok for bt in batches) and not any(drops.values())
        return KernelReplayResult(packets, batches, drops, reliable, settings, warnings, platform.release(),
                                  unmatched, uncovered, counters)


def _send_marked(tx: socket.socket, tx_vnet: socket.socket, prepared: Sequence[Tuple[bytes, bytes]],
                 marks: Sequence[list]) -> None:
    """--rss: each frame sent with its SO_MARK control message."""
    for (frame, vnet), cmsg in zip(prepared, marks):
        if vnet:
            tx_vnet.sendmsg([vnet, frame], cmsg)
        else:
            tx.sendmsg([frame], cmsg)


def _gso_payload(frame: bytes, base: int, csum_start: int, flags: int, tags: int,
                 vxlan_ports=()) -> Optional[int]:
    """L4 payload bytes of a GSO packet.  With NEEDS_CSUM, csum_start is where the
    kernel says the (inner, for a tunnel) transport header is, which holds for
    every encapsulation; otherwise (fraglist packets) from the parsed headers."""
    if flags & VNET_F_NEEDS_CSUM and csum_start:
        l4 = csum_start + 4 * tags
        if base in (1, 4) and len(frame) >= l4 + 13:
            return max(0, len(frame) - l4 - (frame[l4 + 12] >> 4) * 4)
        if base == 5 and len(frame) >= l4 + 8:
            return max(0, len(frame) - l4 - 8)
    p = fr.parse(frame, vxlan_ports=vxlan_ports)
    return p.payload if p is not None else None


def _delivered(frame: bytes, vnet: tuple, status: int, tags: int = 0, vxlan_ports=()) -> DeliveredPacket:
    """The captured packet with its virtio_net_hdr decoded.

    virtio_net_hdr_from_skb reports only the base GSO type (tcpv4, tcpv6,
    udp_l4, and ECN): not SKB_GSO_FRAGLIST, nor the tunnel bits (UDP_TUNNEL,
    GRE, ...), so a VXLAN or GRE super-packet shows the inner tcpv4/tcpv6.  A
    fraglist super-packet is recognised by its checksum state: normal GRO
    completes with CHECKSUM_PARTIAL (NEEDS_CSUM, csum_start at the transport
    header), fraglist GRO leaves it CHECKSUM_UNNECESSARY (DATA_VALID) and the
    transport checksum as the first segment had it.  Frames injected as
    CHECKSUM_PARTIAL (--csum trust) stay PARTIAL in fraglist too; there the
    transport checksum tells: normal GRO always rewrites it to the pseudo-header
    seed of the whole packet (tcp4/6_gro_complete, udp4/6_gro_complete), fraglist
    never does."""
    flags, gso_type, hdr_len, gso_size, csum_start, csum_offset = vnet
    base = gso_type & ~VNET_GSO_ECN
    names: List[str] = []
    segs = 1
    if base:
        names.append(VNET_GSO_NAMES.get(base, f"virtio_gso_{base}"))
        if gso_type & VNET_GSO_ECN:
            names.append("tcp_ecn")
        payload = _gso_payload(frame, base, csum_start, flags, tags, vxlan_ports)
        if gso_size and payload is not None:
            segs = max(1, -(-payload // gso_size))
    else:
        gso_size = 0
    csum = "partial" if flags & VNET_F_NEEDS_CSUM else "valid" if flags & VNET_F_DATA_VALID else "none"
    return DeliveredPacket(frame, names, gso_size, segs, csum,
                           vnet={"flags": flags, "gso_type": gso_type, "hdr_len": hdr_len, "gso_size": gso_size,
                                 "csum_start": csum_start, "csum_offset": csum_offset},
                           tp_status=status, fraglist=bool(base) and _fraglist(frame, csum, vxlan_ports))


def vnet_lacks_udp_l4(release: Optional[str] = None) -> bool:
    """Before 6.2 virtio_net_hdr_from_skb has no UDP_L4 type: a UDP GSO packet makes
    recvmsg on a PACKET_VNET_HDR socket fail (EINVAL) and is lost to that socket."""
    import re

    m = re.match(r"(\d+)\.(\d+)", release or platform.release())
    return m is not None and (int(m.group(1)), int(m.group(2))) < (6, 2)


def _delivered_without_vnet(frame: bytes, status: int, injected: Sequence[bytes], claimed: set, vxlan_ports=(),
                            geneve_ports=()) -> DeliveredPacket:
    """A UDP GSO packet seen without its virtio_net_hdr (kernels before 6.2): its
    segments are the run of same-flow injected datagrams whose payloads make up its
    payload (GRO appends whole datagrams in order; the first's size is gso_size);
    its checksum state comes from the auxdata status (CSUMNOTREADY: partial,
    CSUM_VALID: valid, so fraglist).  Only frames not yet ``claimed`` by an earlier
    packet count, all of one size but the last (udp_gro_receive_segment); the
    frames taken are added to ``claimed``."""
    ports = {"vxlan_ports": vxlan_ports, "geneve_ports": geneve_ports}
    p = fr.parse(frame, **ports)
    csum = "partial" if status & TP_STATUS_CSUMNOTREADY else "valid" if status & TP_STATUS_CSUM_VALID else "none"
    segs, first = 1, None
    if p is not None:
        body = frame[p.payload_off:p.payload_off + p.payload]
        runs = [(i, q.payload, bytes(f[q.payload_off:q.payload_off + q.payload]))
                for i, (f, q) in enumerate(zip(injected, (fr.parse(f, **ports) for f in injected)))
                if i not in claimed and q is not None and q.flow == p.flow and f[:12] == frame[:12]]
        for k in range(len(runs)):
            pos, taken = 0, []
            for i, size, chunk in runs[k:]:
                if size > runs[k][1] or (taken and size != runs[k][1] and pos + size != len(body)) \
                        or body[pos:pos + size] != chunk:
                    break
                pos = pos + size
                taken.append(i)
                if pos >= len(body):
                    break
            if taken and pos == len(body):
                segs, first = len(taken), runs[k][1]
                claimed.update(taken)
                break
    gso = segs > 1 or csum == "partial"
    return DeliveredPacket(frame, ["udp_l4"] if gso else [], (first or 0) if gso else 0, segs, csum,
                           vnet={}, tp_status=status, fraglist=gso and _fraglist(frame, csum, vxlan_ports))


def _fraglist(frame: bytes, csum: str, vxlan_ports=()) -> bool:
    if csum == "valid":
        return True
    if csum != "partial":
        return False
    p = fr.parse(frame, vxlan_ports=vxlan_ports)
    return p is not None and not fr.holds_seed(frame, p)


VXLAN_PORT, GENEVE_PORT = 4789, 6081


def host_hint(frames: Sequence[bytes], host: HostState) -> Optional[str]:
    """One line naming the host options this capture's traffic would call for, or None:
    UDP to the VXLAN/GENEVE ports without a device there, UDP flows of equal-size
    datagrams with no UDP GRO path, TCP flows that --rx-gro-list makes fraglist."""
    from ..engine.tunnels import udp_tunnel_payload

    udp_sizes: Dict[tuple, Dict[int, int]] = {}
    udp_ports = set()
    shaped: Dict[str, set] = {"vxlan": set(), "geneve": set()}   # ports whose datagrams carry that tunnel
    tcp_seen = False
    for f in frames:
        p = fr.parse(f, vxlan_ports=host.vxlan_ports, geneve_ports=host.geneve_ports)
        if p is None:
            continue
        if p.proto == fr.IPPROTO_TCP:
            tcp_seen = tcp_seen or p.payload > 0
        elif p.proto == fr.IPPROTO_UDP:
            if p.dport not in udp_ports:
                kind = udp_tunnel_payload(f, p.payload_off, len(f))
                if kind:
                    shaped[kind].add(p.dport)
            udp_ports.add(p.dport)
            sizes = udp_sizes.setdefault(p.flow, {})
            sizes[p.payload] = sizes.get(p.payload, 0) + 1
    parts = []
    vxlan = sorted(({VXLAN_PORT} & udp_ports | shaped["vxlan"]) - set(host.vxlan_ports) - {GENEVE_PORT})
    geneve = sorted(({GENEVE_PORT} & udp_ports | shaped["geneve"]) - set(host.geneve_ports) - set(vxlan))
    for port in vxlan:
        parts.append(f"UDP to port {port} (VXLAN: --vxlan-port {port})")
    for port in geneve:
        parts.append(f"UDP to port {port} (GENEVE: --geneve-port {port})")
    tunnel_ports = {VXLAN_PORT, GENEVE_PORT} | set(host.vxlan_ports) | set(host.geneve_ports) | set(vxlan) \
        | set(geneve)
    equal = sorted({flow[4] for flow, sizes in udp_sizes.items() if max(sizes.values()) > 1
                    and flow[4] not in tunnel_ports and flow[4] not in host.udp_gro_sockets})
    if equal and not (host.udp_gro_forwarding or host.rx_gro_list):
        ports = ", ".join(str(x) for x in equal[:3]) + (", ..." if len(equal) > 3 else "")
        parts.append(f"UDP flows of equal-size datagrams to port {ports} (--udp-gro-socket PORT, "
                     f"--udp-gro-forwarding or --rx-gro-list)")
    if host.rx_gro_list and tcp_seen and not host.local_tcp:
        parts.append("TCP flows, fraglist under --rx-gro-list unless --local-tcp says they end locally")
    return "this capture has " + "; ".join(parts) if parts else None


def tcp_flows(frames: Sequence[bytes], vxlan_ports=()) -> List[Tuple[Endpoint, Endpoint]]:
    """The (source, destination) endpoints of the TCP flows in the frames, in order of
    first appearance; for a tunnelled flow the inner ones (what the kernel's
    established-socket lookup in tcp4/6_check_fraglist_gro uses)."""
    seen: Dict[tuple, None] = {}
    for f in frames:
        p = fr.parse(f, vxlan_ports=vxlan_ports)
        if p is not None and p.proto == fr.IPPROTO_TCP and p.sport and p.dport:
            key = (p.src, p.sport, p.dst, p.dport)
            if key not in seen:
                seen[key] = None
    return [(Endpoint(str(ipaddress.ip_address(s)), sp), Endpoint(str(ipaddress.ip_address(d)), dp))
            for s, sp, d, dp in seen]


def frame_problem(frame: bytes, mtu: int = MTU) -> Optional[str]:
    """Why veth cannot carry this Ethernet frame, or None."""
    if len(frame) < fr.ETH_HLEN:
        return f"{len(frame)} bytes, shorter than an Ethernet header"
    limit = mtu + fr.ETH_HLEN + (4 if frame[12:14] in (b"\x81\x00", b"\x88\xa8") else 0)
    if len(frame) > limit:
        why = " (the XDP program that GRO on veth needs before Linux 5.13 limits it)" if mtu != MTU else ""
        return f"{len(frame)} bytes, more than veth's MTU {mtu} allows ({limit} with the Ethernet header){why}"
    return None


def check_frame(frame: bytes, index: int, mtu: int = MTU) -> None:
    """InputError for a frame veth cannot carry."""
    problem = frame_problem(frame, mtu)
    if problem:
        raise InputError(f"frame {index} is {problem}")


# -----------------------------------------------------------------------------
# one-shot entry points
# -----------------------------------------------------------------------------
def kernel_replay(frames: Sequence[bytes], timestamps: Optional[Sequence[int]] = None, *,
                  csum: str = DEFAULT_CSUM, udp_gro: Optional[str] = None, host: Optional[HostState] = None,
                  batch: int = BUDGET, max_seconds: float = 300, log: Optional[Callable[[str], None]] = None,
                  reported_seconds: Optional[float] = None, rss_key: Optional[bytes] = None) -> KernelReplayResult:
    """Replay Ethernet frames through the kernel in a fresh namespace set up as
    ``host`` says (``udp_gro`` is the deprecated off|forward|fraglist); the full result.
    With ``rss_key`` every frame carries the RSS hash grotool computes with that key."""
    for i, f in enumerate(frames):
        check_frame(f, i)
    with KernelSession(udp_gro, host=host, max_seconds=max_seconds, log=log,
                       reported_seconds=reported_seconds, rss_key=rss_key) as ks:
        result = ks.replay(frames, timestamps, csum=csum, batch=batch)
        result.hint = host_hint(frames, ks.host)
        return result


def replay_frames(frames: Sequence[bytes], timestamps: Optional[Sequence[int]] = None, *,
                  csum: str = DEFAULT_CSUM, udp_gro: Optional[str] = None, host: Optional[HostState] = None,
                  batch: int = BUDGET, max_seconds: float = 300,
                  log: Optional[Callable[[str], None]] = None, require_reliable: bool = False,
                  rss_key: Optional[bytes] = None) -> DeliveredList:
    """Replay in-memory Ethernet frames in a fresh namespace; the delivered
    packets in delivery order (a list that also has ``reliable``, ``batches``,
    ``drops``, ``warnings``, ``settings``).

    With ``require_reliable=True``, raises UnreliableRun (exit 4) when the kernel
    dropped frames or a batch never went through cleanly.
    """
    result = kernel_replay(frames, timestamps, csum=csum, udp_gro=udp_gro, host=host, batch=batch,
                           max_seconds=max_seconds, log=log, rss_key=rss_key)
    if require_reliable and not result.reliable:
        raise UnreliableRun("kernel replay unreliable: " + "; ".join(result.warnings))
    return DeliveredList(result)
