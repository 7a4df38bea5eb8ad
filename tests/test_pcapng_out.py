"""replay --format pcapng: per-packet comments and flags, read back by tshark and scapy."""

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.engine.skb import Delivery
from grotool.io.capture import read_capture
from grotool.io.pcapng_writer import (FLAG_CSUM_NOT_READY, FLAG_CSUM_VALID, FLAG_INBOUND, FLAG_TSO, PcapngWriter,
                                      delivery_annotation, frame_ranges)

ROOT = Path(__file__).resolve().parent.parent
TSHARK = shutil.which("tshark")


def run(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """bulk-4flows replayed (veth) to pcap, to pcapng (by name), and the packet log."""
    d = tmp_path_factory.mktemp("pcapng")
    src = ROOT / "captures" / "bulk-4flows.pcap"
    assert run("replay", "-q", "--device", "veth", src, d / "out.pcap", "--packets", d / "out.jsonl").returncode == 0
    assert run("replay", "-q", "--device", "veth", src, d / "out.pcapng").returncode == 0
    assert run("replay", "-q", "--device", "veth", "--format", "pcapng", src, d / "named.cap").returncode == 0
    log = [json.loads(line) for line in (d / "out.jsonl").read_text().splitlines()]
    return d, log


def test_frame_ranges():
    assert frame_ranges([0, 1, 2, 5]) == "1-3,6"
    assert frame_ranges([4]) == "5"
    assert frame_ranges([0, 2, 3, 4, 9, 10]) == "1,3-5,10-11"


def test_format_by_name_or_option_and_pcap_by_default(outputs):
    d, _ = outputs
    assert (d / "out.pcap").read_bytes()[:4] == struct.pack("<I", 0xA1B23C4D)
    assert (d / "out.pcapng").read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    assert (d / "named.cap").read_bytes() == (d / "out.pcapng").read_bytes()


def test_same_packets_as_the_pcap(outputs):
    d, _ = outputs
    lt_a, a = read_capture(str(d / "out.pcap"))
    lt_b, b = read_capture(str(d / "out.pcapng"))
    assert lt_a == lt_b == 1
    assert len(a) == len(b) == 73
    assert [(ts, data) for ts, data, _ in a] == [(ts, data) for ts, data, _ in b]


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (.ci/run installs it)")
def test_tshark_reads_the_comments(outputs):
    d, log = outputs
    r = subprocess.run([TSHARK, "-r", str(d / "out.pcapng"), "-T", "fields", "-E", "separator=/t",
                        "-e", "frame.number", "-e", "frame.len", "-e", "frame.packet_flags", "-e", "frame.comment"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == 73
    for row, entry in zip(rows, log):
        number, length, flags, comment = row
        assert int(length) == entry["len"]
        frames = frame_ranges(entry["covers"])
        if entry["segs"] > 1:
            assert comment.startswith(f"GRO super-packet: {entry['segs']} segments, gso_size {entry['gso_size']}, "
                                      f"gso_type tcpv4, frames {frames}; completed: {entry['reason']} (")
            assert int(flags, 16) == FLAG_INBOUND | FLAG_TSO | FLAG_CSUM_NOT_READY
        else:
            assert comment.startswith(f"not merged, frame {frames}; completed: {entry['reason']} (")
            assert int(flags, 16) == FLAG_INBOUND
    assert rows[0][3] == ("GRO super-packet: 7 segments, gso_size 1448, gso_type tcpv4, frames 1-7; completed: "
                          "tcp_ts_changed (tcp_gro_receive: TCP timestamp option value differs)")


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (.ci/run installs it)")
def test_tshark_sees_nanosecond_timestamps_and_link_type(outputs):
    d, _ = outputs
    r = subprocess.run([TSHARK, "-r", str(d / "out.pcapng"), "-T", "fields", "-e", "frame.time_epoch",
                        "-e", "frame.interface_name", "-c", "2"], capture_output=True, text=True)
    _, recs = read_capture(str(d / "out.pcap"))
    first = r.stdout.splitlines()[0].split("\t")
    sec, ns = divmod(recs[0][0], 1_000_000_000)
    assert first == [f"{sec}.{ns:09d}", "grotool-gro"]


def test_scapy_reads_comments_and_direction(outputs):
    from scapy.utils import PcapNgReader

    d, log = outputs
    with PcapNgReader(str(d / "out.pcapng")) as reader:
        packets = list(reader)
    assert len(packets) == 73
    for pkt, entry in zip(packets, log):
        assert len(bytes(pkt)) == entry["len"]
        assert pkt.direction == 1                       # inbound
        assert pkt.sniffed_on == "grotool-gro"
        (comment,) = pkt.comments
        assert f"frame{'s' if entry['segs'] > 1 else ''} {frame_ranges(entry['covers'])};".encode() in comment
        assert entry["reason"].encode() in comment


def test_full_checksum_sets_the_valid_bit_and_singles_have_none():
    d = Delivery(0, b"x" * 100, 3, "tcp_push", (4, 5, 6), gso_size=1448, gso_type=("tcpv4",))
    assert delivery_annotation(d, "full")[1] == FLAG_INBOUND | FLAG_TSO | FLAG_CSUM_VALID
    alone = Delivery(0, b"x" * 60, 1, "ip_options_or_version", (9,))
    comment, flags = delivery_annotation(alone)
    assert flags == FLAG_INBOUND
    assert comment == ("sent up alone, frame 10: ip_options_or_version "
                       "(inet_gro_receive: IPv4 options present (first byte not 0x45))")


def test_writer_block_layout():
    """Blocks are 32-bit aligned and their two length fields agree."""
    buf = io.BytesIO()
    w = PcapngWriter(buf, 101, 65535)
    w.write(1_700_000_000_123_456_789, b"\x45" + bytes(20), comment="odd length comment", flags=1, queue=3)
    w.close()
    data = buf.getvalue()
    pos, blocks = 0, []
    while pos < len(data):
        btype, blen = struct.unpack_from("<II", data, pos)
        assert blen % 4 == 0 and struct.unpack_from("<I", data, pos + blen - 4)[0] == blen
        blocks.append((btype, data[pos:pos + blen]))
        pos += blen
    assert [b for b, _ in blocks] == [0x0A0D0D0A, 1, 6]
    idb = blocks[1][1]
    assert struct.unpack_from("<HHI", idb, 8) == (101, 0, 65535)
    assert b"\x09\x00\x01\x00\x09" in idb              # if_tsresol = 9 (nanoseconds)
    epb = blocks[2][1]
    _, _, ifid, hi, lo, caplen, origlen = struct.unpack_from("<IIIIIII", epb)
    assert ((hi << 32) | lo, caplen, origlen, ifid) == (1_700_000_000_123_456_789, 21, 21, 0)
    assert read_back(data) == [(1_700_000_000_123_456_789, b"\x45" + bytes(20))]


def read_back(data):
    import tempfile

    from grotool.io.capture import read_capture as rc

    with tempfile.NamedTemporaryFile(suffix=".pcapng") as f:
        f.write(data)
        f.flush()
        lt, recs = rc(f.name)
    assert lt == 101
    return [(ts, d) for ts, d, _ in recs]


def test_failed_replay_leaves_no_output(tmp_path):
    import struct

    bad = tmp_path / "bad.pcap"
    data = (ROOT / "captures" / "mixed.pcap").read_bytes()
    off = 24
    for _ in range(4):                                   # four good records, then a corrupt one
        off += 16 + struct.unpack_from("<I", data, off + 8)[0]
    bad.write_bytes(data[:off] + struct.pack("<IIII", 0, 0, 300 << 20, 300 << 20) + b"x" * 2000)
    out = tmp_path / "out.pcapng"
    r = run("replay", "-q", bad, out)
    assert r.returncode == 3
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.pcap"]
