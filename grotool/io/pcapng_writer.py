"""pcapng output with per-packet annotations that Wireshark shows.

``PcapngWriter`` writes a Section Header Block, one Interface Description
Block (the input's link type, nanosecond timestamps) and one Enhanced Packet
Block per packet to a binary file object it is given; opening the file
(atomic temporary file + rename, standard output, ...) is the caller's job, so
the writer works with any opener.  ``delivery_annotation`` turns an engine
Delivery into the packet's comment and flags word.

Block and option layout follow the pcapng specification
(draft-ietf-opsawg-pcapng): little-endian section, options padded to 32 bits.
"""

from __future__ import annotations

import struct
from typing import BinaryIO, Iterable, Optional, Sequence, Tuple

from .. import __version__
from ..errors import InputError

BLOCK_SHB = 0x0A0D0D0A
BLOCK_IDB = 0x00000001
BLOCK_EPB = 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D

OPT_END = 0
OPT_COMMENT = 1
SHB_USERAPPL = 4
IF_NAME = 2
IF_TSRESOL = 9
EPB_FLAGS = 2
EPB_QUEUE = 6

# epb_flags bits (pcapng spec, "epb_flags")
FLAG_INBOUND = 0x1                   # bits 0-1: 01 = inbound
FLAG_OUTBOUND = 0x2                  # bits 0-1: 10 = outbound
FLAG_CSUM_NOT_READY = 1 << 9         # checksum field not filled in (offload pending)
FLAG_CSUM_VALID = 1 << 10            # checksum already checked on the receive path
FLAG_TSO = 1 << 11                   # one packet made of several received link-layer packets

INTERFACE_NAME = "grotool-gro"


def _option(code: int, value: bytes) -> bytes:
    pad = (-len(value)) % 4
    return struct.pack("<HH", code, len(value)) + value + b"\0" * pad


def _options(opts: Iterable[Tuple[int, bytes]]) -> bytes:
    body = b"".join(_option(code, value) for code, value in opts)
    return body + struct.pack("<HH", OPT_END, 0) if body else b""


def _block(btype: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", btype, total) + body + struct.pack("<I", total)


class PcapngWriter:
    """Writes pcapng to ``stream`` (a binary file object); nothing else.

    ``write(ts_ns, data, wirelen=None, comment=None, flags=None, queue=None)``
    adds one Enhanced Packet Block; ``close()`` flushes (it does not close the
    stream, which belongs to the caller).
    """

    def __init__(self, stream: BinaryIO, linktype: int, snaplen: int = 262144, *,
                 section_comment: Optional[str] = None, name: str = "<output>"):
        self.stream = stream
        self.name = name
        self.packets = 0
        shb_opts = [(SHB_USERAPPL, f"grotool {__version__}".encode())]
        if section_comment:
            shb_opts.insert(0, (OPT_COMMENT, section_comment.encode()))
        # version 1.0, section length -1 (not given)
        shb = struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + _options(shb_opts)
        idb = struct.pack("<HHI", linktype, 0, snaplen) + _options([
            (IF_NAME, INTERFACE_NAME.encode()),
            (IF_TSRESOL, bytes([9])),        # 10^-9 s: nanoseconds
        ])
        stream.write(_block(BLOCK_SHB, shb) + _block(BLOCK_IDB, idb))
        self._head = struct.Struct("<IIIIIII").pack   # type, length, ifid, ts hi, ts lo, caplen, origlen

    def write(self, ts_ns: int, data, wirelen: Optional[int] = None, comment: Optional[str] = None,
              flags: Optional[int] = None, queue: Optional[int] = None) -> None:
        if ts_ns < 0 or ts_ns >= 1 << 64:
            raise InputError(f"{self.name}: packet {self.packets + 1}: timestamp {ts_ns} ns cannot be stored")
        n = len(data)
        opts = []
        if comment:
            opts.append((OPT_COMMENT, comment.encode()))
        if flags is not None:
            opts.append((EPB_FLAGS, struct.pack("<I", flags)))
        if queue is not None:
            opts.append((EPB_QUEUE, struct.pack("<I", queue)))
        options = _options(opts)
        pad = (-n) % 4
        total = 32 + n + pad + len(options)
        write = self.stream.write
        write(self._head(BLOCK_EPB, total, 0, ts_ns >> 32, ts_ns & 0xFFFFFFFF, n,
                         n if wirelen is None else wirelen))
        write(data)
        write(b"\0" * pad + options + struct.pack("<I", total))
        self.packets += 1

    def write_delivery(self, delivery, l4_csum: str = "partial") -> None:
        comment, flags = delivery_annotation(delivery, l4_csum)
        self.write(delivery.ts, delivery.data, comment=comment, flags=flags, queue=delivery.queue)

    def close(self) -> None:
        self.stream.flush()


class _Buffered:
    """A file-like ``write``/``flush`` over a SafeOutput, in 1 MiB pieces."""

    def __init__(self, out):
        self._out = out
        self._pieces = []
        self._size = 0

    def write(self, data) -> None:
        self._pieces.append(bytes(data))
        self._size += len(data)
        if self._size >= 1 << 20:
            self.flush()

    def flush(self) -> None:
        if self._pieces:
            self._out.writev(self._pieces)
            self._pieces = []
            self._size = 0


class PcapngFile:
    """A PcapngWriter on a path, opened with grotool's safe opener
    (grotool.io.safe_output: a regular file or new path through a temporary
    file renamed on ``close()``, a device, FIFO or ``-`` written in place);
    ``abort()`` removes the temporary.  Same contract as ``PcapWriter``."""

    def __init__(self, path: str, linktype: int, snaplen: int = 262144, *, section_comment: Optional[str] = None):
        from .safe_output import open_output

        self.path = path
        self._out = open_output(path, "output capture")
        self._f = _Buffered(self._out)
        self.writer = PcapngWriter(self._f, linktype, snaplen, section_comment=section_comment, name=path)
        self.write = self.writer.write
        self.write_delivery = self.writer.write_delivery

    @property
    def packets(self) -> int:
        return self.writer.packets

    def close(self) -> None:
        self.writer.close()
        self._f.flush()
        self._out.commit()

    def abort(self) -> None:
        self._out.abort()

    def __enter__(self) -> "PcapngFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# ----------------------------------------------------------------------------
# annotations
# ----------------------------------------------------------------------------
def frame_ranges(indices: Sequence[int]) -> str:
    """0-based capture indices as 1-based frame numbers (as Wireshark numbers
    them), runs compressed: (0, 1, 2, 5) -> '1-3,6'."""
    parts = []
    start = prev = None
    for i in sorted(indices):
        n = i + 1
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = n
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


def delivery_annotation(delivery, l4_csum: str = "partial") -> Tuple[str, int]:
    """(comment, epb_flags) of one delivered packet.

    Flags: inbound, except a packet the capturing host sent (reason
    ``outgoing``): outbound.  A super-packet also gets the "several link-layer
    packets" bit, and "checksum not ready" when its TCP checksum holds the
    pseudo-header seed (``--l4-csum partial``, the kernel's CHECKSUM_PARTIAL)
    or "checksum valid" when grotool wrote a full one.  A packet that was not
    merged is passed through unchanged, so its checksum state is whatever the
    capture had: no checksum bit.
    """
    from ..engine.reasons import REASONS

    effect, function, meaning = REASONS.get(delivery.reason, ("?", "?", ""))
    frames = frame_ranges(delivery.indices)
    plural = "s" if len(delivery.indices) != 1 else ""
    flags = FLAG_OUTBOUND if delivery.reason == "outgoing" else FLAG_INBOUND
    if delivery.segs > 1:
        flags |= FLAG_TSO | (FLAG_CSUM_VALID if l4_csum == "full" else FLAG_CSUM_NOT_READY)
        gso_type = "+".join(delivery.gso_type) or "none"
        comment = (f"GRO super-packet: {delivery.segs} segments, gso_size {delivery.gso_size}, "
                   f"gso_type {gso_type}, frame{plural} {frames}; completed: {delivery.reason} "
                   f"({function}: {meaning})")
    elif effect == "S":
        comment = f"sent up alone, frame {frames}: {delivery.reason} ({function}: {meaning})"
    else:
        comment = f"not merged, frame{plural} {frames}; completed: {delivery.reason} ({function}: {meaning})"
    return comment, flags
