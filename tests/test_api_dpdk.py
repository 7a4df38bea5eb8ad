"""The Python API on the DPDK stack: grotool.Replay(..., stack="dpdk", dpdk=...)
gives the packets `replay --stack dpdk` writes (and librte_gro returns), with
the same Packet and Statistics objects as the Linux stack."""

import struct
from pathlib import Path

import pytest

import grotool
from dpdk_support import dpdk_library  # noqa: F401  (fixture)
from framebuild import tcp_frame
from grotool.dpdk.engine import DpdkSettings
from grotool.dpdk.run import run_dpdk
from grotool.io.capture import read_capture
from grotool.oracle import read_input

ROOT = Path(__file__).resolve().parent.parent
MSS = 1448


def push_frames():
    """One flow: five in-order ACK segments, a PSH segment (frame 6), two more ACK segments."""
    return [(1000 * i, tcp_frame(MSS, seq=1000 + i * MSS, flags="PA" if i == 5 else "A")) for i in range(8)]


def test_public_name():
    assert grotool.DpdkSettings is DpdkSettings
    assert "DpdkSettings" in grotool.__all__


def test_frames_through_the_dpdk_stack_exactly():
    run = grotool.Replay(push_frames(), stack="dpdk", dpdk={"burst": 4})
    got = [(p.segments, p.frames, p.reason, p.poll, p.timestamp_ns, p.gso_size, p.queue) for p in run]
    # bursts of 4: [1-4] | 5 held, 6 (PSH) unprocessed, [7-8] held apart from 5 (not its neighbour)
    assert got == [(4, (1, 2, 3, 4), "dpdk_burst_end", 1, 0, 0, 0),
                   (1, (5,), "dpdk_burst_end", 2, 4000, 0, 0),
                   (2, (7, 8), "dpdk_burst_end", 2, 6000, 0, 0),
                   (1, (6,), "dpdk_tcp_flags", 2, 5000, 0, 0)]
    stats = run.statistics
    assert (stats.frames_in, stats.packets_out, stats.super_packets, stats.coalescing_ratio) == (8, 4, 2, 2.0)
    assert stats.flush_reasons == {"dpdk_burst_end": 3, "dpdk_tcp_flags": 1}
    (flow,) = stats.flows
    assert (flow.flow, flow.frames_in, flow.packets_out, flow.super_packets, flow.max_segments) == (
        "tcp 192.168.1.200:1500 > 192.168.1.100:8000", 8, 4, 2, 4)
    assert stats.document["schema"] == "grotool.dpdk/1"
    assert stats.document["settings"]["burst"] == 4
    assert [p["covers"] for p in stats.document["packets"]] == [[0, 1, 2, 3], [4], [6, 7], [5]]


def test_merged_packet_bytes_are_the_models_with_stale_checksums():
    packets = grotool.Replay(push_frames(), stack="dpdk").packets()
    first = packets[0]
    assert first.frames == (1, 2, 3, 4, 5) and len(first.data) == 14 + 20 + 20 + 5 * MSS
    assert struct.unpack("!H", first.data[16:18])[0] == 20 + 20 + 5 * MSS     # total length updated
    original = push_frames()[0][1]
    assert first.data[24:26] == original[24:26]                                # IPv4 checksum left stale
    assert first.data[50:52] == original[50:52]                                # TCP checksum left stale


def test_same_packets_as_replay_stack_dpdk(tmp_path):
    path = ROOT / "captures" / "bulk-4flows.pcap"
    settings = DpdkSettings(mode="heavy", burst=16, flush_every=3)
    run_dpdk(str(path), str(tmp_path / "out.pcap"), None, settings)
    _, records = read_capture(str(tmp_path / "out.pcap"))
    packets = grotool.Replay(path, stack="dpdk", dpdk=settings).packets()
    assert [(p.timestamp_ns, p.data) for p in packets] == [(ts, data) for ts, data, _ in records]
    assert sorted(f for p in packets for f in p.frames) == list(range(1, 401))


def test_a_dict_takes_lists_and_comma_strings():
    run = grotool.Replay(push_frames(), stack="dpdk", dpdk={"gro_types": "tcp4,udp4", "vxlan_ports": [4789, 8472]})
    assert run.settings == DpdkSettings(gro_types=("tcp4", "udp4"), vxlan_ports=(4789, 8472))


def test_raw_ip_frames_get_an_ethernet_header():
    raw = [(ts, frame[14:]) for ts, frame in push_frames()]
    packets = grotool.Replay(raw, linktype=101, stack="dpdk").packets()
    assert [p.frames for p in packets] == [(1, 2, 3, 4, 5), (7, 8), (6,)]
    assert all(p.data[12:14] == b"\x08\x00" for p in packets)
    ethernet = grotool.Replay(push_frames(), stack="dpdk").packets()
    assert [p.data[14:] for p in packets] == [p.data[14:] for p in ethernet]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"stack": "bsd"}, ValueError, "stack must be one of linux, dpdk"),
    ({"stack": "dpdk", "device": "veth"}, TypeError, "Linux's replay options do not apply"),
    ({"dpdk": DpdkSettings()}, TypeError, "dpdk= goes with stack='dpdk'"),
    ({"stack": "dpdk", "dpdk": {"burst": 0}}, ValueError, "--burst must be 1..65535"),
    ({"stack": "dpdk", "dpdk": {"bogus": 1}}, TypeError, "unknown DPDK setting"),
    ({"stack": "dpdk", "dpdk": 32}, TypeError, "dpdk= takes a grotool.DpdkSettings"),
    ({"stack": "dpdk", "dpdk": {"gro_types": ("tcp6",)}}, ValueError, "GRO type tcp6 is not modelled"),
    ({"stack": "dpdk", "events": True}, ValueError, "grotool explain --stack dpdk"),
])
def test_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        grotool.Replay(push_frames(), **kwargs)


def test_bad_input_is_an_input_error():
    with pytest.raises(grotool.InputError, match="cannot open"):
        grotool.Replay("captures/no-such.pcap", stack="dpdk").packets()
    with pytest.raises(grotool.InputError, match="frame 1: expected an integer timestamp"):
        grotool.Replay([(0, "not bytes")], stack="dpdk").packets()


def test_runs_once():
    run = grotool.Replay(push_frames(), stack="dpdk")
    run.packets()
    with pytest.raises(RuntimeError, match="runs once"):
        run.packets()


@pytest.mark.parametrize("name", ["bulk-4flows.pcap", "mixed.pcap"])
def test_api_packets_are_the_real_librarys(name, dpdk_library):
    path = ROOT / "captures" / name
    frames, _, _ = read_input(str(path))
    for settings in (DpdkSettings(), DpdkSettings(mode="heavy", burst=8, flush_every=4),
                     DpdkSettings(burst=64, gro_types=("tcp4", "udp4"))):
        packets = grotool.Replay(path, stack="dpdk", dpdk=settings).packets()
        library = dpdk_library(frames, settings)
        assert [(p.data, [f - 1 for f in p.frames]) for p in packets] == [(p.data, p.covers) for p in library]
