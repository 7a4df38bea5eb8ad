"""grotool check --jobs/--scheduler: a bar of completed captures fed by the
executor's progress(done, total) callback, drawn on standard error only on a
terminal and never with -q; results, goldens and the JUnit report are the same
whatever runs the checks and whether or not the bar is drawn."""

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.check import ERROR, FAIL, MISSING, PASS, WRITTEN, check_all, check_target, find_targets
from grotool.executor import Executor, make_executor
from test_check_progress import NO_DELAY, run_on_terminal

ROOT = Path(__file__).resolve().parent.parent
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
JUNIT_TIME = re.compile(rb' time="[0-9.]+"')
SUMMARY = "9 captures: 4 passed, 1 failed, 4 unreadable or missing"


@pytest.fixture
def folder(tmp_path):
    """The bundled captures and goldens (4 pass), selftest-ipv4 under
    selftest-ipv6's golden (fail), two real captures without a golden, an
    empty file and a file that is no capture, both with a golden (4 unreadable
    or missing): 9 targets."""
    caps = tmp_path / "caps"
    caps.mkdir()
    for name in ("bulk-4flows", "mixed", "selftest-ipv4", "selftest-ipv6"):
        for suffix in (".pcap", ".gro"):
            shutil.copy(ROOT / "captures" / (name + suffix), caps / (name + suffix))
    shutil.copy(ROOT / "captures" / "selftest-ipv4.pcap", caps / "altered.pcap")
    shutil.copy(ROOT / "captures" / "selftest-ipv6.gro", caps / "altered.gro")
    for name in ("real-bulk-ipv4.pcap", "real-parallel4-ipv4.pcap"):
        shutil.copy(ROOT / "tests" / "data" / name, caps / name)
    (caps / "empty.pcap").write_bytes(b"")
    shutil.copy(ROOT / "captures" / "mixed.gro", caps / "empty.gro")
    (caps / "garbage.pcap").write_bytes(b"not a capture at all\n")
    shutil.copy(ROOT / "captures" / "mixed.gro", caps / "garbage.gro")
    return caps


def _comparable(results):
    """Everything a result says except how long it took."""
    return [{k: v for k, v in dataclasses.asdict(r).items() if k != "seconds"} for r in results]


@pytest.mark.parametrize("jobs", [1, 2])
def test_check_all_counts_captures_and_changes_nothing(folder, jobs):
    targets = find_targets([str(folder)])
    assert len(targets) == 9
    seen = []
    with make_executor(jobs) as ex:
        watched = check_all(targets, ex, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 9) for k in range(1, 10)]
    serial = [check_target(t) for t in targets]
    assert _comparable(watched) == _comparable(serial)
    by_name = {os.path.basename(r.capture or r.golden): r.status for r in watched}
    assert by_name == {"altered.pcap": FAIL, "bulk-4flows.pcap": PASS, "garbage.pcap": ERROR, "mixed.pcap": PASS,
                       "empty.pcap": ERROR, "real-bulk-ipv4.pcap": MISSING, "real-parallel4-ipv4.pcap": MISSING,
                       "selftest-ipv4.pcap": PASS, "selftest-ipv6.pcap": PASS}


def test_check_all_update_writes_the_same_goldens_with_jobs_1_and_2(folder, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    written = {}
    for jobs, where in ((1, folder), (2, other)):
        seen = []
        with make_executor(jobs) as ex:
            results = check_all(find_targets([str(where)]), ex, update=True,
                                progress=lambda done, total: seen.append((done, total)))
        assert seen == [(k, 9) for k in range(1, 10)]
        assert [r.status for r in results if r.status == WRITTEN] == [WRITTEN, WRITTEN]
        written[jobs] = {p.name: p.read_bytes() for p in sorted(where.glob("*.gro"))}
    assert len(written[1]) == 9 and written[1] == written[2]
    assert written[1]["real-bulk-ipv4.gro"].startswith(b"# grotool.golden/2\n")
    # the altered capture's golden was rewritten from its own replay
    assert written[1]["altered.gro"] == written[1]["selftest-ipv4.gro"].replace(b"selftest-ipv4", b"altered")


def test_dask_check_counts_completed_captures(folder):
    import distributed  # the test extra brings it: a missing Dask fails here, never skips

    targets = find_targets([str(folder)])
    seen = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_port=0) as cluster:
        with make_executor(scheduler=cluster.scheduler_address) as ex:
            results = check_all(targets, ex, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 9) for k in range(1, 10)]
    assert _comparable(results) == _comparable(check_all(targets, Executor()))


def _grotool_piped(*args):
    """The CLI with the bar allowed at once, standard output and error piped."""
    return subprocess.run([sys.executable, "-c", NO_DELAY, *map(str, args)], capture_output=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160"})


def _junit(path):
    return JUNIT_TIME.sub(b"", path.read_bytes())


def test_piped_check_jobs_shows_no_progress(folder, tmp_path):
    serial = _grotool_piped("check", folder, "--junit", tmp_path / "serial.xml")
    assert serial.returncode == 3 and serial.stderr == b""
    assert serial.stdout.decode().endswith(SUMMARY + "\n")
    for jobs in ("2", "3"):
        r = _grotool_piped("check", folder, "--jobs", jobs, "--junit", tmp_path / f"jobs{jobs}.xml")
        assert (r.returncode, r.stdout, r.stderr) == (3, serial.stdout, b"")
        assert b"\x1b" not in r.stdout and b"/9 captures" not in r.stdout
        assert _junit(tmp_path / f"jobs{jobs}.xml") == _junit(tmp_path / "serial.xml")
    r = _grotool_piped("check", folder, "-q", "--jobs", "2")
    assert (r.returncode, r.stdout, r.stderr) == (3, b"", (SUMMARY + "\n").encode())


def test_terminal_check_jobs_counts_captures_and_prints_the_same(folder, tmp_path):
    piped = _grotool_piped("check", folder, "--jobs", "2", "--junit", tmp_path / "piped.xml")
    assert piped.returncode == 3
    code, screen = run_on_terminal("check", folder, "--jobs", "2", "--junit", tmp_path / "tty.xml")
    assert code == 3
    plain = ESCAPE.sub("", screen).replace("\r\n", "\n")
    counts = [int(n) for n in re.findall(r"check .*?(\d+)/9 captures", plain)]
    assert counts and counts == sorted(counts) and counts[-1] <= 9, screen
    # the bar is gone before the report, which is the piped run's
    assert plain.endswith(piped.stdout.decode()), screen
    assert _junit(tmp_path / "tty.xml") == _junit(tmp_path / "piped.xml")


def test_terminal_check_update_jobs_writes_the_piped_goldens(folder, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(folder, other)
    assert _grotool_piped("check", "--update", "--device", "veth", folder, "--jobs", "2").returncode == 3
    code, screen = run_on_terminal("check", "--update", "--device", "veth", other, "--jobs", "2")
    assert code == 3
    assert re.search(r"check .*?\d+/9 captures", ESCAPE.sub("", screen)), screen
    piped = {p.name: p.read_bytes() for p in sorted(folder.glob("*.gro"))}
    assert len(piped) == 9
    assert piped == {p.name: p.read_bytes() for p in sorted(other.glob("*.gro"))}


def test_terminal_check_jobs_with_quiet_shows_only_the_summary(folder):
    code, screen = run_on_terminal("check", folder, "-q", "--jobs", "2")
    assert (code, screen) == (3, SUMMARY + "\r\n")
