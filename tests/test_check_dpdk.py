"""`grotool check --stack dpdk`: goldens of the DPDK stack, their settings line,
and `--update --from-library` (the expectation from the real librte_gro)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpdk_support import dpdk_library  # noqa: F401  (fixture)
from framebuild import tcp_frame
from grotool.check import (ORIGIN_LIBRARY, PASS, UNCHANGED, WRITTEN, Golden, Target, args_to_stack_settings,
                           check_job, check_target, describe_difference, diff_entries, dpdk_entries,
                           stack_settings_to_args)
from grotool.dpdk.engine import DpdkSettings, simulate
from grotool.engine.config import Settings
from grotool.errors import InputError
from grotool.io.capture import PcapWriter
from grotool.oracle import read_input

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
MSS = 1448


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}, timeout=300)


def write_pcap(path, frames):
    with PcapWriter(str(path), 1) as writer:
        for k, frame in enumerate(frames):
            writer.write(1_700_000_000_000_000_000 + 1000 * k, frame)
    return path


def bulk_with_push(tmp_path):
    """One flow: five in-order ACK segments, a PSH segment, two more ACK segments."""
    frames = [tcp_frame(MSS, seq=1000 + i * MSS, flags="PA" if i == 5 else "A") for i in range(8)]
    return write_pcap(tmp_path / "push.pcap", frames)


def golden_lines(path):
    return [line for line in Path(path).read_text().splitlines() if not line.startswith("#")]


def header(path, key):
    for line in Path(path).read_text().splitlines():
        if line.startswith(f"# {key}: "):
            return line[len(key) + 4:]
    return None


# -- the settings line -------------------------------------------------------------
def test_dpdk_settings_round_trip_through_the_settings_line():
    every = DpdkSettings(mode="heavy", burst=16, flush_every=3, max_flows=8, max_items=64,
                         gro_types=("tcp4", "vxlan_tcp4"), vxlan_ports=(4789, 8472))
    args = stack_settings_to_args(every)
    assert args == ["--stack", "dpdk", "--dpdk-mode", "heavy", "--burst", "16", "--dpdk-flush-every", "3",
                    "--dpdk-max-flows", "8", "--dpdk-max-items", "64", "--dpdk-gro-types", "tcp4,vxlan_tcp4",
                    "--vxlan-port", "4789", "--vxlan-port", "8472"]
    assert args_to_stack_settings(args) == every
    assert stack_settings_to_args(DpdkSettings()) == ["--stack", "dpdk"]
    assert args_to_stack_settings(["--stack", "dpdk"]) == DpdkSettings()
    # Linux settings are written as before: no --stack, so old readers read them
    assert stack_settings_to_args(Settings(device="veth")) == ["--device", "veth"]
    assert args_to_stack_settings(["--device", "veth"]) == Settings(device="veth")
    assert args_to_stack_settings(["--stack", "linux", "--device", "veth"]) == Settings(device="veth")


@pytest.mark.parametrize("args, message", [
    (["--stack", "dpdk", "--device", "veth"], "'--device' is not a DPDK knob"),
    (["--stack", "dpdk", "--burst", "0"], "--burst must be 1..65535"),
    (["--stack", "dpdk", "--dpdk-gro-types", "tcp6"], "GRO type tcp6 is not modelled"),
    (["--stack", "dpdk", "--burst"], "--burst needs a value"),
    (["--stack", "bsd"], "unknown stack 'bsd'"),
])
def test_bad_dpdk_settings_lines_are_bad_input(args, message):
    with pytest.raises(InputError, match=message):
        args_to_stack_settings(args, "g.gro: settings")


# -- check --update --stack dpdk, then check ---------------------------------------
def test_update_records_the_stack_and_knobs_and_a_plain_check_replays_under_them(tmp_path):
    capture = bulk_with_push(tmp_path)
    golden = tmp_path / "push.gro"
    r = run("check", "--update", capture, "--stack", "dpdk", "--burst", "4")
    assert r.returncode == 0 and "written" in r.stdout, r.stderr
    assert header(golden, "settings") == "--stack dpdk --burst 4"
    assert header(golden, "origin") == "grotool replay"
    # bursts of 4 (light mode): [0-3] returned at the first burst's end; the second burst holds
    # 4, passes the PSH segment 5 through and holds 6-7 as a packet of their own (not 4's neighbour)
    flow = "tcp 192.168.1.200:1500 > 192.168.1.100:8000"
    rows = [line.split("  ") for line in golden_lines(golden)]
    assert [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        (flow, "seq 1000", f"len {4 * MSS}", "segs 4", "frame 1", "dpdk_burst_end"),
        (flow, f"seq {1000 + 4 * MSS}", f"len {MSS}", "segs 1", "frame 5", "dpdk_burst_end"),
        (flow, f"seq {1000 + 6 * MSS}", f"len {2 * MSS}", "segs 2", "frame 7", "dpdk_burst_end"),
        (flow, f"seq {1000 + 5 * MSS}", f"len {MSS}", "segs 1", "frame 6", "dpdk_tcp_flags"),
    ]
    r = run("check", capture)
    assert r.returncode == 0 and "pass" in r.stdout, r.stdout + r.stderr
    # the check replays under the golden's knobs: the same golden with bursts of 32 fails
    text = golden.read_text().replace("# settings: --stack dpdk --burst 4", "# settings: --stack dpdk")
    golden.write_text(text)
    r = run("check", capture)
    assert r.returncode == 1, r.stdout
    # frames 1-5 are now one packet (no burst boundary after frame 4)
    assert "golden has 2 packets (5792 + 1448 bytes, 5 segments), now 1 packet (7240 bytes, 5 segments)" in r.stdout
    assert f"why: grotool explain {capture} --frame 1 --stack dpdk\n" in r.stdout
    # an update without options keeps the golden's stack (the edited line: defaults)
    r = run("check", "--update", capture)
    assert r.returncode == 0 and "updated" in r.stdout
    assert header(golden, "settings") == "--stack dpdk"
    assert [line.split("  ")[3] for line in golden_lines(golden)] == ["segs 5", "segs 2", "segs 1"]


def test_dpdk_golden_entries_are_the_models_packets(tmp_path):
    capture = tmp_path / "bulk-4flows.pcap"
    shutil.copy(CAPTURES / "bulk-4flows.pcap", capture)
    settings = DpdkSettings(mode="heavy", burst=16, flush_every=2)
    result = check_target(Target(str(capture), str(tmp_path / "bulk-4flows.gro")), update=True, settings=settings)
    assert result.status == WRITTEN and result.frames == 400
    golden = Golden.load(str(tmp_path / "bulk-4flows.gro"))
    assert golden.settings == settings
    frames, _, _ = read_input(str(capture))
    model = simulate(frames, settings)
    assert len(golden.entries) == len(model) == result.packets
    assert [(e.segs, e.frame, e.reason) for e in golden.entries] == [
        (len(p.covers), min(p.covers) + 1, p.reason) for p in model]
    # 25 bursts of 16, flushed after every second one and at the end (burst 25)
    assert {e.reason for e in golden.entries} == {"dpdk_timeout_flush", "dpdk_tcp_flags", "end_of_capture"}
    assert check_target(Target(str(capture), str(tmp_path / "bulk-4flows.gro"))).status == PASS
    # a Linux replay of the same capture is another expectation
    linux = check_target(Target(str(capture), str(tmp_path / "bulk-4flows.gro")), update=True,
                         settings=Settings())
    assert linux.status == "updated" and Golden.load(str(tmp_path / "bulk-4flows.gro")).settings == Settings()


def test_dpdk_difference_names_the_explain_command_with_the_knobs(tmp_path):
    capture = bulk_with_push(tmp_path)
    settings = DpdkSettings(burst=4)
    old, _ = dpdk_entries(str(capture), settings)
    new, _ = dpdk_entries(str(capture), DpdkSettings(burst=8))
    (diff,) = diff_entries(old, new)
    lines = describe_difference(str(capture), diff, stack_settings_to_args(settings))
    assert lines[-1] == f"  why: grotool explain {capture} --frame 1 --stack dpdk --burst 4"


# -- command line ------------------------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["--stack", "dpdk"], "replay options are for --update"),
    (["--burst", "8"], "replay options are for --update"),
    (["--update", "--burst", "8"], "the --dpdk-* knobs and --burst are DPDK's: add --stack dpdk"),
    (["--update", "--stack", "dpdk", "--device", "veth"], "--device is a Linux replay option"),
    (["--update", "--stack", "dpdk", "--from-kernel"], "--from-kernel takes Linux's expectation"),
    (["--from-library"], "--from-library goes with --update"),
    (["--update", "--from-library", "--stack", "linux"], "it goes with --stack dpdk"),
    (["--update", "--from-library", "--from-kernel"], "exclusive"),
])
def test_usage_errors(tmp_path, args, message):
    capture = bulk_with_push(tmp_path)
    r = run("check", capture, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert not (tmp_path / "push.gro").exists()


def test_a_golden_mixing_linux_options_into_dpdk_settings_is_bad_input(tmp_path):
    capture = bulk_with_push(tmp_path)
    assert run("check", "--update", capture, "--stack", "dpdk").returncode == 0
    golden = tmp_path / "push.gro"
    golden.write_text(golden.read_text().replace("# settings: --stack dpdk", "# settings: --stack dpdk --budget 8"))
    r = run("check", capture)
    assert r.returncode == 3
    assert "'--budget' is not a DPDK knob" in r.stdout


def test_from_library_on_a_linux_golden_is_an_error_for_that_capture(tmp_path):
    capture = tmp_path / "mixed.pcap"
    shutil.copy(CAPTURES / "mixed.pcap", capture)
    shutil.copy(CAPTURES / "mixed.gro", tmp_path / "mixed.gro")
    before = (tmp_path / "mixed.gro").read_bytes()
    r = run("check", "--update", "--from-library", capture)
    assert r.returncode == 3
    assert "--from-library takes the expectation from the real librte_gro" in r.stdout
    assert (tmp_path / "mixed.gro").read_bytes() == before


# -- from the real library ---------------------------------------------------------
LIBRARY_SETTINGS = [DpdkSettings(), DpdkSettings(mode="heavy", burst=16, flush_every=3),
                    DpdkSettings(burst=8, gro_types=("tcp4", "udp4", "vxlan_tcp4", "vxlan_udp4"))]


@pytest.mark.parametrize("settings", LIBRARY_SETTINGS,
                         ids=lambda s: " ".join(stack_settings_to_args(s)[2:]) or "defaults")
def test_from_library_goldens_pass_against_the_model(tmp_path, settings, dpdk_library):
    for name in ("bulk-4flows", "mixed", "selftest-ipv4"):
        shutil.copy(CAPTURES / f"{name}.pcap", tmp_path / f"{name}.pcap")
    targets = [Target(str(tmp_path / f"{n}.pcap"), str(tmp_path / f"{n}.gro"))
               for n in ("bulk-4flows", "mixed", "selftest-ipv4")]
    for target in targets:
        written = check_target(target, update=True, settings=settings, from_library=True)
        assert written.status == WRITTEN, written.message
        golden = Golden.load(target.golden)
        assert golden.origin == ORIGIN_LIBRARY and golden.kernel.startswith("librte_gro 22.11")
        assert golden.settings == settings
        assert {e.reason for e in golden.entries} == {"-"}
        frames, _, _ = read_input(target.capture)
        library = dpdk_library(frames, settings)
        assert [(e.segs, e.frame) for e in golden.entries] == [(len(p.covers), min(p.covers) + 1) for p in library]
        # the model gives the library's packets, byte for byte: the check passes
        checked = check_target(target)
        assert checked.status == PASS and checked.packets == len(library), checked.differences[:1]
        # an update without --from-library keeps the library's golden
        assert check_target(target, update=True).status == UNCHANGED


def test_from_library_golden_is_kept_and_fails_when_the_model_disagrees(tmp_path, dpdk_library):
    capture = bulk_with_push(tmp_path)
    r = run("check", "--update", "--from-library", capture, "--stack", "dpdk", "--burst", "4")
    assert r.returncode == 0 and "written" in r.stdout, r.stdout + r.stderr
    golden = tmp_path / "push.gro"
    assert header(golden, "origin").startswith("grotool dpdk librte_gro 22.11")
    assert [line.split("  ")[3:6] for line in golden_lines(golden)] == [
        ["segs 4", "frame 1", "-"], ["segs 1", "frame 5", "-"], ["segs 2", "frame 7", "-"],
        ["segs 1", "frame 6", "-"]]
    # the library's expectation, edited as if the library had merged frames 5 and 7-8: the model disagrees
    text = golden.read_text()
    rows = golden_lines(golden)
    golden.write_text(text.replace(rows[1] + "\n" + rows[2] + "\n", "").replace("# packets: 4", "# packets: 2"))
    before = golden.read_bytes()
    r = run("check", "--update", capture)
    assert r.returncode == 1 and "kept" in r.stdout
    assert "regenerate it from the library with --from-library" in r.stdout
    assert golden.read_bytes() == before
    r = run("check", "--update", "--from-library", capture)
    assert r.returncode == 0 and "updated" in r.stdout
    assert run("check", capture).returncode == 0


def test_from_library_travels_in_a_check_job(tmp_path, dpdk_library):
    from grotool.check import Origin

    capture = bulk_with_push(tmp_path)
    target = Target(str(capture), str(tmp_path / "push.gro"))
    origin = Origin(str(tmp_path), True, False)
    result = check_job((target, True, DpdkSettings(burst=4), False, origin, True))
    assert result.status == WRITTEN
    assert Golden.load(target.golden).origin == ORIGIN_LIBRARY


def test_a_new_expectation_without_reasons_is_compared_without_them():
    """--update --from-library (or --from-kernel) over a golden with reasons: the reasons
    the library cannot give are no difference; the bytes still are."""
    from grotool.check import Entry

    model = Entry("tcp a > b", 1, 10, 1, 1, "dpdk_burst_end", "0" * 12)
    assert diff_entries([model], [Entry("tcp a > b", 1, 10, 1, 1, "-", "0" * 12)]) == []
    assert len(diff_entries([model], [Entry("tcp a > b", 1, 10, 1, 1, "-", "1" * 12)])) == 1
