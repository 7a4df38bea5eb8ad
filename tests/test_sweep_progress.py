"""grotool sweep's progress: the executors report completed items as
(done, total) from their futures, the CLI draws a bar of completed runs on
standard error only on a terminal and never with -q, and the results are the
same bytes with or without it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.cli import progress as progress_mod
from grotool.engine.config import Settings
from grotool.executor import Executor, ProcessExecutor, make_executor
from grotool.sweep import Axis, run_sweep
from test_check_progress import NO_DELAY, run_on_terminal

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = [str(ROOT / "tests" / "data" / name) for name in ("real-bulk-ipv4.pcap", "real-parallel4-ipv4.pcap")]
AXES = [Axis("--gro-flush-timeout", "gro_flush_timeout", (0, 20000)), Axis("--rx-usecs", "rx_usecs", (8, 32))]
SWEEP_ARGS = ["sweep", *CAPTURES, "--set", "gro-flush-timeout=0,20000", "--set", "rx-usecs=8,32"]


def _failing(x):
    if x in (2, 4):
        raise ValueError(f"item {x}")
    return x


@pytest.mark.parametrize("make", [Executor, lambda: ProcessExecutor(2)], ids=["jobs1", "jobs2"])
def test_executor_reports_each_completed_item(make):
    seen = []
    with make() as ex:
        assert ex.map(abs, [-3, 2, -1, 0, -7], progress=lambda done, total: seen.append((done, total))) == \
            [3, 2, 1, 0, 7]
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]
    seen.clear()
    with make() as ex:
        assert ex.map(abs, [], progress=lambda done, total: seen.append((done, total))) == []
    assert seen == []


def test_process_executor_raises_the_first_failure_in_item_order():
    seen = []
    with ProcessExecutor(2) as ex, pytest.raises(ValueError, match="item 2"):
        ex.map(_failing, [1, 2, 3, 4], progress=lambda done, total: seen.append(done))
    # every item completed (two of them by failing) before the failure is raised
    assert seen == [1, 2, 3, 4]


@pytest.mark.parametrize("jobs", [1, 2])
def test_sweep_progress_counts_runs_and_changes_nothing(jobs):
    seen = []
    with make_executor(jobs) as ex:
        watched = run_sweep(CAPTURES, Settings(), AXES, ex, progress=lambda done, total: seen.append((done, total)))
    # 4 settings x 2 captures
    assert seen == [(k, 8) for k in range(1, 9)]
    assert watched == run_sweep(CAPTURES, Settings(), AXES, Executor())


def test_dask_progress_counts_completed_futures():
    import distributed  # the test extra brings it: a missing Dask fails here, never skips

    seen = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  scheduler_port=0) as cluster:
        with make_executor(scheduler=cluster.scheduler_address) as ex:
            doc = run_sweep(CAPTURES, Settings(), AXES, ex, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(k, 8) for k in range(1, 9)]
    assert doc == run_sweep(CAPTURES, Settings(), AXES, Executor())


def _grotool_no_delay(*args):
    """The CLI with the bar allowed at once, standard output and error piped."""
    return subprocess.run([sys.executable, "-c", NO_DELAY, *map(str, args)], capture_output=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})


def test_not_a_terminal_shows_no_progress(tmp_path):
    for jobs in ("1", "2"):
        r = _grotool_no_delay(*SWEEP_ARGS, "--jobs", jobs)
        assert r.returncode == 0 and r.stderr == b""
        assert b"runs" not in r.stdout and b"\x1b" not in r.stdout
        assert b"grotool sweep: 2 captures, 1007 frames, 4 settings" in r.stdout
    r = _grotool_no_delay(*SWEEP_ARGS, "-q", "--json", tmp_path / "s.json")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")


def test_terminal_shows_completed_runs_and_the_same_bytes(tmp_path):
    piped = _grotool_no_delay(*SWEEP_ARGS, "-q", "--json", tmp_path / "piped.json")
    assert piped.returncode == 0
    for jobs in ("1", "2"):
        code, screen = run_on_terminal(*SWEEP_ARGS, "--jobs", jobs, "--json", tmp_path / f"tty{jobs}.json")
        assert code == 0
        plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
        counts = [int(n) for n in re.findall(r"sweep .*?(\d+)/8 runs", plain)]
        assert counts and counts == sorted(counts) and counts[-1] <= 8, screen
        assert "grotool sweep: 2 captures, 1007 frames, 4 settings" in screen
        assert (tmp_path / f"tty{jobs}.json").read_bytes() == (tmp_path / "piped.json").read_bytes()


def test_terminal_with_quiet_shows_nothing(tmp_path):
    code, screen = run_on_terminal(*SWEEP_ARGS, "-q", "--jobs", "2", "--json", tmp_path / "s.json")
    assert (code, screen) == (0, "")


def test_runs_bar_waits_and_stops_cleanly(monkeypatch):
    shown = []
    monkeypatch.setattr(progress_mod, "SHOW_AFTER_SECONDS", 30.0)
    monkeypatch.setattr(progress_mod.RunsBar, "_show", lambda self: shown.append(1))
    bar = progress_mod.RunsBar(True, 8)
    bar.update(3, 8)
    bar.close()
    assert shown == [] and bar.done == 3
    bar._timer.join(5)
    assert not bar._timer.is_alive()
    # nothing to count, or not wanted: no timer at all
    assert progress_mod.RunsBar(True, 0)._timer is None
    assert progress_mod.RunsBar(False, 8)._timer is None
