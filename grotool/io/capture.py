"""Streaming capture reader (pcap µs/ns, pcapng, gzip) and atomic pcap writer.

The reader yields ``(ts_ns, data, wirelen)`` tuples; ``data`` is ``bytes`` of
the captured length.  Memory stays bounded by one read chunk plus one record.
"""

from __future__ import annotations

import gzip
import io
import os
import struct
import sys
import tempfile
from typing import BinaryIO, Iterator, Optional, Tuple

from ..errors import InputError

from ..linktypes import LINKTYPE_ETHERNET, SUPPORTED_LINKTYPES

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D

CHUNK = 1 << 20
Record = Tuple[int, bytes, int]


def _open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None


class _PeekStream:
    """Wraps a binary stream so the first bytes can be inspected (gzip, magic)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.head = b""

    def peek(self, n: int) -> bytes:
        while len(self.head) < n:
            more = self.raw.read(n - len(self.head))
            if not more:
                break
            self.head += more
        return self.head[:n]

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                out = self.head + self.raw.read()
                self.head = b""
                return out
            out = self.head[:n]
            self.head = self.head[n:]
            if len(out) < n:
                out += self.raw.read(n - len(out))
            return out
        return self.raw.read(n)

    def readinto(self, target) -> int:
        if self.head:
            n = min(len(self.head), len(target))
            target[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        reader = getattr(self.raw, "readinto", None)
        if reader is not None:
            return reader(target) or 0
        data = self.raw.read(len(target))
        target[:len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True


class CaptureReader:
    """Reads pcap or pcapng, optionally gzip-compressed, from a path or ``-``.

    Iterate to get ``(ts_ns, data, wirelen)``.  ``linktype`` is known after
    construction (pcap) or after the first interface block (pcapng); it is read
    eagerly so callers can rely on it before iterating.
    """

    def __init__(self, path: str):
        self.path = path
        self.name = "<stdin>" if path == "-" else path
        raw = _open_binary(path)
        self._owned = raw if path != "-" else None
        stream = _PeekStream(raw)
        if stream.peek(2) == b"\x1f\x8b":
            stream = _PeekStream(gzip.GzipFile(fileobj=stream, mode="rb"))  # type: ignore[arg-type]
        self._stream = stream
        self._buf = b""
        self._pos = 0          # read position inside _buf
        self._base = 0         # file offset of _buf[0]
        self._eof = False
        self.records_read = 0
        self.linktype: Optional[int] = None
        self.snaplen = 0
        self.format = ""
        self.nanosecond = False
        magic = self._peek_bytes(4)
        if len(magic) < 4:
            raise InputError(f"{self.name}: empty or too short to be a capture ({len(magic)} bytes)")
        m_le = struct.unpack("<I", magic)[0]
        m_be = struct.unpack(">I", magic)[0]
        if m_le == PCAPNG_SHB:
            self.format = "pcapng"
            self._iter = self._pcapng_records()
            self._interfaces: list = []
            self._first = self._prime_pcapng()
        elif m_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) or m_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            self.format = "pcap"
            self._read_pcap_header()
            self._iter = self._pcap_records()
            self._first = None
        else:
            raise InputError(
                f"{self.name}: not a pcap or pcapng file (magic 0x{m_be:08x} at byte offset 0)"
            )
        if self.linktype is not None and self.linktype not in SUPPORTED_LINKTYPES:
            raise InputError(
                f"{self.name}: unsupported link type {self.linktype}; supported: "
                "Ethernet (1), raw IP (101, 12, 14), IPv4 (228), IPv6 (229), Linux SLL (113), SLL2 (276)"
            )

    # -- buffered byte access -------------------------------------------------
    def _fill(self, need: int) -> bool:
        """Make at least ``need`` bytes available from _pos; False at EOF."""
        avail = len(self._buf) - self._pos
        if avail >= need:
            return True
        if self._eof:
            return False
        parts = [self._buf[self._pos:]]
        self._base += self._pos
        have = avail
        while have < need:
            try:
                chunk = self._stream.read(max(CHUNK, need - have))
            except (OSError, EOFError, gzip.BadGzipFile) as exc:
                raise InputError(f"{self.name}: read error near byte offset {self._base + have}: {exc}") from None
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        self._buf = b"".join(parts)
        self._pos = 0
        return have >= need

    def _peek_bytes(self, n: int) -> bytes:
        self._fill(n)
        return self._buf[self._pos:self._pos + n]

    def offset(self) -> int:
        return self._base + self._pos

    # -- pcap ------------------------------------------------------------------
    def _read_pcap_header(self) -> None:
        if not self._fill(24):
            raise InputError(f"{self.name}: pcap file header cut short (need 24 bytes)")
        hdr = self._buf[self._pos:self._pos + 24]
        magic_le = struct.unpack_from("<I", hdr)[0]
        if magic_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            self._endian = "<"
            magic = magic_le
        else:
            self._endian = ">"
            magic = struct.unpack_from(">I", hdr)[0]
        self.nanosecond = magic == PCAP_MAGIC_NS
        _, major, minor, _, _, snaplen, network = struct.unpack_from(self._endian + "IHHiIII", hdr)
        if major != 2:
            raise InputError(f"{self.name}: unsupported pcap version {major}.{minor}")
        self.snaplen = snaplen
        # The upper bits of the link-type field carry FCS information (pcap-linktype).
        self.linktype = network & 0x0FFFFFFF
        self._fcs_len = ((network >> 28) & 0xF) * 2 if network & 0x04000000 else 0
        self._pos += 24

    def _pcap_records(self) -> Iterator[Record]:
        """Records from a reusable buffer filled with readinto: no per-chunk
        allocation, one copy per record."""
        unpack = struct.Struct(self._endian + "IIII").unpack_from
        mult = 1 if self.nanosecond else 1000
        name = self.name
        max_caplen = max(self.snaplen, 1 << 20)
        index = 0
        stream = self._stream
        offset = self._base + self._pos          # file offset of buf[0]
        size = CHUNK
        buf = bytearray(size)
        first = self._buf[self._pos:]
        buf[:len(first)] = first
        end = len(first)
        self._buf = b""
        self._pos = 0
        mv = memoryview(buf)
        pos = 0
        eof = False

        def refill(need: int) -> None:
            """Move the unread tail to the front (growing the buffer for a record
            larger than it) and fill the rest from the stream."""
            nonlocal buf, mv, pos, end, eof, size, offset
            rest = end - pos
            offset += pos
            if need > size:
                size = max(size * 2, need)
                old = bytes(mv[pos:end])
                mv.release()
                buf = bytearray(size)
                mv = memoryview(buf)
                mv[:rest] = old
            else:
                mv[:rest] = mv[pos:end]
            pos, end = 0, rest
            while end < size and not eof:
                n = stream.readinto(mv[end:])
                if not n:
                    eof = True
                else:
                    end += n

        while True:
            if end - pos < 16 and not eof:
                refill(16)
            if end - pos < 16:
                if end - pos:
                    raise InputError(
                        f"{name}: record {index + 1} header cut short at byte offset {offset + pos} "
                        f"({end - pos} of 16 bytes)"
                    )
                return
            sec, frac, caplen, wirelen = unpack(mv, pos)
            if caplen > max_caplen or frac >= 1_000_000_000:
                raise InputError(
                    f"{name}: record {index + 1} at byte offset {offset + pos} is corrupt "
                    f"(caplen {caplen}, fraction {frac})"
                )
            stop = pos + 16 + caplen
            if stop > end and not eof:
                refill(16 + caplen)
                stop = 16 + caplen
            if stop > end:
                raise InputError(
                    f"{name}: record {index + 1} at byte offset {offset + pos} cut short "
                    f"(caplen {caplen}, file ends after {end - pos - 16} bytes)"
                )
            index += 1
            self.records_read = index
            yield (sec * 1_000_000_000 + frac * mult, bytes(mv[pos + 16:stop]), wirelen)
            pos = stop

    # -- pcapng ----------------------------------------------------------------
    def _prime_pcapng(self):
        """Read blocks until the first packet so ``linktype`` is known."""
        try:
            first = next(self._iter)
        except StopIteration:
            first = None
        return first

    def _block(self) -> Optional[Tuple[int, bytes, int]]:
        """Next raw pcapng block: (type, body, offset)."""
        if not self._fill(8):
            rest = len(self._buf) - self._pos
            if rest:
                raise InputError(f"{self.name}: pcapng block cut short at byte offset {self.offset()}")
            return None
        off = self.offset()
        btype_raw = self._buf[self._pos:self._pos + 4]
        if btype_raw == b"\x0a\x0d\x0d\x0a":
            if not self._fill(12):
                raise InputError(f"{self.name}: section header cut short at byte offset {off}")
            bom = self._buf[self._pos + 8:self._pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                self._e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                self._e = ">"
            else:
                raise InputError(f"{self.name}: bad pcapng byte-order magic at byte offset {off}")
        btype, blen = struct.unpack_from(self._e + "II", self._buf, self._pos)
        if blen < 12 or blen % 4 or blen > (1 << 26):
            raise InputError(f"{self.name}: corrupt pcapng block (length {blen}) at byte offset {off}")
        if not self._fill(blen):
            raise InputError(f"{self.name}: pcapng block cut short at byte offset {off} (length {blen})")
        body = self._buf[self._pos + 8:self._pos + blen - 4]
        trailer = struct.unpack_from(self._e + "I", self._buf, self._pos + blen - 4)[0]
        if trailer != blen:
            raise InputError(f"{self.name}: corrupt pcapng block at byte offset {off} (length fields differ)")
        self._pos += blen
        return btype, body, off

    @staticmethod
    def _options(body: bytes, start: int, e: str):
        pos = start
        while pos + 4 <= len(body):
            code, length = struct.unpack_from(e + "HH", body, pos)
            if code == 0:
                return
            yield code, body[pos + 4:pos + 4 + length]
            pos += 4 + ((length + 3) & ~3)

    def _pcapng_records(self) -> Iterator[Record]:
        self._e = "<"
        interfaces = []   # (linktype, units_per_second, offset_ns)
        index = 0
        while True:
            blk = self._block()
            if blk is None:
                return
            btype, body, off = blk
            e = self._e
            if btype == PCAPNG_SHB:
                interfaces = []
                self._interfaces = interfaces
            elif btype == 1:  # Interface Description Block
                if len(body) < 8:
                    raise InputError(f"{self.name}: interface block too short at byte offset {off}")
                lt, _, snap = struct.unpack_from(e + "HHI", body, 0)
                units, toff = 1_000_000, 0
                for code, val in self._options(body, 8, e):
                    if code == 9 and val:        # if_tsresol
                        r = val[0]
                        units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** r
                    elif code == 14 and len(val) == 8:  # if_tsoffset (seconds)
                        toff = struct.unpack(e + "q", val)[0] * 1_000_000_000
                interfaces.append((lt, units, toff))
                if self.linktype is None:
                    self.linktype = lt
                    self.snaplen = snap
                elif lt != self.linktype:
                    raise InputError(
                        f"{self.name}: interfaces with different link types ({self.linktype} and {lt}) "
                        "in one pcapng file are not supported"
                    )
            elif btype in (6, 3):  # Enhanced / Simple Packet Block
                if btype == 6:
                    if len(body) < 20:
                        raise InputError(f"{self.name}: packet block too short at byte offset {off}")
                    ifid, hi, lo, caplen, wirelen = struct.unpack_from(e + "IIIII", body, 0)
                    data_at = 20
                    ts_units = (hi << 32) | lo
                else:
                    ifid, wirelen = 0, struct.unpack_from(e + "I", body, 0)[0]
                    data_at = 4
                    ts_units = 0
                    caplen = min(wirelen, len(body) - 4)
                if ifid >= len(interfaces):
                    raise InputError(
                        f"{self.name}: packet at byte offset {off} names interface {ifid}, "
                        f"but only {len(interfaces)} are described"
                    )
                if data_at + caplen > len(body):
                    raise InputError(f"{self.name}: packet at byte offset {off} overruns its block")
                _, units, toff = interfaces[ifid]
                if units == 1_000_000_000:
                    ts = ts_units
                elif units == 1_000_000:
                    ts = ts_units * 1000
                else:
                    ts = ts_units * 1_000_000_000 // units
                index += 1
                self.records_read = index
                yield (ts + toff, body[data_at:data_at + caplen], wirelen)
            elif btype == 2:  # obsolete Packet Block
                ifid, _, hi, lo, caplen, wirelen = struct.unpack_from(e + "HHIIII", body, 0)
                _, units, toff = interfaces[ifid] if ifid < len(interfaces) else (0, 1_000_000, 0)
                index += 1
                self.records_read = index
                yield (((hi << 32) | lo) * 1_000_000_000 // units + toff, body[20:20 + caplen], wirelen)
            # other blocks (name resolution, statistics, custom, DSB) are skipped

    # -- public ----------------------------------------------------------------
    def __iter__(self) -> Iterator[Record]:
        if self.format == "pcap":
            return self._iter
        return self._iter_pcapng()

    def _iter_pcapng(self) -> Iterator[Record]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        yield from self._iter

    @property
    def fcs_len(self) -> int:
        return getattr(self, "_fcs_len", 0)

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()

    def __enter__(self) -> "CaptureReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_capture(path: str):
    """Convenience: all records of a (small) capture as a list, plus its link type."""
    with CaptureReader(path) as reader:
        records = list(reader)
        return reader.linktype, records


class PcapWriter:
    """Writes a nanosecond pcap, atomically: a temporary file renamed on close.

    ``abort()`` (or an exception inside ``with``) removes the temporary file and
    leaves any existing file at the destination untouched.  ``-`` writes to
    standard output directly.

    Records headed for a file are gathered (references, not copies: ``bytes``
    cannot change) and handed to the kernel about a megabyte at a time with one
    ``os.writev``, so a 64 KiB super-packet is never copied in user space.
    """

    GATHER_BYTES = 1 << 20
    GATHER_PIECES = 512                  # well below IOV_MAX (1024 on Linux)

    def __init__(self, path: str, linktype: int = LINKTYPE_ETHERNET, snaplen: int = 262144):
        self.path = path
        self.packets = 0
        self._tmp: Optional[str] = None
        self._fd: Optional[int] = None
        self._f: Optional[BinaryIO] = None
        self._pending: list = []
        self._pending_bytes = 0
        header = struct.pack("<IHHiIII", PCAP_MAGIC_NS, 2, 4, 0, 0, snaplen, linktype)
        if path == "-":
            self._f = sys.stdout.buffer
            self._f.write(header)
        else:
            directory = os.path.dirname(os.path.abspath(path)) or "."
            try:
                fd, self._tmp = tempfile.mkstemp(prefix=".grotool-", suffix=".tmp", dir=directory)
            except OSError as exc:
                raise InputError(f"{path}: cannot create output: {exc.strerror}") from None
            if hasattr(os, "writev"):
                self._fd = fd
                self._pending.append(header)
                self._pending_bytes = len(header)
            else:                        # no gather writes on this platform
                self._f = io.BufferedWriter(io.FileIO(fd, "wb"), buffer_size=1 << 20)
                self._f.write(header)
        self._pack = struct.Struct("<IIII").pack

    def write(self, ts_ns: int, data, wirelen: Optional[int] = None) -> None:
        n = len(data)
        sec, nsec = divmod(ts_ns, 1_000_000_000)
        if not 0 <= sec <= 0xFFFFFFFF:
            raise InputError(f"{self.path}: packet {self.packets + 1}: timestamp {ts_ns} ns cannot be stored "
                             "in a pcap file (before 1970 or after 2106)")
        record = self._pack(sec, nsec, n, n if wirelen is None else wirelen)
        self.packets += 1
        if self._fd is None:
            self._f.write(record)
            self._f.write(data)
            return
        if type(data) is not bytes:
            data = bytes(data)           # the caller may change a bytearray after we return
        pending = self._pending
        pending.append(record)
        pending.append(data)
        self._pending_bytes += 16 + n
        if self._pending_bytes >= self.GATHER_BYTES or len(pending) >= self.GATHER_PIECES:
            self._flush_pending()

    def _flush_pending(self) -> None:
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_bytes = 0
        fd = self._fd
        while pending:
            written = os.writev(fd, pending)
            # a short write (rare on a regular file): drop what went out, retry the rest
            while pending and written >= len(pending[0]):
                written -= len(pending[0])
                pending.pop(0)
            if written:
                pending[0] = memoryview(pending[0])[written:]

    def close(self) -> None:
        if self._tmp is None:
            self._f.flush()
            return
        if self._fd is not None:
            self._flush_pending()
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        else:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()
        os.chmod(self._tmp, 0o644)
        os.replace(self._tmp, self.path)
        self._tmp = None

    def abort(self) -> None:
        if self._tmp is not None:
            try:
                if self._fd is not None:
                    self._pending = []
                    os.close(self._fd)
                    self._fd = None
                else:
                    self._f.close()
            finally:
                try:
                    os.unlink(self._tmp)
                except OSError:
                    pass
                self._tmp = None

    def __enter__(self) -> "PcapWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
