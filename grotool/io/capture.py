"""Streaming capture reader (pcap µs/ns, pcapng, gzip) and atomic pcap writer.

The reader yields ``(ts_ns, data, wirelen)`` tuples; ``data`` is ``bytes`` of
the captured length.  Memory stays bounded by one read chunk plus one record.
"""

from __future__ import annotations

import os
import stat
import struct
import sys
import types
import zlib
from typing import TYPE_CHECKING, BinaryIO, Iterator, Optional, Tuple

if TYPE_CHECKING:
    import cython        # read by the Cython compiler only: PcapWriter's compiled record header
else:
    from ..engine._interpreted import cython

from ..engine.config import TIMESTAMP_YEARS, timestamp_fits
from ..errors import InputError
from .safe_output import SafeOutput

from ..linktypes import LINKTYPE_ETHERNET, SUPPORTED_LINKTYPES

# what reading a damaged (e.g. gzip-compressed) input can raise: one-line errors
# (gzip.BadGzipFile is an OSError; _GunzipStream decompresses with zlib itself,
# so the gzip module is not imported)
READ_ERRORS = (OSError, EOFError, zlib.error)

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
PCAPNG_BYTE_ORDER_MAGIC = 0x1A2B3C4D

CHUNK = 1 << 20
# pcap records are read this much at a time: below the C allocator's mmap
# threshold (128 KiB), so each chunk reuses freed heap memory instead of
# touching fresh pages (a page fault per 4 KiB)
RECORD_CHUNK = 64 << 10
Record = Tuple[int, bytes, int]
# What one record may claim: beyond this it is corrupt, whatever the header's
# snaplen says (a BIG TCP super-packet is at most 512 KiB).
MAX_RECORD_BYTES = 256 << 20
# Records a little larger than the header's snaplen are tolerated, as libpcap does.
SNAPLEN_SLACK_BYTES = 1 << 20
# pcap link-type field: the link type proper, then the FCS announcement (pcap-linktype)
LINKTYPE_MASK = 0x03FFFFFF
FCS_PRESENT_BIT = 0x04000000
MAX_PCAPNG_BLOCK_BYTES = 1 << 26
# pcapng Enhanced Packet Block option epb_flags: its two low bits are the direction
EPB_FLAGS = 2
EPB_DIRECTION_MASK = 0x3
EPB_OUTBOUND = 0x2
# PcapWriter hands records over this much at a time, or this many pieces (two
# a record): IOV_MAX on Linux, so the write-behind thread writes a hand-over
# with one os.writev.  Every hand-over costs the replay GIL hand-offs to that
# thread (it takes the GIL after its wake-up and after each write, and gets it
# only at the replay's next input read), so few and large ones.
WRITE_GATHER_BYTES = 1536 << 10           # three hand-overs in flight: peak RSS +1.5 MB
WRITE_GATHER_PIECES = 1024
# the compiled PcapWriter copies records up to this size into its buffer (a
# replay's deliveries straight from the engine's frames); larger ones, which a
# copy would not save an allocation for, are gathered by reference
WRITE_COPY_BYTES = 64 << 10
# the first timestamp a pcap record cannot hold: its seconds field is 32 bits
PCAP_TIME_LIMIT_NS = (0xFFFFFFFF + 1) * 1_000_000_000
_PCAP_TIME_LIMIT = PCAP_TIME_LIMIT_NS   # a C integer compiled (PcapWriter.write_ts)
# the machine stores words most significant byte first: the reader swaps a
# little-endian file's header words, the writer (little-endian) its own
BIG_ENDIAN_MACHINE = sys.byteorder == "big"


def _open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        # unbuffered: the reader asks for 64 KiB chunks, which a buffered file
        # would copy once more out of its own 8 KiB buffer
        return open(path, "rb", buffering=0)
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None


def _seekable(stream) -> bool:
    try:
        return stream.seekable()
    except (OSError, ValueError, AttributeError):
        return False


class _PeekStream:
    """Wraps a binary stream so the first bytes can be inspected (gzip, magic)."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.head = b""

    def peek(self, n: int) -> bytes:
        if not self.head and _seekable(self.raw):
            # a regular file is looked at and rewound: the first read then goes
            # straight to the file instead of being joined to what was looked at
            # (a copy of the reader's first megabyte)
            at = self.raw.tell()
            seen = self.raw.read(n)
            self.raw.seek(at)
            return seen
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

    def readable(self) -> bool:
        return True


class _GunzipStream:
    """The decompressed bytes of a gzip stream (members may be concatenated),
    read as a file.  A stream cut short (no end-of-stream marker) gives every
    byte decompressed before the cut and then ends, with ``cut`` set, so a
    truncated capture.pcap.gz is read as far as a truncated capture.pcap is
    (gzip.GzipFile raises instead and loses what its last read had
    decompressed).  Corrupt compressed data raises zlib.error."""

    INPUT_CHUNK = 64 << 10
    OUTPUT_LIMIT = 256 << 10              # decompressed bytes per step: memory stays bounded

    def __init__(self, raw):
        self.raw = raw
        self.cut = False                  # the compressed stream ended inside a member
        self._decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self._input = b""
        self._in_member = False
        self._ended = False
        self._pending = b""

    def _step(self) -> bytes:
        """Some decompressed bytes; b"" at the end."""
        while not self._ended:
            if not self._input:
                self._input = self.raw.read(self.INPUT_CHUNK)
                if not self._input:
                    self.cut = self._in_member
                    self._ended = True
                    break
            d = self._decompressor
            if d.eof:
                if not self._input.strip(b"\0"):
                    self._input = b""             # zero padding after the last member
                    continue
                d = self._decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)   # the next member
            self._in_member = True
            out = d.decompress(self._input, self.OUTPUT_LIMIT)
            if d.eof:
                self._input = d.unused_data
                self._in_member = False
            else:
                self._input = d.unconsumed_tail
            if out:
                return out
        return b""

    def read(self, n: int = -1) -> bytes:
        parts = [self._pending]
        have = len(self._pending)
        while n < 0 or have < n:
            more = self._step()
            if not more:
                break
            parts.append(more)
            have += len(more)
        data = b"".join(parts)
        if n < 0 or len(data) <= n:
            self._pending = b""
            return data
        self._pending = data[n:]
        return data[:n]

    def readable(self) -> bool:
        return True


GZIP_CUT_DETAIL = "the gzip stream ends without its end marker"


class _Records:
    """A capture's records one at a time: ``next_data()`` returns the next
    record's data (None at the end) and leaves its timestamp, original length,
    interface and direction in ``ts``, ``wirelen``, ``interface`` and
    ``outbound`` (the replay loop reads them there, no tuple per record);
    iterating gives ``(ts_ns, data, wirelen, interface)`` tuples.  ``outbound``
    is True for a packet the capture marks as sent by the capturing host
    (pcapng epb_flags); a pcap file records no direction outside the link
    header (a cooked capture's packet type: grotool.linktypes.is_outgoing)."""

    def __iter__(self) -> "_Records":
        return self

    def __next__(self) -> Tuple[int, bytes, int, int]:
        data = self.next_data()
        if data is None:
            raise StopIteration
        return (self.ts, data, self.wirelen, self.interface)

    def next_data(self) -> Optional[bytes]:
        raise NotImplementedError

    def next_view(self) -> Optional[bytes]:
        """next_data() without the copy: a string holding the record's data at
        [view_start, view_end) (left beside ``ts``); None at the end.
        The string is never changed: a frame may keep it as its bytes."""
        data = self.next_data()
        if data is not None:
            self.view_start = 0
            self.view_end = len(data)
        return data


class _PcapngRecords(_Records):
    """The ``(ts_ns, data, wirelen, interface, outbound)`` records of a pcapng file as _Records."""

    def __init__(self, records: Iterator[Tuple[int, bytes, int, int, bool]]):
        self.records = records
        self.ts = 0
        self.wirelen = 0
        self.interface = 0
        self.outbound = False
        self.view_start = 0
        self.view_end = 0

    def next_data(self) -> Optional[bytes]:
        record = next(self.records, None)
        if record is None:
            return None
        self.ts, data, self.wirelen, self.interface, self.outbound = record
        return data


def running_compiled() -> bool:
    """True when this module runs compiled: its functions are then not Python functions."""
    return type(running_compiled) is not types.FunctionType


# the compiled PcapWriter writes each record header with C stores; the
# interpreted one packs it with struct (tests/test_builds.py compares them)
WRITES_IN_PLACE = running_compiled()


class _PcapRecords(_Records):
    """The records of a pcap file after its file header (interface 0).  The
    file is read a chunk at a time into an immutable buffer; a record's header
    is unpacked where it lies and its data is one slice of the buffer (the one
    copy a record costs).  A record cut short by the end of the file is handed
    to the reader's ``_truncated``."""

    def __init__(self, reader: "CaptureReader", first: bytes, pos: int, offset: int):
        self.reader = reader
        self.stream = reader._stream
        self.name = reader.name
        # A record header is read in place by the compiled build (four native
        # word reads there) and by one struct call in the interpreted build
        # (where that is cheaper); tests/test_builds.py checks both agree.
        self.in_place = running_compiled()
        self.unpack_header = struct.Struct(reader._endian + "IIII").unpack_from
        # the compiled build reads the header's fields as native words: swapped when
        # the file's byte order is not the machine's
        self.swap = (reader._endian == "<") == BIG_ENDIAN_MACHINE
        self.fraction_ns = 1 if reader.nanosecond else 1000
        # a fraction at or above one second is invalid (tcpdump prints it as it is)
        self.fraction_limit = 1_000_000_000 if reader.nanosecond else 1_000_000
        self.max_caplen = reader._record_limit(reader.snaplen)
        self.file_size = reader.file_size if reader.file_size is not None else -1   # -1: not known
        self.buf = first
        self.spare = b""             # a chunk read ahead whose bytes from spare_pos follow buf's end in the file
        self.spare_pos = 0
        self.pos = pos               # the next record's header in buf
        self.end = len(first)
        self.offset = offset         # file offset of buf[0]
        self.eof = False
        self.done = False            # the end was reached (or an error raised): no more records
        self.index = 0               # records returned
        self.ts = 0                  # the last record's, as next_data leaves them
        self.wirelen = 0
        self.interface = 0
        self.outbound = False
        self.view_start = 0          # where next_view's record lies in its buffer
        self.view_end = 0

    def refill(self, need: int) -> None:
        """Keep the unread tail and add behind it until ``need`` bytes are
        buffered or the input ends: memory follows the bytes really present,
        never what a record claims.  Input is read a chunk at a time.  With
        nothing left unread the next chunk becomes the buffer as it is; a record
        cut by the end of the buffer is given only the bytes it lacks, so the
        join copies that record, not a chunk, and the rest of that chunk is kept
        (``spare``) to become the buffer after the record: one read per chunk."""
        have = self.end - self.pos
        if not have and self.spare_pos < len(self.spare):
            # the file goes on in the spare chunk: it becomes the buffer, unsliced
            self.offset += self.end - self.spare_pos
            self.buf = self.spare
            self.pos = self.spare_pos
            self.end = len(self.spare)
            self.spare = b""
            self.spare_pos = 0
            have = self.end - self.pos
            if have >= need:
                return
        parts = [self.buf[self.pos:self.end]]
        self.offset += self.pos
        while have < need:
            if self.spare_pos < len(self.spare):
                chunk = self.spare
                start = self.spare_pos
            elif self.eof:
                break
            else:
                try:
                    chunk = self.stream.read(RECORD_CHUNK)
                except READ_ERRORS as exc:
                    raise InputError(f"{self.name}: read error near byte offset {self.offset + have}: {exc}") from None
                start = 0
                if not chunk:
                    self.eof = True
                    break
                if not have:
                    parts[0] = chunk
                    have = len(chunk)
                    continue
            take = min(need - have, len(chunk) - start)
            parts.append(chunk[start:start + take])
            have += take
            if start + take < len(chunk):
                self.spare = chunk
                self.spare_pos = start + take
            else:
                self.spare = b""
                self.spare_pos = 0
        self.buf = parts[0] if len(parts) == 1 else b"".join(parts)
        self.pos = 0
        self.end = have

    def cut_short(self, at: int, detail: str) -> None:
        """The record at file offset ``at`` is cut short by the end of the file."""
        self.done = True
        self.reader._truncated(self.index + 1, at, detail)

    def next_view(self) -> Optional[bytes]:
        """The next record: the buffer holding its data at [view_start, view_end) (see
        _Records.next_view); None at the end of the file or after a record cut short."""
        if self.done:
            return None
        if self.end - self.pos < 16 and not self.eof:
            self.refill(16)
        pos = self.pos
        if self.end - pos < 16:
            if self.end - pos:
                self.cut_short(self.offset + pos, f"record header: {self.end - pos} of 16 bytes")
            elif self.reader.gzip_cut:
                self.cut_short(self.offset + pos, GZIP_CUT_DETAIL)
            self.done = True
            return None
        if self.in_place:
            # the header's four 32-bit fields, read where they lie as native words
            raw = self.buf      # (a C pointer in the compiled build): 16 bytes are there
            word0, word1 = _native_word(raw, pos), _native_word(raw, pos + 4)
            word2, word3 = _native_word(raw, pos + 8), _native_word(raw, pos + 12)
            if self.swap:
                word0, word1, word2, word3 = _swap32(word0), _swap32(word1), _swap32(word2), _swap32(word3)
            sec, fraction, caplen, wirelen = word0, word1, word2, word3
        else:
            sec, fraction, caplen, wirelen = self.unpack_header(self.buf, pos)
        if caplen > self.max_caplen:
            self.done = True
            raise InputError(
                f"{self.name}: record {self.index + 1} at byte offset {self.offset + pos} is corrupt "
                f"(caplen {caplen}, more than the {self.max_caplen} bytes a record of this file may hold)"
            )
        stop = pos + 16 + caplen
        if stop > self.end:
            at = self.offset + pos
            if self.file_size >= 0 and at + 16 + caplen > self.file_size:
                # known before reading: the file ends inside this record
                self.cut_short(at, f"caplen {caplen}, the file ends after {max(self.file_size - at - 16, 0)} bytes")
                return None
            if not self.eof:
                self.refill(16 + caplen)
                pos = 0
                stop = 16 + caplen
            if stop > self.end:
                self.cut_short(self.offset + pos, f"caplen {caplen}, the file ends after {self.end - pos - 16} bytes")
                return None
        self.index += 1
        self.pos = stop
        if fraction < self.fraction_limit:
            self.ts = sec * 1_000_000_000 + fraction * self.fraction_ns
        else:
            # the previous record's timestamp (a first record: its whole seconds)
            self.ts = self.reader._invalid_timestamp(
                self.index, self.offset + pos, f"timestamp fraction {fraction} is not below one second",
                self.ts if self.index > 1 else sec * 1_000_000_000)
        self.wirelen = wirelen
        self.view_start = pos + 16
        self.view_end = stop
        return self.buf

    def next_data(self) -> Optional[bytes]:
        """The next record's data; None at the end of the file or after a record cut short."""
        buf = self.next_view()
        if buf is None:
            return None
        return buf[self.view_start:self.view_end]


class CaptureReader:
    """Reads pcap or pcapng, optionally gzip-compressed, from a path or ``-``.

    Iterate to get ``(ts_ns, data, wirelen)``.  ``linktype`` is known after
    construction (pcap) or after the first interface block (pcapng); it is read
    eagerly so callers can rely on it before iterating.
    """

    def __init__(self, path: str, *, any_linktype: bool = False, tolerate_truncation: bool = False):
        """``any_linktype``: accept link types grotool cannot parse (the caller
        passes their frames through).  ``tolerate_truncation``: a last record cut
        short ends the iteration (``truncation`` says where) instead of raising."""
        self.path = path
        self.name = "<stdin>" if path == "-" else path
        self.tolerate_truncation = tolerate_truncation
        self.any_linktype = any_linktype
        self._section_base = 0
        self.truncation: Optional[dict] = None     # {"record", "offset", "detail"} of a cut-short last record
        self.invalid_timestamps = 0                # records read with the previous record's timestamp
        self.first_invalid_timestamp: Optional[dict] = None   # {"record", "offset", "detail"} of the first
        self._last_ts = 0                          # pcapng: the last valid timestamp
        self.interfaces: list = []                 # pcapng: one dict per interface description block
        raw = _open_binary(path)
        self._owned = raw if path != "-" else None
        # bytes from where reading starts to the end: known for a regular, uncompressed file
        self.file_size: Optional[int] = None
        try:
            st = os.fstat(raw.fileno())
            if stat.S_ISREG(st.st_mode):
                self.file_size = st.st_size - raw.tell()       # stdin may start inside a file
        except (OSError, ValueError, AttributeError):
            pass
        stream = _PeekStream(raw)
        self._gunzip: Optional[_GunzipStream] = None
        if stream.peek(2) == b"\x1f\x8b":
            self.file_size = None
            self._gunzip = _GunzipStream(stream)
            stream = _PeekStream(self._gunzip)  # type: ignore[arg-type]
        self._stream = stream
        self._buf = b""
        self._pos = 0          # read position inside _buf
        self._base = 0         # file offset of _buf[0]
        self._eof = False
        self._records_read = 0                    # pcapng; a pcap file's reader counts its own
        self._pcap: Optional[_PcapRecords] = None
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
            self._first = self._prime_pcapng()
        elif m_le in (PCAP_MAGIC_US, PCAP_MAGIC_NS) or m_be in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            self.format = "pcap"
            self._read_pcap_header()
            self._pcap = _PcapRecords(self, self._buf, self._pos, self._base)
            self._buf = b""
            self._pos = 0
            self._iter = self._pcap
            self._first = None
        else:
            raise InputError(
                f"{self.name}: not a pcap or pcapng file (magic 0x{m_be:08x} at byte offset 0)"
            )
        if self.linktype is not None and self.linktype not in SUPPORTED_LINKTYPES and not any_linktype:
            raise InputError(
                f"{self.name}: unsupported link type {self.linktype}; supported: "
                "Ethernet (1), raw IP (101, 12, 14), IPv4 (228), IPv6 (229), Linux SLL (113), SLL2 (276), "
                "BSD loopback (0, 108)"
            )

    def _truncated(self, record: int, offset: int, detail: str) -> None:
        """A record cut short by the end of the file: remembered when tolerated
        (the iteration then ends), an InputError otherwise."""
        if not self.tolerate_truncation:
            raise InputError(f"{self.name}: record {record} at byte offset {offset} cut short ({detail})")
        self.truncation = {"record": record, "offset": offset, "detail": detail}

    def _record_limit(self, snaplen: int) -> int:
        """The largest caplen a record of this file may claim."""
        if 0 < snaplen <= MAX_RECORD_BYTES:
            return max(snaplen, SNAPLEN_SLACK_BYTES)
        return MAX_RECORD_BYTES

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
                chunk = self._stream.read(CHUNK)      # never what a block claims: what arrives
            except READ_ERRORS as exc:
                raise InputError(f"{self.name}: read error near byte offset {self._base + have}: {exc}") from None
            if not chunk:
                self._eof = True
                break
            parts.append(chunk)
            have += len(chunk)
        # (nothing was left unread: the chunk read becomes the buffer as it is)
        self._buf = parts[1] if len(parts) == 2 and not parts[0] else b"".join(parts)
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
        # The upper bits of the link-type field announce an FCS: the F bit, and
        # the FCS length in 16-bit words in the top 4 bits (pcap-linktype).
        self.linktype = network & LINKTYPE_MASK
        self._fcs_len = ((network >> 28) & 0xF) * 2 if network & FCS_PRESENT_BIT else 0
        self._pos += 24

    # -- pcapng ----------------------------------------------------------------
    def _prime_pcapng(self):
        """Read blocks until the first packet so ``linktype`` is known."""
        try:
            first = next(self._iter)
        except StopIteration:
            first = None
        return first

    def _block(self) -> Optional[Tuple[int, bytes, int]]:
        """Next raw pcapng block: (type, body, offset); None at the end (or at a
        block cut short by the end of the file, when truncation is tolerated)."""
        if not self._fill(8):
            rest = len(self._buf) - self._pos
            if rest:
                self._truncated(self.records_read + 1, self.offset(), f"block header: {rest} of 8 bytes")
            elif self.gzip_cut:
                self._truncated(self.records_read + 1, self.offset(), GZIP_CUT_DETAIL)
            return None
        off = self.offset()
        btype_raw = self._buf[self._pos:self._pos + 4]
        if btype_raw == b"\x0a\x0d\x0d\x0a":
            if not self._fill(12):
                self._truncated(self.records_read + 1, off, "section header block")
                return None
            bom = self._buf[self._pos + 8:self._pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                self._e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                self._e = ">"
            else:
                raise InputError(f"{self.name}: bad pcapng byte-order magic at byte offset {off}")
        btype, blen = struct.unpack_from(self._e + "II", self._buf, self._pos)
        if blen < 12 or blen % 4 or blen > MAX_PCAPNG_BLOCK_BYTES:
            raise InputError(f"{self.name}: corrupt pcapng block (length {blen}) at byte offset {off}")
        if self.file_size is not None and off + blen > self.file_size:
            # known before reading: the file ends inside this block
            self._truncated(self.records_read + 1, off, f"block length {blen}, the file ends after "
                                                        f"{self.file_size - off} bytes")
            return None
        if not self._fill(blen):
            self._truncated(self.records_read + 1, off, f"block length {blen}, the file ends after "
                                                        f"{len(self._buf) - self._pos} bytes")
            return None
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

    def _pcapng_records(self) -> Iterator[Tuple[int, bytes, int, int, bool]]:
        """(ts_ns, data, wirelen, interface id, outbound) of every packet block."""
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
                # interface ids restart in every section; grotool numbers them across the file
                self._section_base = len(self.interfaces)
                interfaces = []
            elif btype == 1:  # Interface Description Block
                if len(body) < 8:
                    raise InputError(f"{self.name}: interface block too short at byte offset {off}")
                lt, _, snap = struct.unpack_from(e + "HHI", body, 0)
                units, toff, name, fcs = 1_000_000, 0, "", 0
                for code, val in self._options(body, 8, e):
                    if code == 2:                # if_name
                        name = val.split(b"\0", 1)[0].decode("utf-8", "replace")
                    elif code == 9 and val:      # if_tsresol
                        r = val[0]
                        units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** r
                    elif code == 13 and val:     # if_fcslen (bytes)
                        fcs = val[0]
                    elif code == 14 and len(val) == 8:  # if_tsoffset (seconds)
                        toff = struct.unpack(e + "q", val)[0] * 1_000_000_000
                interfaces.append((lt, units, toff))
                number = len(self.interfaces)
                self.interfaces.append({"id": number, "linktype": lt, "name": name or f"if{number}",
                                        "snaplen": snap, "fcs_len": fcs})
                if self.linktype is None:
                    self.linktype = lt
                    self.snaplen = snap
                    self._fcs_len = fcs
                elif lt != self.linktype and not self.any_linktype:
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
                outbound = False
                options_at = data_at + ((caplen + 3) & ~3)
                if btype == 6 and options_at + 4 <= len(body):
                    for code, val in self._options(body, options_at, e):
                        if code == EPB_FLAGS and len(val) == 4:
                            outbound = struct.unpack(e + "I", val)[0] & EPB_DIRECTION_MASK == EPB_OUTBOUND
                index += 1
                self._records_read = index
                yield (self._timestamp(ts + toff, index, off), body[data_at:data_at + caplen], wirelen,
                       self._section_base + ifid, outbound)
            elif btype == 2:  # obsolete Packet Block
                if len(body) < 20:
                    raise InputError(f"{self.name}: packet block too short at byte offset {off}")
                ifid, _, hi, lo, caplen, wirelen = struct.unpack_from(e + "HHIIII", body, 0)
                if ifid >= len(interfaces):
                    raise InputError(
                        f"{self.name}: packet at byte offset {off} names interface {ifid}, "
                        f"but only {len(interfaces)} are described"
                    )
                _, units, toff = interfaces[ifid]
                index += 1
                self._records_read = index
                yield (self._timestamp(((hi << 32) | lo) * 1_000_000_000 // units + toff, index, off),
                       body[20:20 + caplen], wirelen, self._section_base + ifid, False)
            # other blocks (name resolution, statistics, custom, DSB) are skipped

    def _timestamp(self, ts: int, index: int, off: int) -> int:
        """A pcapng packet's timestamp in ns; outside what the engine's clock
        takes, the previous packet's (a first packet: 0), counted by
        _invalid_timestamp.  (A pcap record's seconds always fit.)"""
        if not timestamp_fits(ts):
            return self._invalid_timestamp(index, off, f"timestamp {ts} ns is outside {TIMESTAMP_YEARS} that "
                                                       "grotool takes", self._last_ts)
        self._last_ts = ts
        return ts

    def _invalid_timestamp(self, record: int, offset: int, detail: str, replacement: int) -> int:
        """A record whose timestamp is invalid (a fraction of a second at or
        above one second) or out of the engine's range is read all the same, as
        tcpdump reads it, with ``replacement`` as its timestamp: the previous
        record's, so time neither jumps nor runs backwards.  Counted in
        ``invalid_timestamps``; the first is described in ``first_invalid_timestamp``."""
        self.invalid_timestamps += 1
        if self.first_invalid_timestamp is None:
            self.first_invalid_timestamp = {"record": record, "offset": offset, "detail": detail}
        return replacement

    # -- public ----------------------------------------------------------------
    def __iter__(self) -> Iterator[Record]:
        if self.format == "pcap":
            return ((ts, data, wirelen) for ts, data, wirelen, _ in self._iter)
        return ((ts, data, wirelen) for ts, data, wirelen, _, _ in self._iter_pcapng())

    def records_with_interface(self) -> _Records:
        """(ts_ns, data, wirelen, interface id): pcapng interfaces are numbered in
        file order across sections; a pcap file has the one interface 0.  Each
        record's direction is in the _Records' ``outbound`` after next_data()."""
        if self.format == "pcap":
            return self._iter                       # a pcap file's records carry interface 0
        return _PcapngRecords(self._iter_pcapng())

    def _iter_pcapng(self):
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        yield from self._iter

    @property
    def gzip_cut(self) -> bool:
        """The input is gzip-compressed and its compressed stream was cut short."""
        return self._gunzip is not None and self._gunzip.cut

    @property
    def records_read(self) -> int:
        """Records returned so far."""
        return self._pcap.index if self._pcap is not None else self._records_read

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


def _native_word(raw, at: int) -> int:
    """The four bytes at raw[at] as a 32-bit word in the machine's byte order."""
    if cython.compiled:
        memcpy(cython.address(word), raw + at, 4)       # one load
        return word
    return int.from_bytes(raw[at:at + 4], sys.byteorder)


def _swap32(word: int) -> int:
    """A 32-bit word with its bytes in the other order."""
    return ((word & 0xFF) << 24) | ((word & 0xFF00) << 8) | ((word >> 8) & 0xFF00) | (word >> 24)


def _put_le32(out, value: int) -> None:
    """Four bytes of value at out, least significant first (compiled build
    only): one store of the word, its bytes swapped first on a big-endian machine."""
    word = value                      # a C unsigned int: the low 32 bits (callers' values fit)
    if BIG_ENDIAN_MACHINE:
        word = _swap32(word)
    memcpy(out, cython.address(word), 4)


def _write_buffer(size: int) -> bytearray:
    """PcapWriter's record buffer: the compiled build leaves it unfilled (every
    byte handed over is written first), the interpreter's is empty."""
    if WRITES_IN_PLACE:
        return PyByteArray_FromStringAndSize(cython.NULL, size)
    return bytearray(size)


class PcapWriter:
    """Writes a nanosecond pcap through SafeOutput: a regular file or new path is
    written to a temporary file renamed on close; a device, FIFO, /dev/fd/N or
    ``-`` (standard output) is written in place.

    ``abort()`` (or an exception inside ``with``) removes the temporary file and
    leaves any existing file at the destination untouched.

    Records are gathered (references, not copies: ``bytes`` cannot change) and
    handed to the kernel up to 1.5 megabytes (512 records) at a time with one
    ``os.writev``, so a 64 KiB super-packet is never copied in user space.  The
    compiled build copies records of up to WRITE_COPY_BYTES instead into a
    buffer of its own (``reserve``), where the replay copies each delivery
    straight from the frames GRO kept: no string, no record header object, no
    gather entries per packet.
    """

    def __init__(self, path: str, linktype: int = LINKTYPE_ETHERNET, snaplen: int = 262144,
                 what: str = "output capture"):
        self.path = path
        self.packets = 0
        self._out: Optional[SafeOutput] = SafeOutput(path, what)
        header = struct.pack("<IHHiIII", PCAP_MAGIC_NS, 2, 4, 0, 0, snaplen, linktype)
        self._pending: list = [header]
        self._pending_bytes = len(header)
        self._pack = struct.Struct("<IIII").pack
        # the compiled build's record buffer: bytes [0, _sealed) are in _pending
        # already (views), [_sealed, _fill) not yet; a new buffer after each hand-over
        self._buffer = _write_buffer(WRITE_GATHER_BYTES if WRITES_IN_PLACE else 0)
        self._fill = 0
        self._sealed = 0

    def write(self, ts_ns: int, data, wirelen: Optional[int] = None) -> None:
        if not 0 <= ts_ns < PCAP_TIME_LIMIT_NS:
            raise self._unstorable(ts_ns)
        self.write_ts(ts_ns, data, wirelen)

    def write_ts(self, ts: int, data, wirelen: Optional[int] = None) -> None:
        """write() of a timestamp known to fit 64 bits (an engine delivery's): a C
        integer from the compiled replay loop, no Python integer made for it."""
        n = len(data)
        if not 0 <= ts < _PCAP_TIME_LIMIT:
            raise self._unstorable(ts)
        if WRITES_IN_PLACE and wirelen is None and n <= WRITE_COPY_BYTES:
            at = self.reserve(ts, n)
            memcpy(cython.cast(cython.p_uchar, self._buffer) + at, cython.cast(cython.p_uchar, data), n)
            return
        record = self._pack(ts // 1_000_000_000, ts % 1_000_000_000, n, n if wirelen is None else wirelen)
        self.packets += 1
        if type(data) is not bytes:
            data = bytes(data)           # the caller may change a bytearray after we return
        self._seal()
        pending = self._pending
        pending.append(record)
        pending.append(data)
        self._pending_bytes += 16 + n
        if self._pending_bytes >= WRITE_GATHER_BYTES or len(pending) >= WRITE_GATHER_PIECES:
            self._flush_pending()

    def reserve(self, ts: int, n: int) -> int:
        """Room for a record of ``n`` bytes stamped ``ts`` (known to fit 64 bits)
        in the buffer, its header written: the offset in ``_buffer`` where the
        caller writes the n bytes, or -1 when the record is larger than
        WRITE_COPY_BYTES (the caller hands it to write_ts).  Compiled build only."""
        if n > WRITE_COPY_BYTES:
            return -1
        if not 0 <= ts < _PCAP_TIME_LIMIT:
            raise self._unstorable(ts)
        if self._fill + 16 + n > len(self._buffer):
            self._flush_pending()
        at = self._fill
        # the record header's four little-endian 32-bit fields, as write_ts's struct packs them
        out = cython.cast(cython.p_uchar, self._buffer) + at
        _put_le32(out, ts // 1_000_000_000)
        _put_le32(out + 4, ts % 1_000_000_000)
        _put_le32(out + 8, n)
        _put_le32(out + 12, n)
        self._fill = at + 16 + n
        self._pending_bytes += 16 + n
        self.packets += 1
        return at + 16

    def unreserve(self, n: int) -> None:
        """Take back the last reserve(ts, n): its caller wrote nothing."""
        self._fill -= 16 + n
        self._pending_bytes -= 16 + n
        self.packets -= 1

    def _unstorable(self, ts_ns: int) -> InputError:
        return InputError(f"{self.path}: packet {self.packets + 1}: timestamp {ts_ns} ns cannot be stored "
                          "in a pcap file (before 1970 or after 2106)")

    def _seal(self) -> None:
        """Put the buffer's records not yet in _pending there (before a record
        gathered by reference, which must follow them)."""
        if self._fill > self._sealed:
            self._pending.append(memoryview(self._buffer)[self._sealed:self._fill])
            self._sealed = self._fill

    def _flush_pending(self) -> None:
        self._seal()
        pending = self._pending
        if not pending:
            return
        size = self._pending_bytes
        self._pending = []
        self._pending_bytes = 0
        if self._sealed:
            # the handed-over views keep that buffer until written: the next records go to a new one
            self._buffer = _write_buffer(len(self._buffer))
            self._fill = self._sealed = 0
        self._out.writev(pending, size)

    def close(self) -> None:
        if self._out is None:
            return
        try:
            self._flush_pending()
            self._out.commit()
        finally:
            self._out = None

    def abort(self) -> None:
        self._pending = []
        self._fill = self._sealed = 0
        if self._out is not None:
            self._out.abort()
            self._out = None

    def __enter__(self) -> "PcapWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
