"""Captures taken with `tcpdump -i any` (Linux cooked SLL/SLL2), their
direction (outgoing packets of the capturing host), and BSD loopback
captures (NULL/LOOP): see docs/captures.md."""

import os
import struct
from pathlib import Path

import pytest

from grotool.engine import Engine, Settings
from grotool.io.capture import PcapWriter, read_capture
from grotool.replay import replay

from framebuild import tcp_frame
from test_io_cli import FRAMES

SRC_MAC = FRAMES[0][6:12]


def sll(frame, pkttype=0, tail=b"\0\0", addr=None, halen=6):
    """An SLL (113) record of an Ethernet frame: source address, then the two
    address-field bytes after it (``tail``; uninitialised on Linux)."""
    return struct.pack("!HHH8sH", pkttype, 1, halen, (addr or frame[6:12]) + tail, 0x0800) + frame[14:]


def sll2(frame, pkttype=0, tail=b"\0\0", ifindex=2, addr=None, halen=6):
    return struct.pack("!HHIHBB8s", 0x0800, 0, ifindex, 1, pkttype, halen, (addr or frame[6:12]) + tail) + frame[14:]


COOKED = {113: sll, 276: sll2}


def write(path, linktype, frames):
    with PcapWriter(str(path), linktype) as w:
        for i, fr in enumerate(frames):
            w.write(1_700_000_000_000_000_000 + i * 1000, fr)
    return str(path)


def deliveries(linktype, frames, **settings):
    engine = Engine(linktype, Settings(device="veth", **settings))
    out = []
    for i, fr in enumerate(frames):
        out += engine.feed(1_700_000_000_000_000_000 + i * 1000, fr)
    return out + engine.finish()


# -----------------------------------------------------------------------------
# 1. the cooked header's identity: source address (halen bytes) and protocol
# -----------------------------------------------------------------------------
@pytest.mark.parametrize("linktype", [113, 276])
def test_cooked_bytes_outside_the_address_do_not_split_a_flow(linktype):
    """The two bytes after a 6-byte address differ from packet to packet on
    Linux: ten in-order segments are still one super-packet."""
    frames = [COOKED[linktype](fr, tail=struct.pack("!H", 0x1111 * (i + 1))) for i, fr in enumerate(FRAMES[:10])]
    out = deliveries(linktype, frames)
    assert [d.segs for d in out] == [10]
    assert out[0].data[:len(frames[0]) - 1040] == frames[0][:len(frames[0]) - 1040]


@pytest.mark.parametrize("linktype", [113, 276])
def test_cooked_packet_type_is_not_identity_but_the_source_address_is(linktype):
    """PACKET_HOST and PACKET_OTHERHOST (3) segments of one flow merge (one
    destination is assumed); another source address is another flow: segment
    3 is held alone and segment 4 no longer continues segments 0-2."""
    wrap = COOKED[linktype]
    frames = [wrap(fr, pkttype=3 if i % 2 else 0) for i, fr in enumerate(FRAMES[:6])]
    assert [d.segs for d in deliveries(linktype, frames)] == [6]
    other = b"\x02\x00\x00\x00\x00\x99"
    frames = [wrap(fr, addr=other if i == 3 else None) for i, fr in enumerate(FRAMES[:6])]
    assert sorted(d.segs for d in deliveries(linktype, frames)) == [1, 2, 3]


def test_cooked_address_length_bounds_the_identity():
    """halen 4 (an IP tunnel device): bytes 5-8 of the field are no address."""
    frames = [sll(fr, addr=b"\x0a\x00\x00\x01" + bytes([i, i]), halen=4) for i, fr in enumerate(FRAMES[:5])]
    assert [d.segs for d in deliveries(113, frames)] == [5]


def test_sll2_interfaces_are_separate_devices():
    frames = [sll2(fr, ifindex=2 if i < 3 else 7) for i, fr in enumerate(FRAMES[:6])]
    assert [d.segs for d in deliveries(276, frames)] == [3, 3]


# -----------------------------------------------------------------------------
# 2. direction: what the capturing host sent passes outside the receive path
# -----------------------------------------------------------------------------
ACK = bytes.fromhex("aa0000000001aa000000000208004500002800004000400600000a0000020a000001"
                    "1f4005dc0000006400000064501000ff00000000")


def outgoing_ack(i):
    """An ACK the receiving host sent, of the reverse flow (its own Ethernet frame)."""
    return ACK[:38] + struct.pack("!I", 100 + i * 1000) + ACK[42:]


def interleaved(wrap, n=20):
    """n data segments received, each followed by the host's own ACK (packet type 4)."""
    out = []
    for i, fr in enumerate(FRAMES[:n]):
        out.append(wrap(fr))
        out.append(wrap(outgoing_ack(i), pkttype=4))
    return out


@pytest.mark.parametrize("linktype", [113, 276])
def test_outgoing_packets_pass_outside_gro(tmp_path, linktype):
    """With budget 8, the ACKs took half of every poll: received segments
    went up in 4s.  Outgoing, they pass unchanged (reason outgoing) and the
    20 received segments form polls of 8: 8 + 8 + 4."""
    frames = interleaved(COOKED[linktype])
    src = write(tmp_path / "in.pcap", linktype, frames)
    out = tmp_path / "out.pcap"
    result = replay(src, str(out), Settings(device="veth", budget=8))
    totals = result.document["totals"]
    assert totals["super_packets"] == 3 and totals["flush_reasons"]["outgoing"] == 20
    assert totals["outgoing"] == 20 and totals["packets_in"] == 40
    _, recs = read_capture(str(out))
    acks = [r[1] for r in recs if len(r[1]) < 100]
    assert acks == frames[1::2]                                    # unchanged, in order
    supers = sorted(len(r[1]) for r in recs if len(r[1]) >= 100)
    hdr = len(frames[0]) - 1000
    assert supers == [hdr + 4000, hdr + 8000, hdr + 8000]
    # taken as received, they share the polls again
    received = replay(src, None, Settings(device="veth", budget=8, outgoing="receive")).document["totals"]
    assert received["super_packets"] == 5 and "outgoing" not in received["flush_reasons"]
    assert received["outgoing"] == 0


def test_outgoing_option_on_the_command_line(tmp_path):
    from click.testing import CliRunner
    from grotool.cli import main
    import json

    src = write(tmp_path / "in.pcap", 113, interleaved(sll))
    for mode, outgoing in (("pass", 20), ("receive", 0)):
        res = CliRunner().invoke(main, ["replay", "-q", "--device", "veth", "--budget", "8", "--outgoing", mode,
                                        src, "--json", str(tmp_path / f"{mode}.json")])
        assert res.exit_code == 0, res.output
        doc = json.loads((tmp_path / f"{mode}.json").read_text())
        assert doc["settings"]["outgoing"] == mode
        assert doc["totals"]["flush_reasons"].get("outgoing", 0) == outgoing
    res = CliRunner().invoke(main, ["replay", "--outgoing", "drop", src])
    assert res.exit_code == 2


def write_pcapng_directed(path, linktype, frames_and_flags):
    """pcapng with an epb_flags option (direction bits) on each packet that has one."""
    def block(btype, body):
        total = 12 + len(body)
        return struct.pack("<II", btype, total) + body + struct.pack("<I", total)

    def padded(b):
        return b + b"\0" * ((-len(b)) % 4)

    out = [block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)),
           block(1, struct.pack("<HHI", linktype, 0, 262144) + struct.pack("<HHB3x", 9, 1, 9) + struct.pack("<HH", 0, 0))]
    for i, (fr, flags) in enumerate(frames_and_flags):
        ts = 1_700_000_000 * 10 ** 9 + i * 1000
        body = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(fr), len(fr)) + padded(fr)
        if flags is not None:
            body += struct.pack("<HHI", 2, 4, flags) + struct.pack("<HH", 0, 0)
        out.append(block(6, body))
    Path(path).write_bytes(b"".join(out))
    return str(path)


def test_pcapng_outbound_packets_pass_outside_gro(tmp_path):
    """Ethernet pcapng with epb_flags: inbound (1) segments, outbound (2) ACKs;
    an unknown direction (0) or no flags is received.  Bits above the
    direction (reception type, FCS length) do not change it."""
    items = []
    for i, fr in enumerate(FRAMES[:20]):
        items.append((fr, 0x1 if i % 3 else (None if i % 2 else 0)))
        items.append((outgoing_ack(i), 0x2 | 0x4 << 2))      # outbound, unicast
    src = write_pcapng_directed(tmp_path / "in.pcapng", 1, items)
    from grotool.io.capture import CaptureReader

    with CaptureReader(src) as reader:
        records = reader.records_with_interface()
        directions = []
        while records.next_data() is not None:
            directions.append(records.outbound)
    assert directions == [False, True] * 20
    result = replay(src, None, Settings(device="veth", budget=8))
    totals = result.document["totals"]
    assert totals["flush_reasons"]["outgoing"] == 20 and totals["super_packets"] == 3
    received = replay(src, None, Settings(device="veth", budget=8, outgoing="receive")).document["totals"]
    assert received["super_packets"] == 5


# -----------------------------------------------------------------------------
# 4. BSD loopback (NULL 0, LOOP 108): a 4-byte address family, then IP
# -----------------------------------------------------------------------------
LOOPBACK_HEADERS = [(0, b"\x02\0\0\0"), (0, b"\0\0\0\x02"), (108, b"\0\0\0\x02")]


@pytest.mark.parametrize("linktype,header", LOOPBACK_HEADERS)
def test_bsd_loopback_captures_merge_and_keep_their_link_type(tmp_path, linktype, header):
    frames = [header + fr[14:] for fr in FRAMES[:10]]
    src = write(tmp_path / "in.pcap", linktype, frames)
    out = tmp_path / "out.pcap"
    result = replay(src, str(out), Settings(device="veth"), verify=True)
    assert result.document["totals"]["super_packets"] == 1 and result.verify.ok
    lt, recs = read_capture(str(out))
    assert lt == linktype and len(recs) == 1
    data = recs[0][1]
    assert data[:4] == header and struct.unpack_from("!H", data, 4 + 2)[0] == 40 + 10000
    assert data[44:] == b"".join(f[44:] for f in frames)
    flow = result.document["flows"][0]["flow"]
    assert (flow["src"], flow["dst"], flow["sport"], flow["dport"]) == ("192.168.1.200", "192.168.1.100", 1500, 8000)


@pytest.mark.parametrize("header", [b"\x1e\0\0\0", b"\0\0\0\x1c", b"\x18\0\0\0"])
def test_bsd_loopback_ipv6_merges(header):
    """AF_INET6 as macOS (30), FreeBSD (28, here big-endian) and the other BSDs (24) write it."""
    frames = [header + tcp_frame(1000, family=6, seq=100 + i * 1000, link="raw") for i in range(6)]
    out = deliveries(0, frames)
    assert [d.segs for d in out] == [6] and out[0].data[:4] == header
    assert struct.unpack_from("!H", out[0].data, 4 + 4)[0] == 20 + 6000       # IPv6 payload length


def test_bsd_loopback_family_that_is_not_ip_goes_up_alone():
    """LOOP is big-endian: 02 00 00 00 is no family GRO has a handler for."""
    frames = [b"\x02\0\0\0" + fr[14:] for fr in FRAMES[:3]]
    out = deliveries(108, frames)
    assert [(d.segs, d.reason) for d in out] == [(1, "no_l2_handler")] * 3
    assert [d.data for d in out] == frames


def test_real_null_captures_from_the_corpus():
    """Real NULL captures (little-endian family: macOS, FreeBSD hosts): every
    frame is read as IP of its family and accounted for."""
    root = Path(__file__).resolve().parent.parent
    # beside the checkout (/work/main), or two levels up from a worktree (/work/wt/NAME)
    corpus = next((c for c in (root.parent / "shared" / "corpus" / "tcpdump",
                               root.parent.parent / "shared" / "corpus" / "tcpdump") if c.is_dir()), None)
    if corpus is None:
        pytest.skip("no tcpdump corpus beside the checkout")
    # the reasons are given past the IP header: each frame was read as IP of its family
    for name, reasons, src in (("quic_handshake.pcap", {"udp_no_gro_path": 18}, "::1"),
                               ("ikev2four.pcap", {"udp_csum_bad": 21}, "192.168.1.1"),
                               ("icmpv6-RFC2894-RR.pcap", {"ipv6_no_l4_handler": 6}, "2001:db8:1:0:a00:27ff:fef4:4dcf")):
        doc = replay(str(corpus / name), None, Settings(device="veth")).document
        assert doc["input"]["linktype"] == 0 and doc["totals"]["flush_reasons"] == reasons, name
        assert src in {f["flow"]["src"] for f in doc["flows"]}, name


def test_the_examples_of_docs_captures_run(tmp_path):
    """docs/captures.md's commands, on the bundled tcpdump -i any capture of segments and the host's ACKs."""
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "captures.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    import shutil
    (tmp_path / "tests" / "data").mkdir(parents=True)
    shutil.copy(root / "tests" / "data" / "any-iperf3-sll2.pcap", tmp_path / "tests" / "data")
    outgoing = []
    for line in block.splitlines():
        argv = line.split("#")[0].split()
        assert argv[0] == "grotool"
        json_path = tmp_path / "stats.json"
        proc = subprocess.run([sys.executable, "-m", "grotool"] + argv[1:] + ["-q", "--json", str(json_path)],
                              cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)})
        assert proc.returncode == 0, proc.stderr
        import json
        outgoing.append(json.loads(json_path.read_text())["totals"]["outgoing"])
    assert outgoing == [58, 0]                  # the receiver's ACKs in the real -i any capture
    assert "`outgoing`" in (root / "docs" / "reasons.md").read_text()


def test_pcapng_output_marks_outgoing_packets_outbound(tmp_path):
    """The annotated pcapng output keeps the direction: outgoing packets are
    written outbound, and reading that output back passes them again."""
    from grotool.io.capture import CaptureReader

    src = write(tmp_path / "in.pcap", 113, interleaved(sll))
    out = tmp_path / "out.pcapng"
    replay(src, str(out), Settings(device="veth", budget=8))
    with CaptureReader(str(out)) as reader:
        records = reader.records_with_interface()
        marks = []
        while (data := records.next_data()) is not None:
            marks.append((records.outbound, data[1] == 4))
    assert len(marks) == 23 and all(outbound == sent for outbound, sent in marks)
    assert sum(outbound for outbound, _ in marks) == 20


def test_api_passes_outbound_pcapng_packets(tmp_path):
    """grotool.Replay reads the pcapng direction as replay does."""
    from grotool import Replay

    items = []
    for i, fr in enumerate(FRAMES[:20]):
        items += [(fr, 0x1), (outgoing_ack(i), 0x2)]
    src = write_pcapng_directed(tmp_path / "in.pcapng", 1, items)
    packets = list(Replay(src, device="veth", budget=8))
    assert [p.frames for p in packets if p.reason == "outgoing"] == [(2 * i + 2,) for i in range(20)]
    assert sorted(p.segments for p in packets if p.reason != "outgoing") == [4, 8, 8]
    assert sum(p.segments for p in Replay(src, device="veth", budget=8, outgoing="receive") if p.segments > 1) == 20
