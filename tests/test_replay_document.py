"""replay() returns its totals at once and makes the grotool.stats/1 document
(with its per-flow list) only when it is read: the document must be exactly
what building it at the end of the run gave."""

import json
import os

from grotool.engine import Settings
from grotool.replay import replay

CAPTURE = os.path.join(os.path.dirname(__file__), "..", "captures", "bulk-4flows.pcap")


def test_document_made_on_first_read_equals_the_collector_document():
    result = replay(CAPTURE, None, Settings(csum="trust"))
    assert result._document is None                  # a quiet replay never pays for it
    assert (result.totals["packets_in"], result.totals["packets_out"], result.totals["flows"]) == (400, 115, 4)
    assert result.totals["polls"] == 58
    doc = result.document
    assert result.document is doc                     # made once
    assert doc["totals"] is result.totals
    expected = result.collector.document(result.input_info, Settings(csum="trust").as_dict(),
                                         {"tcp_offloaded": 0, "tcp_verified": 0, "tcp_bad": 0, "ip_header_bad": 0})
    for key in ("polls", "irqs", "timer_polls", "normal_batches", "outgoing"):
        expected["totals"][key] = result.totals[key]
    assert json.dumps(doc) == json.dumps(expected)    # same content, same key order
    assert [f["packets_in"] for f in doc["flows"]] == [100, 100, 100, 100]
    assert sum(f["packets_out"] for f in doc["flows"]) == 115


def test_verify_result_joins_the_document():
    result = replay(CAPTURE, None, Settings(csum="trust"), verify=True)
    assert result.verify.ok
    assert list(result.document)[-1] == "verify"
    assert result.document["verify"] == result.verify.as_dict()
