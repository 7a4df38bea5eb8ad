"""grotool.compare: two captures compared as GRO results."""

import json
import os
import struct

import pytest
from rich.console import Console

from grotool.compare import SCHEMA, compare_captures
from grotool.errors import InputError
from grotool.io.capture import PcapWriter
from grotool.cli.compare_view import render_compare

DATA = os.path.join(os.path.dirname(__file__), "data")
MSS = 1448
SEQ0 = 1_000_000


# -- frame builders ------------------------------------------------------------
def _csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def eth(l3: bytes, etype: int = 0x0800, vlans=()) -> bytes:
    hdr = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")
    for vid in vlans:
        hdr += struct.pack("!HH", 0x8100, vid)
    return hdr + struct.pack("!H", etype) + l3


def ipv4(proto: int, l4: bytes, src="10.0.0.1", dst="10.0.0.2", ident=0, frag=0x4000) -> bytes:
    a = bytes(map(int, src.split("."))) + bytes(map(int, dst.split(".")))
    hdr = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(l4), ident, frag, 64, proto, 0) + a
    return hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:] + l4


def ipv6(nh: int, l4: bytes, ext: bytes = b"", src="fd00::1", dst="fd00::2") -> bytes:
    import ipaddress
    s, d = ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed
    return struct.pack("!IHBB", 0x60000000, len(ext) + len(l4), nh, 64) + s + d + ext + l4


def tcp(seq: int, length: int = 0, sport=40000, dport=5001, flags=0x10) -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, seq, 1, 0x50, flags, 65535, 0, 0) + bytes(length)


def udp(length: int, sport=40000, dport=5000) -> bytes:
    # not 4789: UDP to the VXLAN port is looked into as VXLAN (whatever its flags), and these are plain UDP
    return struct.pack("!HHHH", sport, dport, 8 + length, 0) + bytes(length)


def t4(seq, length, **kw):
    ip_kw = {k: kw.pop(k) for k in ("src", "dst") if k in kw}
    vlans = kw.pop("vlans", ())
    return eth(ipv4(6, tcp(seq, length, **kw), **ip_kw), vlans=vlans)


def arp(last_byte=1) -> bytes:
    return eth(bytes.fromhex("0001080006040001020000000001") + bytes([10, 0, 0, 1]) + bytes(6)
               + bytes([10, 0, 0, last_byte]), etype=0x0806) + bytes(18)


def write(path, frames, linktype=1):
    with PcapWriter(str(path), linktype) as w:
        for k, f in enumerate(frames):
            w.write(1_000_000_000 + k * 1000, f)
    return str(path)


def bulk(n_segments, seq=SEQ0, **kw):
    return [t4(seq + k * MSS, MSS, **kw) for k in range(n_segments)]


# -- tests ---------------------------------------------------------------------
def test_identical_files_are_identical(tmp_path):
    frames = [t4(SEQ0, 20 * MSS), t4(SEQ0 + 20 * MSS, MSS, flags=0x18), arp(),
              eth(ipv4(17, udp(1000))), t4(SEQ0 + 21 * MSS, 0, flags=0x11)]
    a = write(tmp_path / "a.pcap", frames)
    b = write(tmp_path / "b.pcap", frames)
    r = compare_captures(a, b, require_order=True)
    assert r.identical
    doc = r.to_json()
    assert doc["schema"] == SCHEMA == "grotool.compare/1"
    assert doc["identical"] is True
    assert doc["counts"] == {"flows": 3, "flows_identical": 3, "flows_different": 0, "flows_only_in_a": 0,
                             "flows_only_in_b": 0, "packets_a": 5, "packets_b": 5, "differing_regions": 0}
    assert [f["kind"] for f in doc["flows"]] == ["tcp", "bytes", "udp"]
    assert doc["flows"][0]["label"] == "tcp 10.0.0.1:40000 > 10.0.0.2:5001"
    assert doc["flows"][0]["packets_a"] == 3
    assert doc["flows"][0]["payload_bytes_a"] == 21 * MSS
    assert doc["order"] == {"required": True, "identical": True, "first_difference": None}
    assert doc["compared"]["segments"] is False
    assert any("segments not compared" in n for n in doc["notes"])
    json.dumps(doc)


def test_split_differently_is_found_at_the_right_seq(tmp_path):
    other = t4(7, 100, sport=40001)
    a = write(tmp_path / "a.pcap", [t4(SEQ0, 20 * MSS), other, t4(SEQ0 + 20 * MSS, 2 * MSS)])
    b = write(tmp_path / "b.pcap", [t4(SEQ0, 10 * MSS), other, t4(SEQ0 + 10 * MSS, 10 * MSS),
                                    t4(SEQ0 + 20 * MSS, 2 * MSS)])
    r = compare_captures(a, b)
    assert not r.identical
    doc = r.to_json()
    main, side = doc["flows"]
    assert side["status"] == "identical"
    assert main["status"] == "different"
    assert main["differing_regions"] == 1          # realigned after the split
    d = main["first_difference"]
    assert d["seq"] == SEQ0 and d["rel_seq"] == 0 and d["kind"] == "split"
    assert [row["len"] for row in d["a"]] == [28960]
    assert [row["len"] for row in d["b"]] == [14480, 14480]
    assert [row["frame"] for row in d["b"]] == [1, 3]
    assert d["summary"] == ("rel seq 0-28960: A has 1 packet (28960 bytes) at frame 1, "
                            "B has 2 packets (14480 + 14480 = 28960 bytes) at frames 1-3")
    # context: the packets of the region plus the next one, flagged
    assert [(row["frame"], row["in_difference"]) for row in d["context"]["a"]] == [(1, True), (3, False)]
    assert [(row["frame"], row["in_difference"]) for row in d["context"]["b"]] == [(1, True), (3, True), (4, False)]
    assert doc["counts"]["flows_different"] == 1 and doc["counts"]["flows_identical"] == 1


def test_first_difference_later_in_the_flow_has_context_before(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(5) + [t4(SEQ0 + 5 * MSS, 4 * MSS)])
    b = write(tmp_path / "b.pcap", bulk(5) + [t4(SEQ0 + 5 * MSS, 3 * MSS), t4(SEQ0 + 8 * MSS, MSS)])
    d = compare_captures(a, b).to_json()["flows"][0]["first_difference"]
    assert d["seq"] == SEQ0 + 5 * MSS and d["rel_seq"] == 5 * MSS
    assert d["ordinal_a"] == 5 and d["ordinal_b"] == 5
    assert [row["frame"] for row in d["context"]["a"]] == [4, 5, 6]
    assert [row["in_difference"] for row in d["context"]["b"]] == [False, False, True, True]


def test_order_matters_only_when_required(tmp_path):
    f1, f2 = t4(SEQ0, MSS, sport=1), t4(SEQ0, MSS, sport=2)
    a = write(tmp_path / "a.pcap", [f1, f2])
    b = write(tmp_path / "b.pcap", [f2, f1])
    loose = compare_captures(a, b)
    assert loose.identical
    assert loose.to_json()["order"]["identical"] is False
    assert any("global order" in n for n in loose.notes)
    strict = compare_captures(a, b, require_order=True)
    assert not strict.identical
    doc = strict.to_json()
    assert all(f["status"] == "identical" for f in doc["flows"])
    od = doc["order"]["first_difference"]
    assert od["position"] == 0
    assert od["context"]["a"][0]["flow"] == "tcp 10.0.0.1:1 > 10.0.0.2:5001"
    assert od["context"]["b"][0]["flow"] == "tcp 10.0.0.1:2 > 10.0.0.2:5001"


def test_order_difference_when_one_capture_is_longer(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(2))
    b = write(tmp_path / "b.pcap", bulk(3))
    r = compare_captures(a, b, require_order=True)
    doc = r.to_json()
    assert doc["order"]["first_difference"]["position"] == 2
    f = doc["flows"][0]
    assert f["first_difference"]["kind"] == "extra"
    assert f["first_difference"]["summary"].startswith("B has 1 more packet(s) from rel seq 2896")


def test_non_tcp_byte_difference_is_detected(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(2) + [arp(1)])
    b = write(tmp_path / "b.pcap", bulk(2) + [arp(9)])
    r = compare_captures(a, b)
    assert not r.identical
    doc = r.to_json()
    f = [f for f in doc["flows"] if f["kind"] == "bytes"]
    # differing bytes of an ARP frame do not move it to another flow ("arp")
    assert len(f) == 1 and f[0]["label"] == "arp" and f[0]["status"] == "different"
    assert "first differing byte at offset 41 (0x01 vs 0x09)" in f[0]["first_difference"]["summary"]
    assert doc["flows"][0]["status"] == "identical"


def test_ipv4_fragment_is_compared_by_bytes(tmp_path):
    frag = eth(ipv4(6, tcp(SEQ0, 64), frag=0x2000))     # MF set
    frag2 = frag[:-1] + b"\x01"
    r = compare_captures(write(tmp_path / "a.pcap", [frag]), write(tmp_path / "b.pcap", [frag2]))
    f = r.to_json()["flows"]
    assert len(f) == 1 and f[0]["kind"] == "bytes" and f[0]["status"] == "different"
    # a first fragment keeps its ports in the description, but is not a TCP packet to GRO
    assert f[0]["flow"]["proto"] == "tcp"


def test_udp_compared_by_length_and_ordinal(tmp_path):
    a = write(tmp_path / "a.pcap", [eth(ipv4(17, udp(20000))), eth(ipv4(17, udp(1000)))])
    b = write(tmp_path / "b.pcap", [eth(ipv4(17, udp(20000))), eth(ipv4(17, udp(999)))])
    f = compare_captures(a, b).to_json()["flows"][0]
    assert f["kind"] == "udp" and f["status"] == "different"
    d = f["first_difference"]
    assert d["ordinal_a"] == 1
    assert d["summary"] == "packet #2 of the flow: A 1000 bytes (frame 2), B 999 bytes (frame 2)"


def test_ipv6_extension_headers_and_fragments(tmp_path):
    hbh = bytes([60, 0]) + bytes(6)      # HBH -> DstOpts
    dst = bytes([6, 0]) + bytes(6)       # DstOpts -> TCP
    p1 = eth(ipv6(0, tcp(SEQ0, 3 * MSS), ext=hbh + dst), etype=0x86DD)
    p2 = eth(ipv6(6, tcp(SEQ0 + 3 * MSS, MSS)), etype=0x86DD)
    fragment = eth(ipv6(44, tcp(SEQ0, 64), ext=bytes([6, 0, 0, 1]) + bytes(4)), etype=0x86DD)
    a = write(tmp_path / "a.pcap", [p1, p2, fragment])
    r = compare_captures(a, a)
    doc = r.to_json()
    tcp_flows = [f for f in doc["flows"] if f["kind"] == "tcp"]
    assert len(tcp_flows) == 1
    assert tcp_flows[0]["label"] == "tcp [fd00::1]:40000 > [fd00::2]:5001"
    assert tcp_flows[0]["packets_a"] == 2 and tcp_flows[0]["payload_bytes_a"] == 4 * MSS
    assert [f["kind"] for f in doc["flows"]] == ["tcp", "bytes"]


def test_vlan_makes_separate_flows(tmp_path):
    a = write(tmp_path / "a.pcap", [t4(SEQ0, MSS, vlans=(10,)), t4(SEQ0, MSS, vlans=(20,))])
    b = write(tmp_path / "b.pcap", [t4(SEQ0, MSS, vlans=(10,)), t4(SEQ0, 2 * MSS, vlans=(20,))])
    doc = compare_captures(a, b).to_json()
    assert [(f["flow"]["vlan"], f["status"]) for f in doc["flows"]] == [([10], "identical"), ([20], "different")]


def test_ethernet_padding_does_not_count_as_payload(tmp_path):
    ack = t4(SEQ0, 0)
    padded = ack + bytes(60 - len(ack))
    doc = compare_captures(write(tmp_path / "a.pcap", [ack]), write(tmp_path / "b.pcap", [padded])).to_json()
    assert doc["identical"] and doc["flows"][0]["payload_bytes_b"] == 0


def test_link_type_does_not_matter_for_tcp(tmp_path):
    frames = bulk(3)
    a = write(tmp_path / "a.pcap", frames)
    b = write(tmp_path / "b.pcap", [f[14:] for f in frames], linktype=101)
    assert compare_captures(a, b, require_order=True).identical


def test_flow_only_in_one_capture(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(2) + [t4(5, 10, sport=9)])
    b = write(tmp_path / "b.pcap", bulk(2))
    doc = compare_captures(a, b).to_json()
    assert [f["status"] for f in doc["flows"]] == ["identical", "only_in_a"]
    assert doc["flows"][1]["first_difference"]["summary"] == "flow only in A (1 packets)"
    assert doc["counts"]["flows_only_in_a"] == 1


def test_diverging_flows(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(3))
    b = write(tmp_path / "b.pcap", bulk(3, seq=SEQ0 + 7))
    d = compare_captures(a, b).to_json()["flows"][0]
    assert d["differing_regions"] == 1
    assert d["first_difference"]["kind"] == "diverged"
    assert "do not realign" in d["first_difference"]["summary"]


def test_sequence_wraparound_realigns(tmp_path):
    start = (1 << 32) - MSS
    a = write(tmp_path / "a.pcap", [t4(start, 2 * MSS), t4(MSS, MSS)])
    b = write(tmp_path / "b.pcap", [t4(start, MSS), t4(0, MSS), t4(MSS, MSS)])
    f = compare_captures(a, b).to_json()["flows"][0]
    assert f["differing_regions"] == 1 and f["first_difference"]["kind"] == "split"


# -- segments from sidecars -------------------------------------------------------
def _sidecar(path, segs):
    with open(path, "w") as f:
        json.dump({"packets": [{"gso_segs": s} for s in segs]}, f)
    return str(path)


def test_segments_compared_only_with_both_sidecars(tmp_path):
    frames = [t4(SEQ0, 20 * MSS)]
    a = write(tmp_path / "a.pcap", frames)
    b = write(tmp_path / "b.pcap", frames)
    sa = _sidecar(tmp_path / "sa.json", [20])
    sb = _sidecar(tmp_path / "sb.json", [10])
    r = compare_captures(a, b, sidecar_a=sa, sidecar_b=sb)
    assert not r.identical
    doc = r.to_json()
    assert doc["compared"]["segments"] is True and doc["compared"]["tcp"] == ["seq", "payload_len", "segs"]
    d = doc["flows"][0]["first_difference"]
    assert d["kind"] == "segs"
    assert d["summary"] == "rel seq 0: same packet (28960 bytes) built from 20 segments in A, 10 in B"
    # one sidecar only: segments cannot be compared, and the output says so
    r1 = compare_captures(a, b, sidecar_a=sa)
    assert r1.identical
    assert any("no per-packet sidecar for B" in n for n in r1.notes)


def test_sidecar_gso_size_and_auto_detection(tmp_path):
    frames = [t4(SEQ0, 20 * MSS), arp()]
    a = write(tmp_path / "kernel.pcap", frames)
    b = write(tmp_path / "sim.pcap", frames)
    with open(tmp_path / "kernel.json", "w") as f:
        json.dump({"schema": "grotool.kernel/1",
                   "packets": [{"gso_size": MSS, "gso_type": "tcpv4"}, {"gso_segs": 0}]}, f)
    with open(tmp_path / "sim.pcap.json", "w") as f:
        f.write("".join(json.dumps({"schema": "grotool.packets/1", "segs": n}) + "\n" for n in (20, 1)))
    r = compare_captures(a, b)
    assert r.identical and r.segments_compared
    assert r.a.sidecar.endswith("kernel.json") and r.b.sidecar.endswith("sim.pcap.json")
    assert r.a.flows[next(iter(r.a.flows))][0].segs == 20
    assert not compare_captures(a, b, auto_sidecar=False).segments_compared


def test_a_file_beside_the_capture_without_a_sidecar_schema_is_ignored(tmp_path):
    """issue 32: a tshark -T json export beside the capture is a list of objects, not a sidecar."""
    frames = [t4(SEQ0, 20 * MSS), arp()]
    a = write(tmp_path / "kernel.pcap", frames)
    (tmp_path / "kernel.json").write_text(json.dumps([{"_index": "packets", "_source": {"layers": {}}}] * 2))
    r = compare_captures(a, a)
    assert r.a.sidecar is None and not r.segments_compared
    assert any("ignored" in n and "kernel.json" in n and "no grotool schema" in n for n in r.notes)


def test_stats_document_is_not_a_sidecar(tmp_path):
    a = write(tmp_path / "sim.pcap", bulk(1))
    stats = tmp_path / "sim.json"
    stats.write_text(json.dumps({"schema": "grotool.stats/1", "flows": []}))
    r = compare_captures(a, a)
    assert r.a.sidecar is None
    assert any("ignored" in n and "sim.json" in n for n in r.notes)
    with pytest.raises(InputError, match="not a per-packet sidecar"):
        compare_captures(a, a, sidecar_a=str(stats))


def test_sidecar_with_wrong_packet_count_is_an_input_error(tmp_path):
    a = write(tmp_path / "a.pcap", bulk(3))
    with pytest.raises(InputError, match="has 2 packets"):
        compare_captures(a, a, sidecar_a=_sidecar(tmp_path / "s.json", [1, 1]), auto_sidecar=False)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        compare_captures(a, a, sidecar_b=str(tmp_path / "bad.json"))
    with pytest.raises(InputError, match="cannot open sidecar"):
        compare_captures(a, a, sidecar_b=str(tmp_path / "missing.json"))


# -- unreadable input ------------------------------------------------------------
def test_truncated_or_corrupt_capture_is_an_input_error(tmp_path):
    good = write(tmp_path / "good.pcap", bulk(3))
    raw = open(good, "rb").read()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[:-100])                 # last record cut short
    with pytest.raises(InputError, match="cut short"):
        compare_captures(good, str(cut))
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture at all")
    with pytest.raises(InputError, match="not a pcap"):
        compare_captures(str(junk), good)
    header_only = tmp_path / "h.pcap"
    header_only.write_bytes(raw[:10])
    with pytest.raises(InputError):
        compare_captures(good, str(header_only))
    with pytest.raises(InputError, match="cannot open"):
        compare_captures(good, str(tmp_path / "missing.pcap"))


def test_malformed_frames_do_not_crash(tmp_path):
    frames = [b"", b"\x02", eth(b"\x45"), eth(ipv4(6, b"\x00" * 10)), eth(b"\x60" + bytes(10), etype=0x86DD),
              eth(ipv4(6, tcp(1, 0)))[:40], eth(ipv4(6, b"\x00" * 12 + b"\x20" + bytes(7)))]
    a = write(tmp_path / "a.pcap", frames)
    r = compare_captures(a, a, require_order=True)
    assert r.identical
    assert r.a.counts["bytes"] == len(frames)


def test_shared_tcpdump_corpus_never_crashes():
    corpus = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "corpus", "tcpdump")
    if not os.path.isdir(corpus):
        pytest.skip("shared/corpus/tcpdump not present")
    names = sorted(n for n in os.listdir(corpus) if n.endswith((".pcap", ".pcapng")))[:400]
    for name in names:
        path = os.path.join(corpus, name)
        try:
            r = compare_captures(path, path, require_order=True, auto_sidecar=False)
        except InputError:
            continue
        assert r.identical, name


# -- rendering -----------------------------------------------------------------------
def test_render_compare(tmp_path):
    a = write(tmp_path / "a.pcap", [t4(SEQ0, 20 * MSS), arp(1)])
    b = write(tmp_path / "b.pcap", [t4(SEQ0, 10 * MSS), t4(SEQ0 + 10 * MSS, 10 * MSS), arp(2)])
    console = Console(record=True, width=160, force_terminal=False)
    render_compare(compare_captures(a, b, require_order=True), console)
    out = console.export_text()
    assert "DIFFERENT" in out
    assert "tcp 10.0.0.1:40000 > 10.0.0.2:5001" in out
    assert "B has 2 packets (14480 + 14480 = 28960 bytes)" in out
    assert "14480" in out and "28960" in out
    assert "global order" in out
    assert "2 flows: 0 identical, 2 different" in out
    console = Console(record=True, width=100)
    render_compare(compare_captures(a, a), console)
    assert "IDENTICAL" in console.export_text()


def test_render_order_only_difference(tmp_path):
    f1, f2 = t4(SEQ0, MSS, sport=1), t4(SEQ0, MSS, sport=2)
    a = write(tmp_path / "a.pcap", [f1, f2])
    b = write(tmp_path / "b.pcap", [f2, f1])
    console = Console(record=True, width=160)
    render_compare(compare_captures(a, b, require_order=True), console)
    out = console.export_text()
    assert "DIFFERENT" in out and "global order: differs (required)" in out
    assert "global packet #1: A delivers tcp 10.0.0.1:1 > 10.0.0.2:5001" in out
    console = Console(record=True, width=160)
    render_compare(compare_captures(a, b), console)
    out = console.export_text()
    assert "IDENTICAL" in out and "global order: differs (not required)" in out


# -- the committed real captures ---------------------------------------------------------
REAL = sorted(n for n in os.listdir(DATA) if n.startswith("real-") and n.endswith(".pcap")) \
    if os.path.isdir(DATA) else []


@pytest.mark.parametrize("name", REAL)
def test_real_capture_against_itself(name):
    with open(os.path.join(DATA, "real-captures.json")) as f:
        manifest = {c["file"]: c for c in json.load(f)["captures"].values()}
    path = os.path.join(DATA, name)
    r = compare_captures(path, path, require_order=True)
    assert r.identical
    doc = r.to_json()
    info = manifest[name]
    assert doc["counts"]["packets_a"] == info["frames"]
    data_pkts = sum(1 for pkts in r.a.flows.values() for p in pkts if p.length > 0)
    assert data_pkts == sum(fl["data_segments"] for fl in info["flows"].values())
    assert sum(f["payload_bytes_a"] for f in doc["flows"]) == info["bytes_sent"]
    assert all(f["kind"] == "tcp" for f in doc["flows"])


def test_one_line_packets_sidecar_is_one_entry(tmp_path):
    """replay --packets of a one-packet capture is a single JSON line: one entry."""
    from grotool.compare import load_sidecar

    path = tmp_path / "one.jsonl"
    path.write_text('{"index": 0, "segs": 3, "gso_size": 1448, "reason": "tcp_push"}\n')
    assert load_sidecar(str(path)) == [{"index": 0, "segs": 3, "gso_size": 1448, "reason": "tcp_push"}]


def test_link_type_does_not_matter_for_other_packets(tmp_path):
    # grotool kernel writes Ethernet whatever the input's link type; replay keeps raw IP or
    # Linux cooked: the non-TCP/UDP packets (forces2.pcap of the tcpdump corpus: SCTP over
    # SLL) are compared from the network header on
    frames = [eth(ipv4(132, bytes(40))), eth(ipv4(1, bytes(16))), eth(ipv6(58, bytes(24)), etype=0x86DD)]
    a = write(tmp_path / "a.pcap", frames)
    raw = write(tmp_path / "raw.pcap", [f[14:] for f in frames], linktype=101)
    sll = write(tmp_path / "sll.pcap", [bytes(14) + f[12:] for f in frames], linktype=113)
    for b in (raw, sll):
        r = compare_captures(a, b, require_order=True)
        assert r.identical and r.to_json()["counts"]["flows"] == 3
    changed = write(tmp_path / "c.pcap", [f[14:] for f in frames[:2]] + [frames[2][14:-1] + b"\x01"], linktype=101)
    assert not compare_captures(a, changed).identical


def vxlan4(inner: bytes, outer_check: int, ttl: int = 64) -> bytes:
    l4 = struct.pack("!HHHH", 50000, 4789, 8 + 8 + len(inner), outer_check) + bytes.fromhex("0800000000138900") + inner
    outer = bytearray(ipv4(17, l4, src="172.16.0.1", dst="172.16.0.2"))
    outer[8] = ttl
    return eth(bytes(outer))


def test_outer_udp_checksum_of_a_tunnel_is_not_compared(tmp_path):
    # grotool kernel --csum auto fixes a tunnel's outer UDP checksum holding the pseudo-header
    # seed as well as the inner one (gso-ipv4-vxlan-ipv4.pcap of the tcpdump corpus); replay keeps it
    inner = t4(SEQ0, MSS)
    a = write(tmp_path / "a.pcap", [vxlan4(inner, 0x37FC)])
    b = write(tmp_path / "b.pcap", [vxlan4(inner, 0xCD08)])
    doc = compare_captures(a, b).to_json()
    assert doc["identical"] and "via vxlan" in doc["flows"][0]["label"]
    c = write(tmp_path / "c.pcap", [vxlan4(inner, 0x37FC, ttl=63)])
    assert not compare_captures(a, c).identical
