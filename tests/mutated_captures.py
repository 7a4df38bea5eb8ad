"""Damaged captures for comparing the two builds (tests/test_builds.py).

The compiled engine reads header bytes through unchecked C pointers where the
source has checked the length first; a missing check reads past a frame and
gives other results than the interpreted build, or crashes.  The tcpdump
corpus holds few frames GRO merges, so this takes runs of frames that do
merge (the bundled captures, the recorded real TCP captures, and generated
UDP, GRE, VXLAN and fraglist flows) and damages them: header bytes flipped
or set to protocol-like values, frames cut at random lengths, some captures
shuffled.  Deterministic for a seed.

    python tests/mutated_captures.py OUTDIR SEED COUNT
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import List, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

from grotool.io.capture import PcapWriter, read_capture  # noqa: E402

TS0 = 1_700_000_000_000_000_000
# values a damaged header byte is set to: versions, header lengths, protocols
PROTOCOL_BYTES = (0x00, 0xFF, 0x45, 0x46, 0x60, 0x11, 0x06, 0x2F, 0x04, 0x29, 0x08, 0x86, 0xDD)


def _generated() -> List[List[Tuple[int, bytes]]]:
    import breadth_frames as B
    import tunnel_frames as T

    flows = [B.udp_mixed(), B.tcp_for_fraglist(), B.gre_mixed(), B.vxlan_mixed(),
             T.gre_tcp_flow(12, key=7, csum=True), T.gre_tcp_flow(12, family=6, teb=True),
             T.vxlan_tcp_flow(12, udp_csum=True), T.vxlan_tcp_flow(12, family=6, inner_family=6)]
    return [[(TS0 + i * 1000, frame) for i, frame in enumerate(frames)] for frames in flows]


def sources() -> List[List[Tuple[int, bytes]]]:
    """Runs of Ethernet frames, as (timestamp, bytes)."""
    out = []
    for path in sorted(ROOT.glob("captures/*.pcap")) + sorted(ROOT.glob("tests/data/*.pcap")):
        linktype, records = read_capture(str(path))
        if linktype == 1:
            out.append([(ts, data) for ts, data, *_ in records[:2000]])
    return out + _generated()


def damage(rng: random.Random, data: bytes) -> bytes:
    frame = bytearray(data)
    r = rng.random()
    if r < 0.3 and frame:
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(min(len(frame), 96))] ^= 1 << rng.randrange(8)
    elif r < 0.4:
        del frame[rng.randrange(len(frame) + 1):]
    elif r < 0.45 and frame:
        frame[rng.randrange(min(len(frame), 96))] = rng.choice(PROTOCOL_BYTES)
    return bytes(frame)


def write_captures(outdir: str, seed: int, count: int) -> None:
    rng = random.Random(seed)
    runs = sources()
    for n in range(count):
        run = rng.choice(runs)
        start = rng.randrange(max(1, len(run) - 300))
        frames = [(ts, damage(rng, data)) for ts, data in run[start:start + rng.randint(20, 300)]]
        if rng.random() < 0.2:
            rng.shuffle(frames)
            frames = [(TS0 + i * 1000, data) for i, (_, data) in enumerate(frames)]
        with PcapWriter(str(Path(outdir) / f"damaged-{seed}-{n:04d}.pcap")) as writer:
            for ts, data in frames:
                writer.write(ts, data)


if __name__ == "__main__":
    write_captures(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
