"""grotool explain: the text, the grotool.events/1 JSON Lines, the filters, and
agreement with replay on every bundled and real capture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MIXED = str(ROOT / "captures" / "mixed.pcap")
CAPTURES = sorted(str(p.relative_to(ROOT)) for p in list((ROOT / "captures").glob("*.pcap"))
                  + list((ROOT / "tests" / "data").glob("*.pcap")))


def run(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "grotool", *args], capture_output=True, cwd=ROOT, text=True,
                          env=full_env)


def jsonl(text: str):
    return [json.loads(line) for line in text.splitlines()]


EXPECTED_TEXT = """\
mixed.pcap: 318 frames, 271 packets delivered
device nic (1 RX queue, budget 64, rx-usecs 8, rx-frames 32, HZ 250, gro_flush_timeout 0, napi_defer_hard_irqs 0)
settings: kernel Linux 6.18.44, stable; csum auto; gro on; gro_max_size 65536; gro_ipv4_max_size 65536; host: no UDP GRO sockets, no tunnel devices
poll 49
  286  0.000463  tcp 10.1.0.1:40000 > 10.0.0.1:5201  merged          -               held: frame 285, 1 seg
   ->  0.000458  tcp 10.1.0.1:40000 > 10.0.0.1:5201  flushed         napi_complete   delivered frames 285-286 (2 segs)  [napi_complete_done]
poll 50
  287  0.000468  tcp 10.1.0.1:40000 > 10.0.0.1:5201  held
  288  0.000471  tcp 10.0.0.1:5201 > 10.1.0.1:40000  sent_up         tcp_no_payload  payload 0  [tcp_gro_receive]
  289  0.000472  tcp 10.1.0.1:40000 > 10.0.0.1:5201  merged          tcp_push        flags PSH|ACK; held: frame 287, 1 seg  [tcp_gro_receive]
   ->  0.000468  tcp 10.1.0.1:40000 > 10.0.0.1:5201  completed_held  tcp_push        flags PSH|ACK; delivered frames 287,289 (2 segs)  [tcp_gro_receive]
6 decisions shown
"""


def test_text_one_line_per_frame_grouped_by_poll():
    r = run("explain", MIXED, "--frame", "286-289")
    assert r.returncode == 0, r.stderr
    assert r.stdout == EXPECTED_TEXT
    assert "\x1b[" not in r.stdout            # not a terminal: no colour


def test_colour_only_when_forced_and_no_color_honoured():
    coloured = run("explain", MIXED, "--frame", "289", env={"FORCE_COLOR": "1"})
    assert "\x1b[32mmerged" in coloured.stdout
    plain = run("explain", MIXED, "--frame", "289", env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[32m" not in plain.stdout and "merged" in plain.stdout


@pytest.mark.parametrize("colour", [False, True])
def test_text_is_not_printed_line_by_line(monkeypatch, colour):
    """rich costs about a millisecond per console.print: the decisions go out in
    a few writes (plain) or a few prints of many lines (colour), not one each."""
    from click.testing import CliRunner
    from rich.console import Console

    from grotool.cli import main

    prints = []
    original = Console.print
    monkeypatch.setattr(Console, "print", lambda self, *a, **k: prints.append(1) or original(self, *a, **k))
    for name in ("FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    result = CliRunner().invoke(main, ["explain", MIXED])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "\x1b[2m529 decisions shown\x1b[0m" if colour else lines[-1] == "529 decisions shown"
    assert ("\x1b[32mmerged" in result.output) == colour
    # 3 header lines and the last line through rich; the decisions and their poll lines written
    # directly (plain) or STYLED_LINES_PER_PRINT to a print (colour)
    from grotool.cli.explain_cmd import STYLED_LINES_PER_PRINT
    decision_lines = len(lines) - 4
    assert decision_lines > 529
    assert len(prints) == 4 + (-(-decision_lines // STYLED_LINES_PER_PRINT) if colour else 0)


def test_jsonl_schema_header_and_events():
    r = run("explain", MIXED, "--frame", "287-289", "--jsonl", "-")
    assert r.returncode == 0, r.stderr
    header, *events = jsonl(r.stdout)
    assert header["schema"] == "grotool.events/1" and header["input"] == "mixed.pcap"
    assert header["frames"] == 318 and header["settings"]["device"] == "nic" and header["settings_given"] == []
    assert [(e["event"], e["frame"], e["outcome"], e["reason"]) for e in events] == [
        ("frame", 287, "held", None), ("frame", 288, "sent_up", "tcp_no_payload"),
        ("frame", 289, "merged", "tcp_push"), ("completion", 287, "completed_held", "tcp_push")]
    merged = events[2]
    assert merged == {"event": "frame", "frame": 289, "ts_ns": 1700000000000472473, "outcome": "merged",
                      "reason": "tcp_push", "function": "tcp_gro_receive", "evidence": "flags PSH|ACK",
                      "queue": 0, "poll": 50, "bucket": 6, "held": {"frame": 287, "segs": 1},
                      "flow": "tcp 10.1.0.1:40000 > 10.0.0.1:5201",
                      "flow_fields": {"proto": "tcp", "src": "10.1.0.1", "dst": "10.0.0.1", "sport": 40000,
                                      "dport": 5201, "vlan": []},
                      "flow_number": 1}
    assert events[3]["frames"] == [287, 289] and events[3]["segs"] == 2 and events[3]["cause"] == 289


def test_jsonl_to_a_file_keeps_the_text(tmp_path):
    out = tmp_path / "events.jsonl"
    r = run("explain", MIXED, "--frame", "289", "--jsonl", str(out), "--device", "veth")
    assert r.returncode == 0, r.stderr
    assert "289" in r.stdout and "device veth" in r.stdout
    header, *events = jsonl(out.read_text())
    assert header["settings_given"] == ["device"] and header["settings"]["device"] == "veth"
    assert {e["frame"] for e in events if e["event"] == "frame"} == {289}


@pytest.mark.parametrize("flow, expected", [
    ("2", {"tcp 10.1.0.2:40001 > 10.0.0.1:5201"}),
    ("tcp 10.1.0.2:40001 > 10.0.0.1:5201", {"tcp 10.1.0.2:40001 > 10.0.0.1:5201"}),
    ("10.0.0.1:5201 > 10.1.0.1:40000", {"tcp 10.0.0.1:5201 > 10.1.0.1:40000"}),
    ("10.0.0.1:5201 10.1.0.1:40000", {"tcp 10.0.0.1:5201 > 10.1.0.1:40000", "tcp 10.1.0.1:40000 > 10.0.0.1:5201"}),
    ("udp :5001", {"udp 10.4.0.1:50123 > 10.0.0.1:5001"}),
])
def test_flow_filter(flow, expected):
    r = run("explain", MIXED, "--flow", flow, "--jsonl", "-")
    assert r.returncode == 0, r.stderr
    _, *events = jsonl(r.stdout)
    assert events and {e["flow"] for e in events} == expected


def test_reason_filter():
    r = run("explain", MIXED, "--reason", "tcp_ts_changed", "--jsonl", "-")
    _, *events = jsonl(r.stdout)
    assert events and {e["reason"] for e in events} == {"tcp_ts_changed"}
    assert all(e["evidence"].startswith("tsval ") for e in events)
    # each change both completes the held packet and is the reason the new frame was held
    assert Counter(e["outcome"] for e in events) == Counter({"held": len(events) // 2,
                                                            "completed_held": len(events) // 2})


@pytest.mark.parametrize("args, message", [
    (["--frame", "9-3"], "expected 1 <= N <= M"),
    (["--frame", "x"], "expected N or N-M"),
    (["--reason", "no_such_reason"], "is not a reason"),
    (["--flow", "tcp 1.2.3.4:99999"], "bad port"),
    (["--flow", "99"], "the replay table has"),
])
def test_bad_filters_exit_2(args, message):
    r = run("explain", MIXED, *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_unreadable_input_exit_3(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    r = run("explain", str(bad))
    assert r.returncode == 3 and r.stderr.startswith("grotool: error:")


def _agreement(capture: str, options, tmp_path):
    packets = tmp_path / "packets.jsonl"
    r = run("replay", "-q", capture, "--packets", str(packets), *options)
    assert r.returncode == 0, r.stderr
    delivered = Counter((p["reason"], tuple(i + 1 for i in p["covers"]), p["flow"], p.get("layer", ""),
                         p["queue"], p["poll"]) for p in jsonl(packets.read_text()))
    r = run("explain", capture, "--jsonl", "-", *options)
    assert r.returncode == 0, r.stderr
    header, *events = jsonl(r.stdout)
    explained = Counter((e["reason"], tuple(e["frames"]), e["flow"], e.get("layer", ""), e["queue"], e["poll"])
                        for e in events if "frames" in e)
    assert explained == delivered
    frames = sorted(e["frame"] for e in events if e["event"] == "frame")
    assert frames == list(range(1, header["frames"] + 1))
    return events


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("options", [(), ("--device", "veth")], ids=["nic", "veth"])
def test_explain_agrees_with_replay(capture, options, tmp_path):
    _agreement(capture, options, tmp_path)


def test_explain_agrees_with_replay_with_host_options(tmp_path):
    events = _agreement("captures/mixed.pcap", ("--udp-gro-forwarding", "--vxlan-port", "4789", "--rx-queues",
                                                "4", "--gro-flush-timeout", "20000"), tmp_path)
    assert {e["queue"] for e in events} == {0, 1, 2, 3}


@pytest.mark.parametrize("golden", sorted(p.name for p in (ROOT / "captures").glob("*.gro")))
def test_check_hint_command_runs(golden):
    """`grotool check` prints `grotool explain CAPTURE --frame N-M <golden's options>`
    for each difference: that command line must work as printed."""
    import shlex

    from grotool.check import Golden, explain_command

    g = Golden.load(str(ROOT / "captures" / golden))

    class Diff:
        @staticmethod
        def frames():
            return 1, 3
    capture = "captures/" + golden[:-4] + ".pcap"
    argv = shlex.split(explain_command(capture, Diff(), g.settings_args))
    assert argv[:2] == ["grotool", "explain"]
    r = run(*argv[1:])
    assert r.returncode == 0, r.stderr
    assert [line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ") and
            not line.lstrip().startswith("->")] == ["1", "2", "3"]


def test_docs_sessions_are_real_output():
    """The explain sessions pasted in docs/events.md are what the command prints
    (tests/test_docs_examples.py runs every example; this keeps explain's own)."""
    import re
    import shlex

    doc = (ROOT / "docs" / "events.md").read_text()
    sessions = [(command, shown) for command, shown in
                re.findall(r"```console\n\$ (grotool explain [^\n]*)\n(.*?)```", doc, re.S) if "|" not in command]
    assert len(sessions) >= 3
    for command, shown in sessions:
        r = run(*shlex.split(command)[1:])
        assert r.returncode == 0, r.stderr
        assert r.stdout == shown, command
