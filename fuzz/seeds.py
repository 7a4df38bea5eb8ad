"""Seed captures for the fuzz targets: tiny pcap (µs, ns, big-endian), pcapng
and gzip files holding a few TCP/UDP/IPv6 frames, written into a directory."""

from __future__ import annotations

import gzip
import os
import struct


def _frames():
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"
    tcp4 = (eth + b"\x08\x00" + bytes.fromhex("4500002c00014000400600000a0000010a000002")
            + bytes.fromhex("04d200500000000100000001501004000000" "0000") + b"\x00" * 3)
    udp6 = (eth + b"\x86\xdd" + bytes.fromhex("6000000000100011") + b"\xfd" + b"\x00" * 14 + b"\x01"
            + b"\xfd" + b"\x00" * 14 + b"\x02" + bytes.fromhex("1234003500100000") + b"abcdefgh")
    return [tcp4, udp6, tcp4[:30]]


def _pcap(frames, magic=0xA1B2C3D4, endian="<", linktype=1) -> bytes:
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)
    for i, f in enumerate(frames):
        out += struct.pack(endian + "IIII", 1000 + i, i, len(f), len(f) + (i == 2) * 20) + f
    return out


def _pcapng(frames) -> bytes:
    def block(btype, body):
        body += b"\x00" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", 1, 0, 65535) + struct.pack("<HHB3x", 9, 1, 9) + b"\x00" * 4)
    for i, f in enumerate(frames):
        out += block(6, struct.pack("<IIIII", 0, 0, 1000 + i, len(f), len(f)) + f)
    out += block(3, struct.pack("<I", len(frames[0])) + frames[0])
    return out


def write_seeds(directory: str) -> str:
    frames = _frames()
    seeds = {
        "us.pcap": _pcap(frames),
        "ns-be.pcap": _pcap(frames, 0xA1B23C4D, ">"),
        "raw.pcap": _pcap([f[14:] for f in frames], linktype=101),
        "sll2.pcap": _pcap([b"\x08\x00" + b"\x00" * 18 + f[14:] for f in frames], linktype=276),
        "x.pcapng": _pcapng(frames),
        "gz.pcap.gz": gzip.compress(_pcap(frames)),
    }
    for name, data in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return directory
