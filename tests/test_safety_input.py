"""Damaged and unusual captures (issue 7, bugs 3, 4, 5, 6, the MTU warning and
unknown link types): read what can be read, bound what a record may claim."""

import glob
import gzip
import json
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from grotool.engine import Engine, Settings
from grotool.engine import csum
from grotool.errors import InputError
from grotool.io.capture import CaptureReader, read_capture
from grotool.replay import replay

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus" / "tcpdump"


def tcp4_frame(seq, n, ipid=0, flags=0x10, sport=1500, src=(192, 168, 1, 200)):
    payload = bytes((seq + i) & 0xFF for i in range(n))
    tcp = struct.pack("!HHIIBBHHH", sport, 8000, seq, 100, 5 << 4, flags, 65535, 0, 0)
    src, dst = bytes(src), bytes([192, 168, 1, 100])
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + n, ipid, 0x4000, 64, 6, 0, src, dst))
    ip[10:12] = struct.pack("!H", csum.complement(csum.sum16(bytes(ip))))
    seg = bytearray(tcp + payload)
    seg[16:18] = struct.pack("!H", csum.complement(csum.pseudo4(src, dst, 6, len(seg)) + csum.sum16(bytes(seg))))
    return b"\xaa\x00\x00\x00\x00\x02\xaa\x00\x00\x00\x00\x01\x08\x00" + bytes(ip) + bytes(seg)


FRAMES = [tcp4_frame(100 + i * 1000, 1000, ipid=i) for i in range(10)]


def pcap_bytes(frames, linktype=1, snaplen=65535, trailers=None):
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)]
    for i, fr in enumerate(frames):
        fr = fr + (trailers[i] if trailers else b"")
        out.append(struct.pack("<IIII", 1700000000, i * 10, len(fr), len(fr)) + fr)
    return b"".join(out)


def pcapng_block(btype, body):
    pad = (-len(body)) % 4
    total = 12 + len(body) + pad
    return struct.pack("<II", btype, total) + body + b"\0" * pad + struct.pack("<I", total)


def pcapng_bytes(packets, interfaces=(("eth0", 1),), fcslen=None):
    """packets: (interface id, frame); names and link types per interface."""
    out = [pcapng_block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    for name, lt in interfaces:
        raw = name.encode()
        opts = struct.pack("<HH", 2, len(raw)) + raw + b"\0" * ((-len(raw)) % 4)
        opts += struct.pack("<HHB3x", 9, 1, 9)
        if fcslen is not None:
            opts += struct.pack("<HHB3x", 13, 1, fcslen)      # if_fcslen
        opts += struct.pack("<HH", 0, 0)
        out.append(pcapng_block(1, struct.pack("<HHI", lt, 0, 262144) + opts))
    for i, (ifid, fr) in enumerate(packets):
        ts = 1700000000 * 10**9 + i * 1000
        out.append(pcapng_block(6, struct.pack("<IIIII", ifid, ts >> 32, ts & 0xFFFFFFFF, len(fr), len(fr)) + fr))
    return b"".join(out)


def run_cli(*args, stdin=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "grotool", *args], input=stdin, capture_output=True, cwd=ROOT,
                          timeout=timeout)


# -- bug 3: a truncated last record ----------------------------------------------------
def test_truncated_last_record_processes_the_rest_and_exits_6(tmp_path):
    data = pcap_bytes(FRAMES)
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-300])                 # record 10 loses its last 300 bytes
    out = tmp_path / "out.pcap"
    r = run_cli("replay", "-q", "--device", "veth", str(cut), str(out), "--json", str(tmp_path / "s.json"))
    assert r.returncode == 6, r.stderr
    offset = 24 + 9 * (16 + len(FRAMES[0]))
    assert r.stderr.decode().strip().splitlines() == [
        f"grotool: warning: {cut}: record 10 at byte offset {offset} cut short (caplen 1054, the file ends "
        f"after 754 bytes); the 9 complete records before it were processed (exit 6)"]
    _, recs = read_capture(str(out))
    assert [len(d) for _, d, _ in recs] == [14 + 40 + 9 * 1000]          # the 9 complete frames, merged
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["input"]["truncated"] == {"record": 10, "offset": offset,
                                         "detail": "caplen 1054, the file ends after 754 bytes"}
    assert doc["totals"]["packets_in"] == 9


@pytest.mark.parametrize("keep", [5, 24 + 16 + 1054 + 7])   # inside the file header; inside record 2's header
def test_cut_inside_a_header(tmp_path, keep):
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(pcap_bytes(FRAMES)[:keep])
    r = run_cli("replay", "-q", str(cut))
    if keep < 24:
        assert r.returncode == 3 and "pcap file header cut short" in r.stderr.decode()
    else:
        assert r.returncode == 6
        assert "record 2 at byte offset 1094 cut short (record header: 7 of 16 bytes)" in r.stderr.decode()


def test_truncated_gzip_stream_and_pcapng(tmp_path):
    """Size unknown (gzip on stdin) and pcapng: the same rule."""
    data = pcap_bytes(FRAMES)[:-10]
    r = run_cli("replay", "-q", "--device", "veth", "-", "-", stdin=gzip.compress(data))
    assert r.returncode == 6
    assert "record 10 at byte offset 9654 cut short (caplen 1054, the file ends after 1044 bytes)" in r.stderr.decode()
    (tmp_path / "o.pcap").write_bytes(r.stdout)
    assert len(read_capture(str(tmp_path / "o.pcap"))[1]) == 1
    ng = pcapng_bytes([(0, fr) for fr in FRAMES])
    (tmp_path / "cut.pcapng").write_bytes(ng[:-20])
    r = run_cli("replay", "-q", "--device", "veth", str(tmp_path / "cut.pcapng"), "--json", "-")
    assert r.returncode == 6, r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"]["packets_in"] == 9 and doc["input"]["truncated"]["record"] == 10


def test_strict_readers_still_refuse_a_truncated_file(tmp_path):
    (tmp_path / "cut.pcap").write_bytes(pcap_bytes(FRAMES)[:-300])
    with pytest.raises(InputError, match="record 10 at byte offset 9654 cut short"):
        read_capture(str(tmp_path / "cut.pcap"))


# -- bug 4: a corrupt record length cannot exhaust memory ------------------------------
def crafted_45k(caplen_claim):
    """A 45 KB capture with snaplen 0xFFFFFFFF whose 30th record claims caplen_claim."""
    frames = [tcp4_frame(100 + i * 1400, 1400, ipid=i) for i in range(30)]
    data = bytearray(pcap_bytes(frames, snaplen=0xFFFFFFFF))
    at = 24 + 29 * (16 + len(frames[0]))
    struct.pack_into("<I", data, at + 8, caplen_claim)
    return bytes(data), at


@pytest.mark.parametrize("claim,stdin", [(0xFFFFFF00, False), (0xFFFFFF00, True),
                                         (200 << 20, False), (200 << 20, True)])
def test_huge_caplen_is_bounded_and_named(tmp_path, claim, stdin):
    data, at = crafted_45k(claim)
    assert 44_000 < len(data) < 46_000
    path = tmp_path / "crafted.pcap"
    path.write_bytes(gzip.compress(data) if stdin else data)   # gzip: the file's size cannot tell
    tracemalloc.start()
    try:
        if claim > 256 << 20:
            with pytest.raises(InputError) as info:
                replay(str(path), None, Settings())
            assert str(info.value) == (f"{path}: record 30 at byte offset {at} is corrupt (caplen {claim}, "
                                       f"more than the {256 << 20} bytes a record of this file may hold)")
        else:
            result = replay(str(path), None, Settings())
            assert result.truncation["record"] == 30 and result.truncation["offset"] == at
            assert result.frames == 29
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak          # the claim was never allocated


def test_huge_caplen_cli_is_fast_and_small(tmp_path):
    data, at = crafted_45k(0xFFFFFF00)
    (tmp_path / "c.pcap").write_bytes(data)
    started = time.monotonic()
    r = subprocess.run([sys.executable, "-c",
                        "import resource, subprocess, sys; "
                        "p = subprocess.run([sys.executable, '-m', 'grotool', 'replay', '-q', sys.argv[1]]); "
                        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
                        str(tmp_path / "c.pcap")], capture_output=True, cwd=ROOT, timeout=60)
    rc, maxrss_kib = map(int, r.stdout.split())
    assert rc == 3
    assert b"record 30 at byte offset" in r.stderr and b"is corrupt" in r.stderr
    assert maxrss_kib < 200 * 1024                                    # well below the 4.2 GB of the report
    assert time.monotonic() - started < 30


def test_record_beyond_snaplen_slack_is_corrupt(tmp_path):
    data = bytearray(pcap_bytes(FRAMES, snaplen=1600))
    struct.pack_into("<I", data, 24 + 8, 1600 + (1 << 20) + 1)
    (tmp_path / "b.pcap").write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"record 1 at byte offset 24 is corrupt \(caplen 1050177, more than "
                                         r"the 1048576 bytes"):
        read_capture(str(tmp_path / "b.pcap"))


# -- bug 6: FCS announced in the link-type field -----------------------------------------
def test_fcs_announced_in_linktype_field_is_stripped(tmp_path):
    fcs = [struct.pack("<I", 0xDEADBEEF)] * len(FRAMES)
    path = tmp_path / "fcs.pcap"
    path.write_bytes(pcap_bytes(FRAMES, linktype=0x24000001, trailers=fcs))   # F bit, 2 words of FCS
    out = tmp_path / "out.pcap"
    result = replay(str(path), str(out), Settings(device="veth"))
    assert result.document["input"]["linktype"] == 1
    lt, recs = read_capture(str(out))
    assert lt == 1
    assert [len(d) for _, d, _ in recs] == [14 + 40 + 10 * 1000]
    assert recs[0][1][54:] == b"".join(fr[54:] for fr in FRAMES)       # no FCS bytes inside


def test_fcs_announced_by_pcapng_interface_is_stripped(tmp_path):
    path = tmp_path / "fcs.pcapng"
    path.write_bytes(pcapng_bytes([(0, fr + b"\xde\xad\xbe\xef") for fr in FRAMES], fcslen=4))
    out = tmp_path / "out.pcap"
    replay(str(path), str(out), Settings(device="veth"))
    _, recs = read_capture(str(out))
    assert [len(d) for _, d, _ in recs] == [14 + 40 + 10 * 1000]


# -- bug 5: pcapng interfaces are separate devices -------------------------------------
def test_pcapng_interfaces_never_merge(tmp_path):
    # one contiguous flow whose second half was captured on another interface,
    # as `mergecap -I none` of two captures leaves it: one device would merge all 10
    packets = [(i // 5, fr) for i, fr in enumerate(FRAMES)]
    path = tmp_path / "two.pcapng"
    path.write_bytes(pcapng_bytes(packets, interfaces=(("eth0", 1), ("eth1", 1))))
    out = tmp_path / "out.pcap"
    plog = tmp_path / "p.jsonl"
    result = replay(str(path), str(out), Settings(device="veth"), str(plog))
    entries = [json.loads(line) for line in plog.read_text().splitlines()]
    for e in entries:
        assert len({i // 5 for i in e["covers"]}) == 1, e           # never frames of both interfaces
    assert sorted(e["covers"] for e in entries) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert sorted(e.get("interface", 0) for e in entries) == [0, 1]
    doc = result.document
    assert doc["input"]["interfaces"] == [{"id": 0, "name": "eth0", "linktype": 1},
                                          {"id": 1, "name": "eth1", "linktype": 1}]
    assert sorted((f["interface"], f["packets_in"], f["super_packets"]) for f in doc["flows"]) == \
        [(0, 5, 1), (1, 5, 1)]
    r = run_cli("replay", "--device", "veth", str(path))
    assert r.returncode == 0
    text = r.stdout.decode()
    assert "eth0: tcp 192.168.1.200:1500 > 192.168.1.100:8000" in text
    assert "eth1: tcp 192.168.1.200:1500 > 192.168.1.100:8000" in text


def test_nic_devices_share_one_clock():
    """Frames on interface 1 long after interface 0's: interface 0's interrupt
    runs first, so its delivery comes out first."""
    engine = Engine(1, Settings(device="nic"))
    out = []
    out += engine.feed(1_000, FRAMES[0], -1, 0)
    out += engine.feed(5_000_000, FRAMES[1], -1, 1)
    out += engine.finish()
    assert [(d.interface, d.indices) for d in out] == [(0, (0,)), (1, (1,))]


# -- unknown link types: passed through ------------------------------------------------
def test_unknown_link_type_passes_through(tmp_path):
    frames = [bytes([0, 0, 8, 0]) + bytes(range(i, i + 40)) for i in range(5)]    # radiotap-ish
    path = tmp_path / "wifi.pcap"
    path.write_bytes(pcap_bytes(frames, linktype=127))
    out = tmp_path / "out.pcap"
    result = replay(str(path), str(out), Settings())
    with CaptureReader(str(out), any_linktype=True) as reader:
        recs = list(reader)
        assert reader.linktype == 127
    assert [d for _, d, _ in recs] == frames
    doc = result.document
    assert doc["totals"]["flush_reasons"] == {"unknown_link_type": 5}
    assert [(f["flow"]["proto"], f["packets_in"]) for f in doc["flows"]] == [("linktype-127", 5)]


def test_mixed_link_types_refused_only_for_a_pcap_output(tmp_path):
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(pcapng_bytes([(0, FRAMES[0]), (1, b"\x00" * 30)], interfaces=(("eth0", 1), ("wlan0", 127))))
    result = replay(str(path), None, Settings())
    assert result.document["totals"]["flush_reasons"] == {"napi_complete": 1, "unknown_link_type": 1}
    r = run_cli("replay", "-q", str(path), str(tmp_path / "o.pcap"))
    assert r.returncode == 3
    assert "interface 1 has link type 127, interface 0 has 1" in r.stderr.decode()
    assert not (tmp_path / "o.pcap").exists() and [p.name for p in tmp_path.iterdir()] == ["mixed.pcapng"]


HOSTS = [("nic", {}), ("veth", {}),
         ("veth", {"udp_gro_forwarding": True, "rx_gro_list": True, "udp_gro_sockets": (53, 443),
                   "vxlan_ports": (4789,), "geneve_ports": (6081,), "layout": "mlx5-copy256", "csum": "verify"})]


@pytest.mark.skipif(not CORPUS.is_dir(), reason="tcpdump corpus not present next to the checkout")
def test_tcpdump_corpus_no_traceback_no_hang():
    """Every capture of tcpdump's test corpus replays (unknown link types passed
    through) or is refused with a one-line InputError; each file gets 20 s, the
    whole corpus 300 s.  Three hosts: the nic and veth devices, and veth with
    every host option on (UDP GRO, fraglist, VXLAN/GENEVE devices) and another
    skb layout, so the UDP, tunnel and fraglist paths see damaged input too."""
    import signal

    paths = [p for p in sorted(glob.glob(str(CORPUS / "*"))) if not p.endswith("LICENSE")]
    assert len(paths) >= 700

    class Hang(BaseException):
        pass

    def alarm(_signum, _frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    replayed, refused, passed_through = 0, {}, 0
    started = time.monotonic()
    try:
        for path in paths:
            for device, host in HOSTS:
                signal.alarm(20)
                try:
                    result = replay(path, None, Settings(device=device, **host))
                except InputError as exc:
                    refused[Path(path).name] = str(exc)
                    continue
                except Hang:
                    pytest.fail(f"{path}: no result within 20 s (--device {device})")
                finally:
                    signal.alarm(0)
                assert result.collector.packets_in == result.frames
                replayed += 1
                passed_through += result.document["totals"]["flush_reasons"].get("unknown_link_type", 0)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - started < 300
    assert replayed == len(HOSTS) * (len(paths) - len(refused))
    assert passed_through > 1000
    # issue 32: what tcpdump reads is read; the four captures with a timestamp fraction not below
    # one second, once refused whole, replay with the previous record's timestamp
    assert refused == {}


# -- captures taken in the wrong place -------------------------------------------------
def test_frames_longer_than_the_mtu_warn_once_and_count(tmp_path):
    """TSO super-packets of a sending host: each of its own length (9000, 18000 and 27000 bytes of payload)."""
    big = [tcp4_frame(100 + i * 9000, 9000 * (i + 1), ipid=i) for i in range(3)]
    path = tmp_path / "host.pcap"
    path.write_bytes(pcap_bytes(FRAMES[:2] + big))
    r = run_cli("replay", "-q", str(path), "--json", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.decode().strip().splitlines()
    assert lines == ["grotool: warning: 3 frames longer than the link MTU this capture implies 1500 (first: record 3, "
                     "9054 bytes): captured on a host with TSO/GRO, not what a NIC receives; `grotool split --mtu "
                     "1500` re-segments such a capture"]
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["input"]["frames_over_mtu"] == 3 and doc["input"]["mtu"] == 1500
    assert doc["input"]["mtu_from"] == "capture"
    r = run_cli("replay", "-q", "--mtu", "18040", str(path))      # 18054 bytes - 14 of Ethernet header
    assert r.returncode == 0
    assert r.stderr.decode().strip().splitlines() == [
        "grotool: warning: 1 frames longer than the link MTU 18040 (first: record 5, 27054 bytes): captured on a "
        "host with TSO/GRO, not what a NIC receives; `grotool split --mtu 18040` re-segments such a capture"]
    r = run_cli("replay", "-q", "--mtu", "27040", str(path))
    assert r.returncode == 0 and r.stderr == b""


def test_mtu_counts_the_packet_not_the_vlan_tags():
    from grotool.replay import _l3_length

    frame = FRAMES[0]
    tagged = frame[:12] + b"\x81\x00\x00\x05" + b"\x88\xa8\x00\x06" + frame[12:]
    assert _l3_length(1, frame, len(frame)) == 1040
    assert _l3_length(1, tagged, len(tagged)) == 1040
    assert _l3_length(113, b"\x00" * 16, 1516) == 1500
    assert _l3_length(101, b"\x45", 1500) == 1500


def test_stdin_that_starts_inside_a_file_is_not_taken_as_truncated(tmp_path):
    """The remaining-size bound counts from where standard input starts."""
    import os

    path = tmp_path / "prefixed.bin"
    path.write_bytes(b"xxxxx" + pcap_bytes(FRAMES))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.lseek(fd, 5, os.SEEK_SET)
        r = subprocess.run([sys.executable, "-m", "grotool", "replay", "-q", "--device", "veth", "-", "--json", "-"],
                           stdin=fd, capture_output=True, cwd=ROOT, timeout=60)
    finally:
        os.close(fd)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["packets_in"] == 10


@pytest.mark.parametrize("compressed", [False, True])
def test_pcapng_block_claiming_60_mib_is_never_allocated(tmp_path, compressed):
    ng = bytearray(pcapng_bytes([(0, fr) for fr in FRAMES]))
    last = len(ng) - (12 + 20 + len(FRAMES[0]) + 2)          # the last packet block (2 bytes of padding)
    struct.pack_into("<I", ng, last + 4, 60 << 20)
    path = tmp_path / "claim.pcapng"
    path.write_bytes(gzip.compress(bytes(ng)) if compressed else bytes(ng))
    tracemalloc.start()
    try:
        result = replay(str(path), None, Settings(device="veth"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.frames == 9
    assert result.truncation["record"] == 10 and result.truncation["offset"] == last
    assert peak < 8 << 20, peak


# -- issue 32: a truncated gzip capture reads as far as a truncated plain one ---------------
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("cut", ["inside a record", "before the trailer"])
def test_truncated_gzip_file_processes_its_complete_records_and_exits_6(tmp_path, fmt, cut):
    import zlib

    frames = [tcp4_frame(100 + i * 1000, 1000, ipid=i) for i in range(300)]
    plain = pcap_bytes(frames) if fmt == "pcap" else pcapng_bytes([(0, fr) for fr in frames])
    packed = gzip.compress(plain)
    if cut == "before the trailer":
        kept = packed[:-6]                      # the CRC and size trailer lost: every record is there
        complete = 300
    else:
        kept = packed[:len(packed) // 2]
        available = len(zlib.decompressobj(31).decompress(kept))  # the bytes decompressed before the cut
        header = 24 if fmt == "pcap" else len(pcapng_bytes([]))
        record = (len(plain) - header) // 300                       # every record is as long
        complete = (available - header) // record
    path = tmp_path / f"cut.{fmt}.gz"
    path.write_bytes(kept)
    r = run_cli("replay", "-q", "--device", "veth", str(path), "--json", "-")
    assert r.returncode == 6, r.stderr
    doc = json.loads(r.stdout)
    assert doc["totals"]["packets_in"] == complete and 0 < complete <= 300
    assert doc["input"]["truncated"]["record"] == complete + 1
    stderr = r.stderr.decode()
    assert "near byte offset 0" not in stderr and "cut short" in stderr and len(stderr.splitlines()) == 1
    if cut == "before the trailer":
        assert doc["input"]["truncated"]["detail"] == "the gzip stream ends without its end marker"


def test_gzip_members_concatenated_and_zero_padding_are_read_whole(tmp_path):
    data = pcap_bytes(FRAMES)
    path = tmp_path / "two.pcap.gz"
    path.write_bytes(gzip.compress(data[:500]) + gzip.compress(data[500:]) + b"\0" * 512)
    linktype, records = read_capture(str(path))
    assert [d for _, d, _ in records] == FRAMES


def test_corrupt_gzip_data_is_one_line_exit_3(tmp_path):
    packed = bytearray(gzip.compress(pcap_bytes(FRAMES * 20)))
    packed[200:260] = b"\xff" * 60
    path = tmp_path / "bad.pcap.gz"
    path.write_bytes(bytes(packed))
    r = run_cli("replay", "-q", str(path))
    assert r.returncode == 3 and len(r.stderr.decode().splitlines()) == 1 and b"Traceback" not in r.stderr


# -- issue 32: an invalid timestamp does not refuse a capture tcpdump reads -----------------
def pcap_with_fractions(fractions, nanosecond=False):
    magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
    out = [struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 65535, 1)]
    for fr, fraction in zip(FRAMES, fractions):
        out.append(struct.pack("<IIII", 1700000000, fraction, len(fr), len(fr)) + fr)
    return b"".join(out)


@pytest.mark.parametrize("nanosecond", [False, True])
def test_invalid_timestamp_fraction_takes_the_previous_records_timestamp(tmp_path, nanosecond):
    unit = 1 if nanosecond else 1000
    limit = 10**9 // unit
    fractions = [10, 20, limit, 30, 2**31, 40]
    path = tmp_path / "t.pcap"
    path.write_bytes(pcap_with_fractions(fractions, nanosecond))
    with CaptureReader(str(path)) as reader:
        stamps = [ts for ts, _, _ in reader]
        assert reader.invalid_timestamps == 2
        assert reader.first_invalid_timestamp == {
            "record": 3, "offset": 24 + 2 * (16 + 1054),
            "detail": f"timestamp fraction {limit} is not below one second"}
    base = 1700000000 * 10**9
    assert stamps == [base + 10 * unit, base + 20 * unit, base + 20 * unit, base + 30 * unit, base + 30 * unit,
                      base + 40 * unit]
    r = run_cli("replay", "-q", str(path), "--json", "-")
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().splitlines() == [
        f"grotool: warning: {path}: 2 records with an invalid timestamp (first: record 3 at byte offset 2164, "
        f"timestamp fraction {limit} is not below one second) read with the previous record's timestamp"]
    doc = json.loads(r.stdout)
    assert doc["totals"]["packets_in"] == 6 and doc["input"]["invalid_timestamps"] == 2


def test_invalid_first_timestamp_takes_its_whole_seconds(tmp_path):
    path = tmp_path / "t.pcap"
    path.write_bytes(pcap_with_fractions([2**31, 5]))
    with CaptureReader(str(path)) as reader:
        assert [ts for ts, _, _ in reader] == [1700000000 * 10**9, 1700000000 * 10**9 + 5000]


def test_pcapng_timestamp_out_of_range_takes_the_previous_one(tmp_path):
    good = pcapng_bytes([(0, FRAMES[0])])
    ts_bad = 2**63                                       # ns: beyond 2116
    bad_block = pcapng_block(6, struct.pack("<IIIII", 0, ts_bad >> 32, ts_bad & 0xFFFFFFFF, len(FRAMES[1]),
                                            len(FRAMES[1])) + FRAMES[1])
    path = tmp_path / "t.pcapng"
    path.write_bytes(good + bad_block)
    with CaptureReader(str(path)) as reader:
        stamps = [ts for ts, _, _ in reader]
        assert reader.invalid_timestamps == 1 and reader.first_invalid_timestamp["record"] == 2
    assert stamps == [1700000000 * 10**9, 1700000000 * 10**9]
    r = run_cli("replay", "-q", str(path))
    assert r.returncode == 0 and "1 record with an invalid timestamp (first: record 2" in r.stderr.decode()


def test_split_reads_an_invalid_timestamp_and_says_so(tmp_path):
    path = tmp_path / "t.pcap"
    path.write_bytes(pcap_with_fractions([10, 2**31, 30]))
    r = run_cli("split", "-q", str(path), str(tmp_path / "out.pcap"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().splitlines() == [
        f"grotool: warning: {path}: 1 record with an invalid timestamp (first: record 2 at byte offset 1094, "
        "timestamp fraction 2147483648 is not below one second) read with the previous record's timestamp"]
    base = 1700000000 * 10**9
    assert [ts for ts, _, _ in read_capture(str(tmp_path / "out.pcap"))[1]] == [base + 10_000, base + 10_000,
                                                                                base + 30_000]
