"""The Python API (grotool.Replay and friends) and the examples of docs/api.md."""

import doctest
from pathlib import Path

import pytest

import grotool
from grotool.engine.config import Settings
from grotool.io.capture import read_capture
from grotool.replay import replay as cli_replay

ROOT = Path(__file__).resolve().parent.parent


def test_docs_api_examples_run(monkeypatch):
    monkeypatch.chdir(ROOT)
    failures, tried = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                                       optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert tried >= 25
    assert failures == 0


def test_public_names():
    assert set(grotool.__all__) == {"Replay", "Packet", "Decision", "Statistics", "FlowStatistics", "Settings",
                                    "DpdkSettings", "GrotoolError", "InputError", "__version__"}
    assert grotool.Settings is Settings
    # the module grotool.replay stays importable next to grotool.Replay
    assert callable(cli_replay) and grotool.Replay is not cli_replay


def test_same_packets_as_the_command_line(tmp_path):
    out = tmp_path / "out.pcap"
    cli_replay(str(ROOT / "captures" / "mixed.pcap"), str(out), Settings())
    _, records = read_capture(str(out))
    packets = grotool.Replay(ROOT / "captures" / "mixed.pcap").packets()
    assert [(p.timestamp_ns, p.data) for p in packets] == [(ts, data) for ts, data, _ in records]
    assert sum(p.segments for p in packets) == 318
    assert sorted(f for p in packets for f in p.frames) == list(range(1, 319))


def test_frames_with_wire_length_and_raw_ip():
    _, records = read_capture(str(ROOT / "captures" / "bulk-4flows.pcap"))
    raw = [(ts, data[14:], wirelen - 14) for ts, data, wirelen in records]
    packets = grotool.Replay(raw, linktype=101, device="veth").packets()
    assert len(packets) == 73 and sum(p.segments for p in packets) == 400
    # a wire length longer than the bytes: cut by a snaplen, passed through
    cut = [(0, records[0][1][:100], len(records[0][1]))]
    (only,) = grotool.Replay(cut).packets()
    assert (only.reason, only.segments, only.frames) == ("capture_truncated", 1, (1,))


def test_a_replay_runs_once_and_statistics_wait_for_the_end():
    run = grotool.Replay(ROOT / "captures" / "mixed.pcap")
    iterator = iter(run)
    next(iterator)
    with pytest.raises(RuntimeError, match="once the iteration has ended"):
        run.statistics
    list(iterator)
    assert run.statistics.frames_in == 318
    with pytest.raises(RuntimeError, match="runs once"):
        iter(run)
    # statistics first: runs the whole replay
    assert grotool.Replay(ROOT / "captures" / "mixed.pcap").statistics.packets_out == 271


def test_bad_arguments():
    with pytest.raises(TypeError, match="unknown replay option"):
        grotool.Replay("x.pcap", devise="veth")
    with pytest.raises(TypeError, match="either settings or keyword options"):
        grotool.Replay("x.pcap", Settings(), device="veth")
    with pytest.raises(grotool.InputError, match="frame 2: expected"):
        grotool.Replay([(0, b"\0" * 60), (1,)]).packets()
    with pytest.raises(grotool.InputError, match="link type 1, not 101"):
        grotool.Replay(ROOT / "captures" / "mixed.pcap", linktype=101).packets()


# -- issue 32: scapy packets as they come (rdpcap, PacketList, built packets) -------------
def test_scapy_packet_list_from_rdpcap_is_the_capture():
    from scapy.utils import rdpcap

    packets = rdpcap(str(ROOT / "captures" / "bulk-4flows.pcap"))
    from_scapy = grotool.Replay(packets, device="veth").packets()
    from_file = grotool.Replay(ROOT / "captures" / "bulk-4flows.pcap", device="veth").packets()
    assert len(from_scapy) == 73
    assert [(p.timestamp_ns, p.data, p.frames, p.reason) for p in from_scapy] == \
        [(p.timestamp_ns, p.data, p.frames, p.reason) for p in from_file]


def test_scapy_built_packets_and_link_types():
    from scapy.layers.inet import IP, TCP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import CookedLinux, Ether
    from scapy.packet import Raw

    def segments(first_layer):
        out = []
        for k in range(4):
            ip = IP(src="10.0.0.1", dst="10.0.0.2", id=k, flags="DF")
            pkt = ip / TCP(sport=40000, dport=5201, seq=1 + 1000 * k, flags="A") / Raw(b"x" * 1000)
            pkt = first_layer() / pkt if first_layer else pkt
            pkt.time = 1.5 + k / 1000
            out.append(pkt)
        return out

    for first_layer, linktype in ((Ether, 1), (None, 101), (lambda: CookedLinux(pkttype=0, proto=0x0800), 113)):
        (packet,) = grotool.Replay(segments(first_layer), device="veth").packets()
        assert (packet.segments, packet.frames, packet.timestamp_ns) == (4, (1, 2, 3, 4), 1_500_000_000)
        assert bytes(packet.data[:2]) == bytes(segments(first_layer)[0])[:2]
    six = [IPv6(src="fd00::1", dst="fd00::2") / TCP(sport=1, dport=2, seq=1 + 100 * k, flags="A") / Raw(b"y" * 100)
           for k in range(3)]
    assert [p.segments for p in grotool.Replay(six, device="veth")] == [3]
    with pytest.raises(grotool.InputError, match="frame 2: a scapy Ether packet after IP ones"):
        grotool.Replay([IP() / TCP(), Ether() / IP() / TCP()]).packets()
    with pytest.raises(grotool.InputError, match="frame 1: a scapy TCP packet"):
        grotool.Replay([TCP()]).packets()


def test_tuples_never_import_scapy():
    import subprocess
    import sys

    code = ("import sys, grotool; from grotool.io.capture import read_capture; "
            "_, recs = read_capture('captures/bulk-4flows.pcap'); "
            "assert len(grotool.Replay([(ts, d) for ts, d, _ in recs]).packets()) > 0; "
            "assert not [m for m in sys.modules if m.startswith('scapy')], 'scapy imported'")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
