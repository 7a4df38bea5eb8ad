"""compare and kernel commands: exit codes and one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grotool import scenarios as S

ROOT = Path(__file__).resolve().parent.parent


def run(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *args], capture_output=True, cwd=ROOT)


@pytest.fixture
def two_results(tmp_path):
    frames = [S.tcp_frame(4, seq=100 + i * 1448, payload=1448, ip_id=i, flags="PA" if i == 9 else "A")
              for i in range(20)]
    src = tmp_path / "in.pcap"
    S.write_pcap(str(src), frames)
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    assert run("replay", "-q", "--device", "veth", str(src), str(a), "--packets", str(tmp_path / "a.jsonl")).returncode == 0
    # --no-gro delivers all 20 frames alone: a different GRO result for the same input
    assert run("replay", "-q", "--no-gro", str(src), str(b), "--packets", str(tmp_path / "b.jsonl")).returncode == 0
    return tmp_path, a, b


def test_compare_identical_exit_0(two_results):
    tmp, a, _ = two_results
    r = run("compare", str(a), str(a), "--json", str(tmp / "c.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp / "c.json").read_text())
    assert doc["schema"] == "grotool.compare/1" and doc["identical"] is True


def test_compare_different_exit_1_with_segments_from_sidecars(two_results):
    tmp, a, b = two_results
    r = run("compare", "--order", str(a), str(b), "--json", "-", "-q")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["identical"] is False and doc["compared"]["segments"] is True
    flow = doc["flows"][0]
    assert flow["status"] == "different" and (flow["packets_a"], flow["packets_b"]) == (2, 20)


def test_compare_unreadable_exit_3(tmp_path, two_results):
    _, a, _ = two_results
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"not a capture at all")
    r = run("compare", str(a), str(bad))
    assert r.returncode == 3
    lines = r.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "bad.pcap" in lines[0]


@pytest.mark.kernel
def test_kernel_bad_input_exit_3(tmp_path):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"\xd4\xc3\xb2\xa1" + b"\0" * 3)
    r = run("kernel", str(bad), str(tmp_path / "o.pcap"))
    assert r.returncode == 3
    assert len(r.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "o.pcap").exists()


@pytest.mark.kernel
def test_kernel_then_compare_with_simulation(tmp_path):
    src = ROOT / "tests" / "data" / "real-bulk-ipv6.pcap"
    k, kj, s, sj = tmp_path / "k.pcap", tmp_path / "k.json", tmp_path / "s.pcap", tmp_path / "s.jsonl"
    assert run("kernel", "-q", str(src), str(k), "--json", str(kj)).returncode == 0
    side = json.loads(kj.read_text())
    assert side["schema"] == "grotool.kernel/1" and side["reliable"] is True
    assert sum(p["gso_segs"] for p in side["packets"]) == 285
    assert sorted(i for p in side["packets"] for i in p["covers"]) == list(range(285))
    assert run("replay", "-q", "--device", "veth", str(src), str(s), "--packets", str(sj)).returncode == 0
    r = run("compare", "--order", str(k), str(s), "--segs-a", str(kj), "--segs-b", str(sj))
    assert r.returncode == 0, r.stdout.decode()[-2000:]


# A quiet replay renders nothing, so it never loads rich (about a sixth of the
# start-up of a small replay); rendering the table does load it.
_LOADS_RICH = """
import sys
from grotool.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(any(name == "rich" or name.startswith("rich.") for name in sys.modules))
"""


@pytest.mark.parametrize("quiet, loads_rich", [(True, "False"), (False, "True")])
def test_quiet_replay_does_not_load_rich(quiet, loads_rich):
    args = ["replay", *(["-q"] if quiet else []), "captures/bulk-4flows.pcap"]
    r = subprocess.run([sys.executable, "-c", _LOADS_RICH, *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == loads_rich


def test_the_command_line_does_not_import_the_python_api():
    code = _LOADS_RICH.replace('name == "rich" or name.startswith("rich.")', 'name == "grotool.api"')
    r = subprocess.run([sys.executable, "-c", code, "replay", "-q", "captures/bulk-4flows.pcap"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
    # the API is still there on first use
    r = subprocess.run([sys.executable, "-c", "import grotool; print(grotool.Replay.__module__)"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.stdout.strip() == "grotool.api", r.stderr


@pytest.mark.parametrize("stack, loads_model", [("linux", "False"), ("dpdk", "True")])
def test_a_linux_replay_does_not_import_the_dpdk_model(stack, loads_model):
    """replay's --dpdk-* options are built from grotool.dpdk.params; the model
    (its dataclasses) is imported only for --stack dpdk."""
    code = _LOADS_RICH.replace('name == "rich" or name.startswith("rich.")', 'name == "grotool.dpdk.engine"')
    r = subprocess.run([sys.executable, "-c", code, "replay", "-q", "--stack", stack, "captures/bulk-4flows.pcap"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == loads_model


def test_the_version_imports_neither_the_dissector_nor_rich():
    """--version (like reasons, kernels, --help) names no flow: the flow namer
    and its dissector are imported by the commands that replay."""
    code = _LOADS_RICH.replace('any(name == "rich" or name.startswith("rich.") for name in sys.modules)',
                               'sorted({"grotool.dissect", "grotool.report.flows", "rich"} & set(sys.modules))')
    r = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_a_replay_does_not_make_the_dissection_record_types():
    """Naming flows walks the dissector without records: dissect()'s record
    types (grotool.dissect_records: 5.9 M instructions of named tuples) are made
    on first use, and stay grotool.dissect's attributes."""
    code = _LOADS_RICH.replace('any(name == "rich" or name.startswith("rich.") for name in sys.modules)',
                               '"grotool.dissect_records" in sys.modules')
    r = subprocess.run([sys.executable, "-c", code, "replay", "-q", "captures/mixed.pcap"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
    probe = ("import sys, grotool.dissect as d; assert 'grotool.dissect_records' not in sys.modules; "
             "from grotool.dissect import Checksum, Dissection, Layer; import grotool.dissect_records as r; "
             "assert (Checksum, Dissection, Layer) == (r.Checksum, r.Dissection, r.Layer); "
             "assert type(d.dissect(b'')) is Dissection; "
             "print(hasattr(d, 'Tunnel'), hasattr(d, 'no_such_name'))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True False"


# standard modules a replay uses only in some runs (tempfile: the atomic write of
# an output file; ipaddress: naming an unusual IPv6 address) or never (gzip: the
# reader decompresses with zlib itself)
_OCCASIONAL_MODULES = ("gzip", "importlib.abc", "importlib.resources", "ipaddress", "tempfile")


@pytest.mark.parametrize("output, loaded", [(None, []), ("out.pcap", ["tempfile"])])
def test_a_replay_imports_occasional_modules_only_when_used(tmp_path, output, loaded):
    """Checked without site (-S): a site may import them itself (certifi's .pth
    imports importlib.resources, and with it tempfile and ipaddress)."""
    import site

    code = _LOADS_RICH.replace('any(name == "rich" or name.startswith("rich.") for name in sys.modules)',
                               f'sorted(set({_OCCASIONAL_MODULES!r}) & set(sys.modules))')
    args = ["replay", "-q", "captures/bulk-4flows.pcap", *([str(tmp_path / output)] if output else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *site.getsitepackages()]))
    r = subprocess.run([sys.executable, "-S", "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(loaded)


_COMMAND_MODULES = ("check_cmd", "compare_cmd", "dpdk_cmd", "explain_cmd", "kernel_cmd", "kernels_cmd", "plot_cmd",
                    "reasons_cmd", "split_cmd", "sweep_cmd")


@pytest.mark.parametrize("args, loaded", [
    (["replay", "-q", "captures/bulk-4flows.pcap"], []),
    (["sweep", "--help"], ["sweep_cmd"]),
    (["--help"], list(_COMMAND_MODULES)),
])
def test_command_modules_are_imported_when_named(args, loaded):
    """A replay sets up no other command (their modules are imported when the
    command is named or listed by --help)."""
    code = _LOADS_RICH.replace('print(any(name == "rich" or name.startswith("rich.") for name in sys.modules))',
                               f'print(sorted(m for m in {_COMMAND_MODULES!r} if "grotool.cli." + m in sys.modules))')
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == str(loaded)


def test_help_lists_every_command_in_order():
    r = subprocess.run([sys.executable, "-m", "grotool", "--help"], capture_output=True, text=True, cwd=ROOT)
    listed = [line.split()[0] for line in r.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()]
    assert listed == ["check", "compare", "dpdk", "explain", "kernel", "kernels", "plot", "reasons", "replay", "split",
                      "sweep"]


def test_the_program_tunes_the_cycle_collector_and_main_does_not():
    code = """
import gc, sys
from grotool.cli import main, run
sys.argv = ["grotool", "reasons"]
before = gc.get_threshold()
try:
    main([\"reasons\"])
except SystemExit:
    pass
print(gc.get_threshold() == before, gc.get_freeze_count())
try:
    run()
except SystemExit:
    pass
print(gc.get_threshold(), gc.get_freeze_count() > 1000)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stdout.splitlines() if line.startswith(("True", "False", "("))] == \
        ["True 0", "(100000, 10, 10) True"]
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="console_scripts") if e.name == "grotool"] == ["grotool.__main__:main"]


def test_the_program_imports_with_the_collector_off_and_replays_with_it_on():
    code = """
import gc, sys
import grotool.cli
seen = []
real_run = grotool.cli.run
def run():
    seen.append(gc.isenabled())        # while the CLI was imported and up to run()
    try:
        real_run()
    except SystemExit:
        pass
    seen.append(gc.isenabled())
grotool.cli.run = run
gc.enable()
sys.argv = ["grotool", "reasons"]
from grotool.__main__ import main
main()
print(seen, gc.get_threshold())
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[False, True] (100000, 10, 10)"
