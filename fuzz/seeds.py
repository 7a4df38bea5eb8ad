"""Seeds for the fuzz targets: tiny pcap (µs, ns, big-endian), raw IP, SLL2,
pcapng and gzip captures holding a few TCP/UDP/IPv6 frames (capture_seeds),
and super-packets for the GSO target (gso_seeds).  Handed to libFuzzer as
in-memory files (seed_inputs), or written into a corpus directory."""

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


def memory_file(data: bytes = b"") -> str:
    """A path to an in-memory file (memfd) that disappears with the process:
    libFuzzer ends the process without running Python's cleanup."""
    fd = os.memfd_create("grotool-fuzz")
    os.write(fd, data)
    return f"/proc/{os.getpid()}/fd/{fd}"


def seed_inputs(seeds: dict) -> str:
    """libFuzzer's -seed_inputs option for these seeds (no corpus directory is
    written to, nothing is left behind)."""
    return "-seed_inputs=" + ",".join(memory_file(data) for data in seeds.values())


def capture_seeds() -> dict:
    frames = _frames()
    return {
        "us.pcap": _pcap(frames),
        "ns-be.pcap": _pcap(frames, 0xA1B23C4D, ">"),
        "raw.pcap": _pcap([f[14:] for f in frames], linktype=101),
        "sll2.pcap": _pcap([b"\x08\x00" + b"\x00" * 18 + f[14:] for f in frames], linktype=276),
        "x.pcapng": _pcapng(frames),
        "gz.pcap.gz": gzip.compress(_pcap(frames)),
    }


def write_seeds(directory: str, seeds: dict) -> str:
    """Write seeds into a corpus directory (to start a corpus kept across runs)."""
    for name, data in seeds.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return directory


def gso_seeds() -> dict:
    """Seeds for fuzz_gso.py: 4-byte prefix (gso_size 1000, gso_type mask, link
    type Ethernet) + a super-packet: TCP/IPv4 with the offload seed, UDP, and
    TCP in VXLAN (zero outer checksum)."""
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"

    def ipv4(proto: int, body: bytes) -> bytes:
        hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 1, 0x4000, 64, proto, 0,
                                    b"\x0a\x00\x00\x01", b"\x0a\x00\x00\x02"))
        total = sum(struct.unpack("!10H", bytes(hdr)))
        total = (total & 0xFFFF) + (total >> 16)
        hdr[10:12] = struct.pack("!H", ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF)
        return bytes(hdr) + body

    tcp = struct.pack("!HHIIBBHHH", 1234, 80, 1, 1, 0x50, 0x10, 512, 0, 0) + bytes(range(256)) * 12
    udp = struct.pack("!HHHH", 1234, 53, 8 + 3000, 0) + b"\x5a" * 3000
    inner = eth + b"\x08\x00" + ipv4(6, tcp)
    vxlan = struct.pack("!HHHH", 33000, 4789, 16 + len(inner), 0) + struct.pack("!II", 0x08000000, 42 << 8) + inner
    return {
        "tcp4": b"\x03\xe8\x01\x00" + eth + b"\x08\x00" + ipv4(6, tcp),
        "udp": b"\x03\xe8\x04\x00" + eth + b"\x08\x00" + ipv4(17, udp),
        "vxlan": b"\x03\xe8\x81\x00" + eth + b"\x08\x00" + ipv4(17, vxlan),
    }
