"""--l4-csum full: every TCP/UDP checksum written is valid, for packets sent
up unchanged as well as for super-packets (issue: a capture from a sender
with checksum offload holds only the pseudo-header seed)."""

import struct
import subprocess
import sys
from pathlib import Path

import breadth_frames as F
from grotool import scenarios as S
from grotool.engine import csum
from grotool.io.capture import PcapWriter, read_capture
from grotool.oracle.frames import l4_checksum_ok, parse

ROOT = Path(__file__).resolve().parent.parent


def seeded(frame: bytes) -> bytes:
    """The frame as a sender with checksum offload captures it: the L4 field holds the seed."""
    b = bytearray(frame)
    l4 = 14 + (b[14] & 15) * 4
    proto = b[23]
    seed = csum.seed(csum.pseudo4(bytes(b[26:30]), bytes(b[30:34]), proto, len(b) - l4))
    struct.pack_into("!H", b, l4 + (16 if proto == 6 else 6), seed)
    return bytes(b)


def replay(tmp_path, frames, *args):
    src, out = tmp_path / "in.pcap", tmp_path / "out.pcap"
    with PcapWriter(str(src)) as w:
        for i, f in enumerate(frames):
            w.write(i * 1000, f)
    proc = subprocess.run([sys.executable, "-m", "grotool", "replay", "-q", "--device", "veth", str(src), str(out),
                           *args], capture_output=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return [bytes(r[1]) for r in read_capture(str(out))[1]]


def test_full_makes_pass_through_checksums_valid(tmp_path):
    frames = [seeded(S.tcp_frame(seq=1000, payload=100, flags="PA")), seeded(S.udp_frame(dport=5000, payload=50)),
              seeded(S.tcp_frame(seq=1100, payload=100, flags="S"))]
    assert not any(l4_checksum_ok(f) for f in frames)
    partial = replay(tmp_path, frames)
    assert partial == frames                                  # partial: sent up unchanged
    full = replay(tmp_path, frames, "--l4-csum", "full")
    assert len(full) == 3 and all(l4_checksum_ok(f) for f in full)
    # only the checksum field changed
    for a, b in zip(frames, full):
        p = parse(a)
        assert a[:p.check_at] == b[:p.check_at] and a[p.check_at + 2:] == b[p.check_at + 2:]


def test_full_super_packets_and_tunnels_are_valid(tmp_path):
    frames = F.vxlan_mixed() + [S.udp_frame(dport=5000, payload=500, ip_id=i) for i in range(3)]
    out = replay(tmp_path, frames, "--l4-csum", "full", "--vxlan-port", "4789", "--udp-gro-forwarding")
    assert any(len(f) > 3000 for f in out)
    from grotool.oracle.frames import _checksum_ok, dissect_frame

    for f in out:
        p = parse(f, vxlan_ports=[4789])
        assert l4_checksum_ok(f, p)
        # the outer UDP checksum of a VXLAN packet too, where it is not zero
        assert all(_checksum_ok(f, c) for c in dissect_frame(f, vxlan_ports=[4789]).checksums)
