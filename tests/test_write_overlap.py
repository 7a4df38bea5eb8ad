"""PcapWriter's hand-overs to the write-behind thread: 1.5 megabytes (or 512
records, one os.writev) at a time, at most WRITE_BEHIND_QUEUE of them waiting, every byte
written in order; the bytes in flight stay bounded whatever the thread does.  The
compiled build copies records of up to 64 KiB into a 1.5 MiB buffer instead of
gathering them by reference (a record with its own wire length, or a larger one, is
still gathered)."""

import os
import struct
import threading
import time

from grotool.io import safe_output
from grotool.io.capture import PcapWriter, running_compiled

# PcapWriter's hand-over limits (grotool/io/capture.py: WRITE_GATHER_BYTES and
# WRITE_GATHER_PIECES, two pieces a record), spelled out: the compiled build
# does not expose module constants
HANDOVER_BYTES = 1536 << 10
HANDOVER_PIECES = 1024
COPY_BYTES = 64 << 10            # WRITE_COPY_BYTES: the compiled build's largest buffered record
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)


def _records(count: int, sizes) -> list:
    """(ts_ns, frame) pairs with distinct contents, sizes cycling through ``sizes``."""
    out = []
    for i in range(count):
        n = sizes[i % len(sizes)]
        out.append((1_700_000_000_000_000_000 + i * 1_000, (i.to_bytes(4, "big") * (n // 4 + 1))[:n]))
    return out


def _expected_file(records) -> bytes:
    parts = [PCAP_HEADER]
    for ts, data in records:
        parts.append(struct.pack("<IIII", ts // 1_000_000_000, ts % 1_000_000_000, len(data), len(data)))
        parts.append(data)
    return b"".join(parts)


def _recording_handovers(monkeypatch):
    """Record (pieces, bytes) of every hand-over PcapWriter makes to its output."""
    handovers = []
    real = safe_output.SafeOutput.writev

    def recording(self, pieces, size=None):
        handovers.append((len(pieces), sum(map(len, pieces))))
        assert size == handovers[-1][1]          # PcapWriter says how many bytes it hands over
        real(self, pieces, size)

    monkeypatch.setattr(safe_output.SafeOutput, "writev", recording)
    return handovers


def test_small_and_large_records_are_handed_over_in_bounded_batches(tmp_path, monkeypatch):
    # records given with their wire length are gathered by reference in both builds
    handovers = _recording_handovers(monkeypatch)
    records = _records(3000, [60]) + _records(1000, [1514, 9000, 65535])
    dest = tmp_path / "out.pcap"
    with PcapWriter(str(dest)) as writer:
        for ts, data in records:
            writer.write(ts, data, len(data))
    expected = _expected_file(records)
    assert dest.read_bytes() == expected
    assert sum(b for _, b in handovers) == len(expected)
    # the rule: hand over once 1.5 megabytes or 1024 pieces are gathered (the
    # file header is the first piece of the first), the rest at close
    want, pieces, size = [], 1, len(PCAP_HEADER)
    for _, data in records:
        pieces, size = pieces + 2, size + 16 + len(data)
        if size >= HANDOVER_BYTES or pieces >= HANDOVER_PIECES:
            want.append((pieces, size))
            pieces, size = 0, 0
    want.append((pieces, size))
    assert handovers == want
    assert want[0] == (1 + 2 * 512, 24 + 512 * 76)             # 60-byte frames: by pieces
    assert max(b for _, b in want) < HANDOVER_BYTES + 16 + 65535   # large frames: by size
    by_size = [(p, b) for p, b in want[:-1] if p < HANDOVER_PIECES]
    assert len(by_size) == 15 and all(b >= HANDOVER_BYTES for _, b in by_size)


def test_the_compiled_build_hands_over_full_buffers_and_gathers_what_does_not_fit(tmp_path, monkeypatch):
    handovers = _recording_handovers(monkeypatch)
    small = _records(3000, [60, 1514, 9000, COPY_BYTES])
    large = _records(3, [COPY_BYTES + 1, 300_000])
    records = small[:1000] + large[:1] + small[1000:2000] + large[1:] + small[2000:]
    dest = tmp_path / "out.pcap"
    with PcapWriter(str(dest)) as writer:
        for ts, data in records:
            writer.write(ts, data)
    expected = _expected_file(records)
    assert dest.read_bytes() == expected
    assert sum(b for _, b in handovers) == len(expected)
    if not running_compiled():
        return                   # the interpreter gathers every record: the first test's rule
    # the rule: a buffered record that does not fit the buffer's room hands over
    # first, then starts a new buffer; a gathered one follows a view of the buffer's
    # records not yet handed over, and hands over at 1.5 MB or 1024 pieces
    want, pieces, used, unsealed = [], [len(PCAP_HEADER)], 0, 0
    for _, data in records:
        n = 16 + len(data)
        if len(data) <= COPY_BYTES:
            if used + n > HANDOVER_BYTES:
                want.append((len(pieces) + (unsealed > 0), sum(pieces) + unsealed))
                pieces, used, unsealed = [], 0, 0
            used, unsealed = used + n, unsealed + n
            continue
        if unsealed:
            pieces.append(unsealed)
            unsealed = 0
        pieces += [16, len(data)]
        if sum(pieces) >= HANDOVER_BYTES or len(pieces) >= HANDOVER_PIECES:
            want.append((len(pieces), sum(pieces)))
            pieces, used = [], 0
    want.append((len(pieces) + (unsealed > 0), sum(pieces) + unsealed))
    assert handovers == want
    assert {p for p, _ in want} == {1, 2, 3, 4}


def test_bytes_in_flight_stay_bounded_while_the_thread_is_stuck(tmp_path, monkeypatch):
    handovers = _recording_handovers(monkeypatch)
    release = threading.Event()
    real_writev = os.writev

    def stuck_writev(fd, bufs):
        release.wait(30)
        return real_writev(fd, bufs)

    monkeypatch.setattr(os, "writev", stuck_writev)
    records = _records(10000, [1514])              # about 15 MB
    dest = tmp_path / "out.pcap"
    writer = PcapWriter(str(dest))
    done = []

    def producer():
        for ts, data in records:
            writer.write(ts, data)
        done.append(True)

    t = threading.Thread(target=producer)
    t.start()
    time.sleep(0.5)
    # one hand-over in the thread's hands, WRITE_BEHIND_QUEUE waiting, the producer
    # blocked handing over the next: nothing more was taken
    assert not done
    assert len(handovers) == safe_output.WRITE_BEHIND_QUEUE + 2
    in_flight = sum(b for _, b in handovers[:-1])
    assert in_flight <= (safe_output.WRITE_BEHIND_QUEUE + 1) * (HANDOVER_BYTES + 16 + 1514)
    release.set()
    t.join(30)
    assert done
    writer.close()
    assert dest.read_bytes() == _expected_file(records)


def test_the_thread_writes_a_handover_with_one_writev_of_up_to_1024_pieces(tmp_path, monkeypatch):
    calls = []
    real_writev = os.writev

    def counting_writev(fd, bufs):
        calls.append(len(bufs))
        return real_writev(fd, bufs)

    monkeypatch.setattr(os, "writev", counting_writev)
    records = _records(2048 + 3, [60])
    dest = tmp_path / "out.pcap"
    with PcapWriter(str(dest)) as writer:
        for ts, data in records:
            writer.write(ts, data, len(data))          # gathered by reference in both builds
    assert dest.read_bytes() == _expected_file(records)
    # hand-overs of 1025 pieces (the file header, 512 records), 1024, 1024, 1024
    # and 6 (3 records, at close): IOV_MAX buffers a call, the first in two
    assert calls == [1024, 1, 1024, 1024, 1024, 6]


def test_short_writes_are_resumed_whatever_size_the_caller_gave(tmp_path, monkeypatch):
    # writev may take fewer bytes than asked (a signal, a full pipe): the rest is
    # written by further calls, the first piece cut where the short write stopped
    real_writev = os.writev
    calls = []

    def short_writev(fd, bufs):
        calls.append(len(bufs))
        total = sum(map(len, bufs))
        return real_writev(fd, bufs) if total <= 7 else real_writev(fd, [bytes(b"".join(bufs)[:total // 2 + 1])])

    monkeypatch.setattr(os, "writev", short_writev)
    pieces = [b"abcdefgh", b"ij", b"klmnopqrstuv", b"w" * 2000]
    expected = b"".join(pieces)
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT)
    try:
        assert safe_output._write_all(fd, list(pieces), len(expected)) == len(expected)
    finally:
        os.close(fd)
    assert (tmp_path / "out").read_bytes() == expected
    assert len(calls) > 3


def test_a_record_reserved_and_taken_back_leaves_no_trace(tmp_path):
    # the compiled replay reserves room for a delivery, then copies it there; a
    # delivery it cannot copy (unreserve) goes through write() instead
    records = _records(5, [60, 1514])
    dest = tmp_path / "out.pcap"
    with PcapWriter(str(dest)) as writer:
        if not running_compiled():
            assert writer._buffer == bytearray()        # the interpreter gathers every record
            for ts, data in records:
                writer.write(ts, data)
        else:
            for i, (ts, data) in enumerate(records):
                at = writer.reserve(ts, len(data))
                if i == 2:
                    writer._buffer[at:at + len(data)] = b"\xee" * len(data)
                    writer.unreserve(len(data))
                    writer.write(ts, data, len(data))     # gathered after the buffer's records
                else:
                    writer._buffer[at:at + len(data)] = data
            assert writer.reserve(0, COPY_BYTES + 1) == -1
            assert writer.packets == 5
    assert dest.read_bytes() == _expected_file(records)
