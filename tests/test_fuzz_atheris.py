"""The coverage-guided fuzz targets (fuzz/), run for a bounded time: the
capture reader (with the engine behind it) for 20 s, grotool.gso for 10 s; no
finding other than the known ones listed in the reader target, and a real
number of inputs tried."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

atheris = pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.path.join(ROOT, "fuzz", "fuzz_capture_reader.py")
GSO_TARGET = os.path.join(ROOT, "fuzz", "fuzz_gso.py")
SECONDS = int(os.environ.get("GROTOOL_ATHERIS_SECONDS", "20"))


@pytest.mark.parametrize("target, seconds, extra", [
    (TARGET, SECONDS, ["-rss_limit_mb=3072"]),
    (GSO_TARGET, max(1, SECONDS // 2), ["-max_len=4096"]),
], ids=["capture_reader", "gso"])
def test_fuzz_target_runs_clean(tmp_path, target, seconds, extra):
    run = subprocess.run(
        [sys.executable, target, f"-max_total_time={seconds}", "-timeout=20", f"-artifact_prefix={tmp_path}/",
         *extra],
        cwd=tmp_path, capture_output=True, text=True, timeout=seconds * 6 + 60)
    tail = "\n".join(line for line in run.stderr.splitlines() if not line.startswith("INFO: Instrumenting"))[-3000:]
    assert run.returncode == 0, f"fuzz target found something (artifacts in {tmp_path}):\n{tail}"
    done = re.search(r"Done (\d+) runs in", run.stderr)
    assert done, tail
    assert int(done.group(1)) >= 1000, tail
    assert not [p for p in os.listdir(tmp_path) if p.startswith(("crash-", "oom-", "timeout-", "leak-"))]


FINDINGS = os.path.join(ROOT, "fuzz", "findings")


@pytest.mark.parametrize("name", sorted(os.listdir(FINDINGS)))
def test_past_findings_no_longer_fail(tmp_path, name):
    # libFuzzer runs the given files once, strictly (no finding tolerated): each
    # reproducer of a fixed finding now gives a result or a one-line InputError
    run = subprocess.run([sys.executable, TARGET, os.path.join(FINDINGS, name)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "GROTOOL_FUZZ_STRICT": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
