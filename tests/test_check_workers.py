"""grotool check on workers that run elsewhere (issue 32 §3): a Dask worker's
working directory is not the one check was started in, and a worker may not
see a file at all.  Relative paths are sent resolved; a file the worker cannot
read is said plainly, not reported as "no golden"."""

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from grotool.check import ERROR, MISSING, PASS, check_all, check_target, find_targets
from grotool.executor import Executor

ROOT = Path(__file__).resolve().parent.parent


class ElsewhereExecutor(Executor):
    """Runs each job in another working directory, as a Dask worker does;
    ``hide`` names files the 'worker' cannot see (moved away while it runs)."""

    def __init__(self, directory, hide=()):
        self.directory = directory
        self.hide = list(hide)

    def map(self, function, items, progress=None):
        here = os.getcwd()
        moved = [(p, Path(str(p) + ".away")) for p in self.hide]
        for path, away in moved:
            path.rename(away)
        os.chdir(self.directory)
        try:
            return [function(item) for item in items]
        finally:
            os.chdir(here)
            for path, away in moved:
                away.rename(path)


@pytest.fixture
def project(tmp_path, monkeypatch):
    caps = tmp_path / "project" / "caps"
    caps.mkdir(parents=True)
    for name in ("mixed", "selftest-ipv4"):
        for suffix in (".pcap", ".gro"):
            shutil.copy(ROOT / "captures" / (name + suffix), caps / (name + suffix))
    (tmp_path / "worker").mkdir()
    monkeypatch.chdir(tmp_path / "project")
    return tmp_path


def _without_time(results):
    return [{k: v for k, v in dataclasses.asdict(r).items() if k != "seconds"} for r in results]


def test_relative_paths_are_checked_by_a_worker_in_another_directory(project):
    targets = find_targets(["caps"])
    assert [t.capture for t in targets] == ["caps/mixed.pcap", "caps/selftest-ipv4.pcap"]
    results = check_all(targets, ElsewhereExecutor(project / "worker"))
    assert [(r.capture, r.golden, r.status) for r in results] == [
        ("caps/mixed.pcap", "caps/mixed.gro", PASS), ("caps/selftest-ipv4.pcap", "caps/selftest-ipv4.gro", PASS)]
    # the same results as checking here, paths as the user gave them
    assert _without_time(results) == _without_time(check_target(t) for t in targets)


def test_a_worker_that_cannot_see_the_golden_says_so(project):
    golden = project / "project" / "caps" / "mixed.gro"
    targets = find_targets(["caps/mixed.pcap"])
    (result,) = check_all(targets, ElsewhereExecutor(project / "worker", hide=[golden]))
    assert result.status == ERROR and result.status != MISSING
    assert result.message.startswith("the golden caps/mixed.gro cannot be read on worker ")
    assert "(No such file or directory), though it can where grotool check runs" in result.message
    assert str(project) not in result.message


def test_a_worker_that_cannot_see_the_capture_says_so(project):
    capture = project / "project" / "caps" / "mixed.pcap"
    (result,) = check_all(find_targets(["caps/mixed.pcap"]), ElsewhereExecutor(project / "worker", hide=[capture]))
    assert result.status == ERROR
    assert result.message.startswith("the capture caps/mixed.pcap cannot be read on worker ")


def test_a_golden_missing_everywhere_is_still_no_golden(project):
    (project / "project" / "caps" / "mixed.gro").unlink()
    (result,) = check_all(find_targets(["caps/mixed.pcap"]), ElsewhereExecutor(project / "worker"))
    assert result.status == MISSING and result.message == \
        "no golden caps/mixed.gro (write one with grotool check --update)"


def test_update_on_a_worker_elsewhere_writes_beside_the_capture(project):
    (project / "project" / "caps" / "mixed.gro").unlink()
    (result,) = check_all(find_targets(["caps/mixed.pcap"]), ElsewhereExecutor(project / "worker"), update=True)
    assert result.status == "written"
    assert (project / "project" / "caps" / "mixed.gro").exists()
    assert not (project / "worker" / "caps").exists()
