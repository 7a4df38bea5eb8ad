"""Capture I/O, the replay pipeline and the CLI contract (exit codes, JSON, docs)."""

import glob
import gzip
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.engine import Settings
from grotool.engine import csum
from grotool.engine.reasons import REASONS
from grotool.errors import InputError
from grotool.io.capture import CaptureReader, PcapWriter, read_capture
from grotool.replay import replay

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "tcpdump"


def tcp4_frame(seq, n, ipid=0, flags=0x10, sport=1500):
    payload = bytes((seq + i) & 0xFF for i in range(n))
    tcp = struct.pack("!HHIIBBHHH", sport, 8000, seq, 100, 5 << 4, flags, 65535, 0, 0)
    src, dst = bytes([192, 168, 1, 200]), bytes([192, 168, 1, 100])
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + n, ipid, 0x4000, 64, 6, 0, src, dst))
    ip[10:12] = struct.pack("!H", csum.complement(csum.sum16(bytes(ip))))
    seg = bytearray(tcp + payload)
    seg[16:18] = struct.pack("!H", csum.complement(csum.pseudo4(src, dst, 6, len(seg)) + csum.sum16(bytes(seg))))
    return b"\xaa\x00\x00\x00\x00\x02\xaa\x00\x00\x00\x00\x01\x08\x00" + bytes(ip) + bytes(seg)


FRAMES = [tcp4_frame(100 + i * 1000, 1000, ipid=i) for i in range(30)]


def write_pcap_us(path, frames, big_endian=False):
    e = ">" if big_endian else "<"
    with open(path, "wb") as f:
        f.write(struct.pack(e + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack(e + "IIII", 1700000000, i * 10, len(fr), len(fr)))
            f.write(fr)


def write_pcapng(path, frames, tsresol=9):
    def block(btype, body):
        pad = (-len(body)) % 4
        total = 12 + len(body) + pad
        return struct.pack("<II", btype, total) + body + b"\0" * pad + struct.pack("<I", total)

    shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    opts = struct.pack("<HHB3x", 9, 1, tsresol) + struct.pack("<HH", 0, 0)
    idb = block(1, struct.pack("<HHI", 1, 0, 262144) + opts)
    out = [shb, idb]
    for i, fr in enumerate(frames):
        ts = 1700000000 * 10**tsresol + i * 1000
        out.append(block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(fr), len(fr)) + fr))
    Path(path).write_bytes(b"".join(out))


def test_pcap_ns_roundtrip(tmp_path):
    p = tmp_path / "a.pcap"
    with PcapWriter(str(p)) as w:
        for i, fr in enumerate(FRAMES):
            w.write(1_700_000_000_123_456_789 + i, fr)
    lt, recs = read_capture(str(p))
    assert lt == 1
    assert [r[1] for r in recs] == FRAMES
    assert recs[0][0] == 1_700_000_000_123_456_789
    assert recs[-1][0] == 1_700_000_000_123_456_789 + 29


@pytest.mark.parametrize("big_endian", [False, True])
def test_pcap_microseconds_both_byte_orders(tmp_path, big_endian):
    p = tmp_path / "us.pcap"
    write_pcap_us(p, FRAMES, big_endian)
    lt, recs = read_capture(str(p))
    assert len(recs) == 30 and recs[3][0] == 1700000000 * 10**9 + 30_000
    assert recs[5][1] == FRAMES[5]


@pytest.mark.parametrize("tsresol", [6, 9])
def test_pcapng_and_gzip(tmp_path, tsresol):
    p = tmp_path / "a.pcapng"
    write_pcapng(p, FRAMES, tsresol)
    lt, recs = read_capture(str(p))
    assert lt == 1 and [r[1] for r in recs] == FRAMES
    assert recs[1][0] - recs[0][0] == 1000 * 10 ** (9 - tsresol)
    gz = tmp_path / "a.pcapng.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    lt2, recs2 = read_capture(str(gz))
    assert recs2 == recs


def test_corrupt_and_truncated_inputs_raise_input_error(tmp_path):
    p = tmp_path / "a.pcap"
    with PcapWriter(str(p)) as w:
        for fr in FRAMES[:3]:
            w.write(0, fr)
    data = p.read_bytes()
    (tmp_path / "cut.pcap").write_bytes(data[:-10])
    with pytest.raises(InputError, match="record 3 at byte offset"):
        read_capture(str(tmp_path / "cut.pcap"))
    (tmp_path / "junk.pcap").write_bytes(b"hello world, not a capture")
    with pytest.raises(InputError, match="not a pcap or pcapng file"):
        read_capture(str(tmp_path / "junk.pcap"))
    (tmp_path / "empty.pcap").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_capture(str(tmp_path / "empty.pcap"))
    bad = bytearray(data)
    struct.pack_into("<I", bad, 24 + 8, 1 << 30)    # absurd caplen in record 1
    (tmp_path / "bad.pcap").write_bytes(bytes(bad))
    with pytest.raises(InputError, match="record 1 at byte offset 24 is corrupt"):
        read_capture(str(tmp_path / "bad.pcap"))


def test_writer_is_atomic_on_abort(tmp_path):
    dest = tmp_path / "out.pcap"
    dest.write_bytes(b"previous")
    w = PcapWriter(str(dest))
    w.write(0, FRAMES[0])
    w.abort()
    assert dest.read_bytes() == b"previous"
    assert [x.name for x in tmp_path.iterdir()] == ["out.pcap"]


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "grotool", *args], input=stdin, capture_output=True, cwd=ROOT)


def test_cli_replay_json_and_accounting(tmp_path):
    src = tmp_path / "in.pcap"
    with PcapWriter(str(src)) as w:
        for i, fr in enumerate(FRAMES):
            w.write(i * 1000, fr)
    out = tmp_path / "out.pcap"
    r = run_cli("replay", "--device", "veth", str(src), str(out), "--json", str(tmp_path / "s.json"), "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["schema"] == "grotool.stats/1"
    assert doc["totals"]["packets_in"] == 30
    assert doc["totals"]["packets_out"] == 1
    assert doc["totals"]["flush_reasons"] == {"budget_exhausted_all": 1}
    assert doc["settings"]["device"] == "veth" and doc["settings"]["budget"] == 64
    flow = doc["flows"][0]
    assert flow["flow"] == {"proto": "tcp", "src": "192.168.1.200", "dst": "192.168.1.100",
                            "sport": 1500, "dport": 8000, "vlan": []}
    assert flow["max_segs"] == 30 and flow["super_packets"] == 1
    _, recs = read_capture(str(out))
    assert len(recs) == 1
    assert recs[0][1][54:] == b"".join(fr[54:] for fr in FRAMES)   # payload bytes in == out
    assert recs[0][0] == 0                                           # first segment's timestamp


def test_cli_stdin_stdout(tmp_path):
    src = tmp_path / "in.pcap"
    with PcapWriter(str(src)) as w:
        for fr in FRAMES:
            w.write(0, fr)
    r = run_cli("replay", "--device", "veth", "-", "-", "-q", stdin=gzip.compress(src.read_bytes()))
    assert r.returncode == 0, r.stderr
    assert r.stdout[:4] == struct.pack("<I", 0xA1B23C4D)
    (tmp_path / "o.pcap").write_bytes(r.stdout)
    _, recs = read_capture(str(tmp_path / "o.pcap"))
    assert len(recs) == 1 and len(recs[0][1]) == 54 + 30000


@pytest.mark.parametrize("content,needle", [
    (None, "cannot open"),
    (b"garbage!", "not a pcap or pcapng file"),
])
def test_cli_bad_input_exit_3_one_line(tmp_path, content, needle):
    path = tmp_path / "in.pcap"
    if content is not None:
        path.write_bytes(content)
    r = run_cli("replay", str(path), str(tmp_path / "o.pcap"))
    assert r.returncode == 3
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr.decode()
    assert not (tmp_path / "o.pcap").exists()


def test_cli_usage_error_exit_2(tmp_path):
    r = run_cli("replay", "--budget", "0", "x.pcap")
    assert r.returncode == 2


def test_reasons_documented_exactly():
    doc = (ROOT / "docs" / "reasons.md").read_text()
    listed = {line.split("`")[1] for line in doc.splitlines() if line.startswith("| `")}
    assert listed == set(REASONS)


def test_json_doc_documents_every_field(tmp_path):
    src = tmp_path / "in.pcap"
    with PcapWriter(str(src)) as w:
        for fr in FRAMES:
            w.write(0, fr)
    doc = replay(str(src), None, Settings()).document
    text = (ROOT / "docs" / "json.md").read_text()
    for section in ("input", "totals"):
        for key in doc[section]:
            assert f"`{key}`" in text, key
    for key in doc["settings"]:
        assert f"`{key}`" in text, key
    for key in doc["flows"][0]:
        if key != "flow":
            assert f"`{key}`" in text, key


@pytest.mark.parametrize("linktype", [113, 276, 101, 228])
def test_cooked_and_raw_link_types_merge(tmp_path, linktype):
    """Linux SLL/SLL2 and raw IP captures: the link header (or none) is the L2
    identity, the rest is GRO as usual; the output keeps the input's link type."""
    def wrap(frame):
        ip = frame[14:]
        if linktype == 113:
            return struct.pack("!HHH8sH", 0, 1, 6, frame[6:12] + b"\0\0", 0x0800) + ip
        if linktype == 276:
            return struct.pack("!HHIHBB8s", 0x0800, 0, 2, 1, 0, 6, frame[6:12] + b"\0\0") + ip
        return ip

    src = tmp_path / "in.pcap"
    frames = [wrap(fr) for fr in FRAMES[:10]]
    with PcapWriter(str(src), linktype) as w:
        for fr in frames:
            w.write(0, fr)
    out = tmp_path / "out.pcap"
    result = replay(str(src), str(out), Settings(device="veth"))
    assert result.document["totals"]["packets_out"] == 1
    lt, recs = read_capture(str(out))
    assert lt == linktype and len(recs) == 1
    hdr = len(frames[0]) - 1040
    assert recs[0][1][hdr + 40:] == b"".join(f[hdr + 40:] for f in frames)
    assert struct.unpack_from("!H", recs[0][1], hdr + 2)[0] == 40 + 10000


def test_timestamp_outside_pcap_range_is_an_input_error(tmp_path):
    p = tmp_path / "far.pcapng"
    write_pcapng(p, FRAMES[:2])
    data = bytearray(p.read_bytes())
    # the first EPB's timestamp: 4,420,000,000 s (2110), beyond what pcap's 32-bit
    # seconds hold (2106) though within the engine's clock (up to 2116)
    epb = data.index(struct.pack("<I", 6))
    ts = 4_420_000_000 * 10 ** 9                     # write_pcapng gives nanosecond resolution
    struct.pack_into("<II", data, epb + 12, ts >> 32, ts & 0xFFFFFFFF)
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match="cannot be stored in a pcap file"):
        replay(str(p), str(tmp_path / "o.pcap"), Settings())
    assert not (tmp_path / "o.pcap").exists()
