"""The pcap reader across its read chunks: records cut by a chunk's end (header or
data), records longer than a chunk, and files cut anywhere, from a regular file,
a gzip stream and standard input (sizes unknown) give exactly the records an
independent whole-file parse gives."""

import gzip
import hashlib
import struct
import subprocess
import sys
from pathlib import Path

import random

import pytest

from grotool.io import capture
from grotool.io.capture import CaptureReader

ROOT = Path(__file__).resolve().parent.parent
CHUNK = capture.RECORD_CHUNK


def record_sizes():
    """Frame lengths, mostly short (a record header often straddles a chunk's
    end), some full-sized, some longer than a chunk; about 4 MB in all, well past
    the reader's first 1 MiB read."""
    rng = random.Random(8)
    sizes = []
    while sum(sizes) < 4_000_000:
        pick = rng.random()
        sizes.append(rng.randrange(0, 300) if pick < 0.85 else 1514 if pick < 0.998 else
                     rng.randrange(65_000, 300_000))
    return sizes


def build(sizes, big_endian=False, nanosecond=True):
    e = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
    out = [struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 262144, 1)]
    for i, n in enumerate(sizes):
        frame = bytes((i * 7 + k) & 0xFF for k in range(min(n, 256))) * (n // 256 + 1)
        out.append(struct.pack(e + "IIII", 1_700_000_000 + i, (i * 37) % 1_000_000, n, n + i % 3))
        out.append(frame[:n])
    return b"".join(out)


def independent(data, big_endian=False, nanosecond=True):
    """(records, (record number, offset) of a record cut short or None), parsed from the whole file."""
    e = ">" if big_endian else "<"
    scale = 1 if nanosecond else 1000
    records, pos = [], 24
    while pos < len(data):
        if len(data) - pos < 16:
            return records, (len(records) + 1, pos)
        sec, frac, caplen, wirelen = struct.unpack_from(e + "IIII", data, pos)
        if pos + 16 + caplen > len(data):
            return records, (len(records) + 1, pos)
        records.append((sec * 1_000_000_000 + frac * scale, data[pos + 16:pos + 16 + caplen], wirelen, 0))
        pos += 16 + caplen
    return records, None


def read_all(path):
    with CaptureReader(str(path), tolerate_truncation=True) as reader:
        records = list(reader.records_with_interface())
        cut = reader.truncation
    return records, (cut["record"], cut["offset"]) if cut else None


SIZES = record_sizes()


@pytest.mark.parametrize("big_endian,nanosecond", [(False, True), (True, False)])
def test_records_across_chunks_file_and_gzip(tmp_path, big_endian, nanosecond):
    data = build(SIZES, big_endian, nanosecond)
    assert len(data) > 4_000_000 and max(SIZES) > CHUNK
    expected, cut = independent(data, big_endian, nanosecond)
    assert cut is None and len(expected) == len(SIZES)
    plain = tmp_path / "in.pcap"
    plain.write_bytes(data)
    packed = tmp_path / "in.pcap.gz"
    packed.write_bytes(gzip.compress(data))
    assert read_all(plain) == (expected, None)
    assert read_all(packed) == (expected, None)


def test_files_cut_anywhere(tmp_path):
    data = build(SIZES)
    boundaries = [24]
    for n in SIZES:
        boundaries.append(boundaries[-1] + 16 + n)
    rng = random.Random(9)
    ends = {len(data) - 1}
    for b in rng.sample(boundaries[1:], 12):
        ends |= {b, b + 1, b + 15, b + 16, b + 17, b - 1}
    for end in sorted(e for e in ends if 24 < e <= len(data)):
        expected = independent(data[:end])
        path = tmp_path / "cut.pcap"
        path.write_bytes(data[:end])
        assert read_all(path) == expected, end
        packed = tmp_path / "cut.pcap.gz"          # size unknown: the end is found by reading
        packed.write_bytes(gzip.compress(data[:end]))
        assert read_all(packed) == expected, end


def test_standard_input_across_chunks(tmp_path):
    data = build(SIZES)
    expected, (cut_record, _) = independent(data[:-100])
    digest = hashlib.sha256(repr(expected).encode()).hexdigest()
    script = ("import hashlib, sys; from grotool.io.capture import CaptureReader\n"
              "r = CaptureReader('-', tolerate_truncation=True)\n"
              "recs = list(r.records_with_interface())\n"
              "print(hashlib.sha256(repr(recs).encode()).hexdigest(), r.truncation['record'])\n")
    run = subprocess.run([sys.executable, "-c", script], input=data[:-100], capture_output=True, cwd=ROOT,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().split() == [digest, str(cut_record)]



def test_standard_input_from_inside_a_regular_file(tmp_path):
    # a regular file's first bytes are looked at and rewound (not read and joined
    # to the next read): a capture that starts past other bytes of the file
    # standard input reads is read from there, and no byte is read twice
    data = build(SIZES[:3000])
    expected, cut = independent(data)
    assert cut is None
    path = tmp_path / "prefixed"
    path.write_bytes(b"not a capture" + data)
    digest = hashlib.sha256(repr(expected).encode()).hexdigest()
    script = ("import hashlib, os, sys; from grotool.io.capture import CaptureReader\n"
              "os.lseek(0, 13, os.SEEK_SET)\n"
              "r = CaptureReader('-')\n"
              "recs = list(r.records_with_interface())\n"
              "print(hashlib.sha256(repr(recs).encode()).hexdigest(), r.file_size)\n")
    with open(path, "rb") as stdin:
        run = subprocess.run([sys.executable, "-c", script], stdin=stdin, capture_output=True, cwd=ROOT,
                             timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.decode().split() == [digest, str(len(data))]


def test_first_look_rewinds_a_regular_file(tmp_path):
    path = tmp_path / "in.pcap"
    path.write_bytes(build(SIZES[:10]))
    with open(path, "rb", buffering=0) as raw:
        stream = capture._PeekStream(raw)
        assert stream.peek(2) == path.read_bytes()[:2]
        assert raw.tell() == 0 and stream.head == b""
        assert stream.read(24) == path.read_bytes()[:24]


class Source:
    """An input without a file size (like a pipe) that records the size of every
    read; with a seed each read returns at most a random few bytes (1 to 70,000)."""

    def __init__(self, data, seed=None):
        self.data = data
        self.at = 0
        self.rng = random.Random(seed) if seed is not None else None
        self.sizes = []

    def read(self, n=-1):
        self.sizes.append(n)
        if n < 0:
            n = len(self.data)
        if self.rng is not None:
            n = min(n, self.rng.choice([1, 7, 15, 16, 17, 300, 1514, 40_000, 70_000]))
        out = self.data[self.at:self.at + n]
        self.at += len(out)
        return out

    def close(self):
        pass


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_short_reads_anywhere(monkeypatch, seed):
    data = build(SIZES)
    cut = len(data) - 1000                       # the last record cut short
    expected = independent(data[:cut])
    assert expected[1] is not None
    source = Source(data[:cut], seed)
    monkeypatch.setattr(capture, "_open_binary", lambda path: source)
    assert read_all("pipe") == expected
    assert source.at == cut and len(source.sizes) > 100


def test_whole_chunk_reads(monkeypatch):
    """A record cut by a chunk's end gets its missing bytes from the next chunk,
    whose rest becomes the buffer after it: after the first read, the file is
    read in whole chunks, one read per chunk (and one more that finds the end)."""
    data = build(SIZES)
    source = Source(data)
    monkeypatch.setattr(capture, "_open_binary", lambda path: source)
    assert read_all("file") == independent(data)
    assert source.sizes[:2] == [2, capture.CHUNK - 2]          # the magic peeked, then the first read
    chunks = -(-(len(data) - capture.CHUNK) // CHUNK)
    assert source.sizes[2:] == [CHUNK] * (chunks + 1)


def _capture_source_module():
    """grotool/io/capture.py loaded from its source, whatever build runs."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "grotool" / "io" / "capture.py"
    spec = importlib.util.spec_from_file_location("grotool.io._capture_source", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("in_place", [True, False])
@pytest.mark.parametrize("big_endian,nanosecond", [(False, True), (True, False), (False, False), (True, True)])
def test_record_header_read_in_place_and_by_struct_agree(tmp_path, monkeypatch, in_place, big_endian, nanosecond):
    """The compiled build reads record headers in place, the interpreted one with
    struct: both readings, run from the source, give every record of either
    byte order and timestamp precision."""
    source = _capture_source_module()
    monkeypatch.setattr(source, "running_compiled", lambda: in_place)
    sizes = SIZES[:3000]
    data = build(sizes, big_endian, nanosecond)
    path = tmp_path / "in.pcap"
    path.write_bytes(data)
    with source.CaptureReader(str(path), tolerate_truncation=True) as reader:
        records = list(reader.records_with_interface())
        assert reader._pcap.in_place is in_place
    expected, cut = independent(data, big_endian, nanosecond)
    assert cut is None and len(expected) == 3000
    assert records == expected
