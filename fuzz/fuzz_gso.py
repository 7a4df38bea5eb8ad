"""Coverage-guided fuzz target (atheris / libFuzzer) for grotool.gso.segment.

The first four bytes choose gso_size (2 bytes), the gso_type names (a bit mask
over GSO_TYPE_NAMES) and the link type; the rest is the frame.  The only
exception allowed is NotSegmentable.  When segments come back, their payload
sizes are checked: gso_size each, the last one at most that.

    python fuzz/fuzz_gso.py -max_total_time=60 -max_len=4096 [CORPUS_DIR ...]

With no corpus directory the seeds of fuzz/seeds.py are used.
"""

from __future__ import annotations

import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports(include=["grotool"]):
    from grotool.gso import NotSegmentable, parse, segment

GSO_TYPE_NAMES = ("tcpv4", "tcpv6", "udp_l4", "fraglist", "tcp_fixedid", "tcp_fixedid_inner",
                  "tcp_accecn", "udp_tunnel_csum")
LINKTYPES = (1, 101, 113, 276)


def test_one_input(data: bytes) -> None:
    if len(data) < 4:
        return
    gso_size = int.from_bytes(data[:2], "big") % 4096
    types = tuple(name for bit, name in enumerate(GSO_TYPE_NAMES) if data[2] >> bit & 1)
    linktype = LINKTYPES[data[3] % len(LINKTYPES)]
    frame = data[4:]
    try:
        out = segment(frame, linktype, gso_size, types)
    except NotSegmentable:
        return
    if len(out) > 1:
        tunnel = bool(set(types) & {"udp_tunnel", "udp_tunnel_csum"}) if types else None
        start = parse(out[0], linktype, tunnel).payload_off
        sizes = [len(s) - start for s in out]
        if any(n != gso_size for n in sizes[:-1]) or not 0 < sizes[-1] <= gso_size:
            raise AssertionError(f"segment payload sizes {sizes} for gso_size {gso_size}")


def main() -> None:
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from seeds import gso_seeds, seed_inputs

        args.append(seed_inputs(gso_seeds()))
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
