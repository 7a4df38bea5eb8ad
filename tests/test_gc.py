"""A replay makes no reference cycles per packet: reference counting frees
every packet, delivery and record it drops.  The grotool program relies on it
when it runs the cycle collector only every 100,000 net allocations (cli.run):
were the engine, the statistics or the writers to leave cyclic garbage per
packet, a long capture would pile it up between collections.

A replay's own objects (the engine's device and GRO nodes, the reader) do form
cycles, once per replay.  So each input is replayed whole and cut to its first
100 packets, each twice in one process (the first replay makes what is made
once: lazy imports, caches); the second, with the collector off, must leave
the same cyclic garbage for both lengths."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import gc, sys
sys.path.insert(0, {bench!r})
import inputs
from grotool.engine import Settings
from grotool.replay import replay

from grotool.io.capture import PcapWriter, read_capture

kind, path, out, settings, count = sys.argv[1], sys.argv[2], sys.argv[3], Settings(**eval(sys.argv[4])), int(sys.argv[5])
if kind != "file":
    inputs.write_input(kind, path, 3000)
if count:
    linktype, records = read_capture(path)
    assert len(records) > count * 2, len(records)
    path = out + ".in.pcap"
    with PcapWriter(path, linktype) as w:
        for record in records[:count]:
            w.write(record[0], record[1])
for attempt in range(2):
    gc.collect()
    gc.disable()
    result = replay(path, out, settings, packets_path=out + ".jsonl")
    result.document
    del result
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    kinds = sorted({{type(o).__name__ for o in gc.garbage}})
    gc.set_debug(0)
    gc.garbage.clear()
    gc.enable()
print(found, kinds)
"""

CASES = [
    ("mix", "dict(csum='trust')"),
    ("bulk", "dict()"),
    ("real", "dict(device='nic', rx_queues=4)"),
    (str(ROOT / "captures" / "mixed.pcap"), "dict(device='veth', udp_gro_forwarding=True, rx_gro_list=True)"),
    (str(ROOT / "tests" / "data" / "any-iperf3-sll2.pcap"), "dict()"),
]


@pytest.mark.parametrize("source,settings", CASES, ids=[Path(c[0]).name for c in CASES])
def test_a_replay_leaves_no_cyclic_garbage(tmp_path, source, settings):
    kind, path = ("file", source) if "/" in source else (source, str(tmp_path / f"{source}.pcap"))
    code = CHILD.format(bench=str(ROOT / "bench"))
    left = []
    for count in (0, 100):
        r = subprocess.run([sys.executable, "-c", code, kind, path, str(tmp_path / f"out{count}.pcap"), settings,
                            str(count)], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        left.append(r.stdout.strip())
    assert left[0] == left[1]


# -- the grotool program leaves a replay's flow records to the OS at exit ------------

class _Records:
    """Stands in for a replay's statistics: an object a weak reference can watch."""


def test_records_left_for_exit_outlive_every_collection(monkeypatch):
    import gc
    import weakref

    from grotool import cli

    monkeypatch.setattr(cli, "_process_ends_with_command", True)
    frozen = gc.get_freeze_count()
    records = _Records()
    alive = weakref.ref(records)
    try:
        cli._leave_for_exit(records)
        del records
        gc.collect()
        assert alive() is not None                   # no collection frees them, the one at exit neither
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()                                # this test process goes on: give them back
        gc.collect()
    assert alive() is None


def test_records_are_freed_when_main_runs_inside_another_program():
    import gc
    import weakref

    from click.testing import CliRunner

    from grotool import cli

    assert not cli._process_ends_with_command
    records = _Records()
    alive = weakref.ref(records)
    cli._leave_for_exit(records)
    del records
    assert alive() is None                           # reference counting freed them at once
    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(cli.main, ["replay", str(ROOT / "captures" / "mixed.pcap"), "-q"])
    assert result.exit_code == 0, result.output
    assert gc.get_freeze_count() == frozen           # a replay through main() sets nothing aside


def test_the_program_with_its_records_left_writes_what_the_api_writes(tmp_path):
    # run() (python -m grotool): exit 0, and the capture and statistics are those of
    # the same replay through the API in this process
    import json

    from grotool.engine import Settings
    from grotool.replay import replay

    source = ROOT / "captures" / "mixed.pcap"
    out, doc_path = tmp_path / "out.pcap", tmp_path / "s.json"
    r = subprocess.run([sys.executable, "-m", "grotool", "replay", str(source), str(out), "-q", "--json",
                        str(doc_path)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    expected = replay(str(source), str(tmp_path / "api.pcap"), Settings())
    assert out.read_bytes() == (tmp_path / "api.pcap").read_bytes()
    doc = json.loads(doc_path.read_text())
    assert doc["flows"] == json.loads(json.dumps(expected.document["flows"]))
    assert doc["totals"] == json.loads(json.dumps(expected.document["totals"]))
