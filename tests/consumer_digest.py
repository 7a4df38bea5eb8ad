"""Digests of what report, compare and the oracle make of each record of a
capture: tests/test_dissect.py checks that moving them onto grotool.dissect
left them unchanged on the bundled captures.

tests/data/dissect-baseline.json was written by this script run against the
code before the move (git ced15cc), from the repository root:

    PYTHONPATH=. python tests/consumer_digest.py captures/*.pcap tests/data/*.pcap > tests/data/dissect-baseline.json

and written again, the same way, when compare's digest of other packets was
made to start at the network header (only the compare entries of
captures/mixed.pcap, selftest-ipv4.pcap and selftest-ipv6.pcap changed).
"""

import hashlib
import json
import sys

from grotool.compare import read_side
from grotool.io.capture import CaptureReader
from grotool.oracle import frames as fr
from grotool.report.flows import describe, flow_json, flow_label


def _sha(items) -> str:
    return hashlib.sha256(repr(items).encode()).hexdigest()


def _oracle_view(frame: bytes):
    p = fr.parse(frame)
    fields = None if p is None else (
        p.l3, p.l4, p.family, p.proto, p.src, p.dst, p.sport, p.dport, p.vlans, p.outer, p.l4_end,
        p.payload_off, p.payload, p.seq, p.flags, p.check_at)
    return (fields, fr.fix_checksums(frame), fr.fix_seed_checksum(frame), fr.holds_seed(frame),
            fr.l4_checksum_ok(frame), fr.flow_json(p))


def digests(path: str) -> dict:
    with CaptureReader(path) as reader:
        linktype = reader.linktype
        records = [bytes(data) for _ts, data, _wirelen in reader]
    report = [(describe(linktype, data), flow_label(describe(linktype, data)), flow_json(describe(linktype, data)))
              for data in records]
    oracle = [_oracle_view(fr.to_ethernet(linktype, data)) for data in records]
    side = read_side(path, None, False, [], "A")
    compare = ([(flow, [(p.frame, p.kind, p.length, p.seq, p.flags, p.wirelen, p.digest) for p in packets])
                for flow, packets in side.flows.items()], list(side.order), side.counts)
    return {"records": len(records), "report": _sha(report), "compare": _sha(compare), "oracle": _sha(oracle)}


if __name__ == "__main__":
    json.dump({path: digests(path) for path in sys.argv[1:]}, sys.stdout, indent=1, sort_keys=True)
    print()
