"""Captures taken with `tcpdump -i any` (Linux cooked SLL/SLL2), their
direction (outgoing packets of the capturing host), and BSD loopback
captures (NULL/LOOP): see docs/captures.md."""

import struct
from pathlib import Path

import pytest

from grotool.engine import Engine, Settings
from grotool.io.capture import PcapWriter, read_capture
from grotool.replay import replay

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
