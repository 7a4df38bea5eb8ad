"""The progress bar: only on a terminal, only for runs longer than about a second, never with -q."""

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.cli import progress as progress_mod
from grotool.engine.config import Settings
from grotool.io.capture import PcapWriter, read_capture
from grotool.replay import replay

ROOT = Path(__file__).resolve().parent.parent

# grotool's CLI with the bar allowed from the first update (no one-second wait)
NO_DELAY = """
import sys
import grotool.cli.progress as p
p.SHOW_AFTER_SECONDS = 0.0
from grotool.cli import main
sys.argv = ["grotool"] + sys.argv[1:]
main()
"""


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory):
    """bulk-4flows repeated 20 times (8000 frames), timestamps moved on each time."""
    path = tmp_path_factory.mktemp("progress") / "big.pcap"
    linktype, records = read_capture(str(ROOT / "captures" / "bulk-4flows.pcap"))
    with PcapWriter(str(path), linktype) as w:
        for rep in range(20):
            for ts, data, wirelen in records:
                w.write(ts + rep * 10_000_000, data, wirelen)
    return path


def run_on_terminal(*args):
    """Run with stdout and stderr on a pseudo-terminal; returns (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-c", NO_DELAY, *map(str, args)], stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm", "COLUMNS": "160"})
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out.decode(errors="replace")


def test_not_a_terminal_prints_nothing_extra(big_capture, tmp_path):
    r = subprocess.run([sys.executable, "-c", NO_DELAY, "replay", "-q", big_capture, tmp_path / "o.pcap"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = subprocess.run([sys.executable, "-c", NO_DELAY, "replay", big_capture, tmp_path / "o.pcap", "--top", "1"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and r.stderr == ""
    assert "frames/s" not in r.stdout and "\x1b" not in r.stdout


def test_terminal_shows_the_bar(big_capture, tmp_path):
    code, screen = run_on_terminal("replay", big_capture, tmp_path / "o.pcap", "--top", "1")
    assert code == 0
    assert "frames/s" in screen and "replay" in screen
    assert "frames" in screen


def test_terminal_with_quiet_shows_nothing(big_capture, tmp_path):
    code, screen = run_on_terminal("replay", "-q", big_capture, tmp_path / "o.pcap")
    assert (code, screen) == (0, "")


def test_bar_waits_about_a_second(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: clock[0])
    started = []
    monkeypatch.setattr(progress_mod.ProgressBar, "_start", lambda self: started.append(1) or setattr(
        self, "_progress", _Recorder()))
    bar = progress_mod.ProgressBar(True, 1000)
    bar.update(10, 100)
    clock[0] += 0.5
    bar.update(20, 200)
    assert started == []
    clock[0] += 0.6
    bar.update(30, 300)
    assert started == [1]
    assert bar._progress.calls[-1]["completed"] == 300 and bar._progress.calls[-1]["frames"] == 30
    disabled = progress_mod.ProgressBar(False, 1000)
    clock[0] += 10
    disabled.update(1, 1)
    assert disabled._progress is None


class _Recorder:
    def __init__(self):
        self.calls = []

    def update(self, task, **fields):
        self.calls.append(fields)

    def stop(self):
        pass


def test_replay_reports_progress_every_2048_frames(big_capture):
    seen = []
    replay(str(big_capture), None, Settings(device="veth"), progress=lambda frames, reader: seen.append(frames))
    assert len(seen) == 3 and all(2048 * (k + 1) <= f < 2048 * (k + 1) + 64 for k, f in enumerate(seen))


def test_check_on_a_terminal_shows_the_bar_and_not_with_q(big_capture):
    assert subprocess.run([sys.executable, "-m", "grotool", "check", "-q", "--update", str(big_capture)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode == 0
    code, screen = run_on_terminal("check", big_capture)
    assert code == 0
    assert "check big.pcap" in screen and "frames/s" in screen
    assert "1 capture: 1 passed, 0 failed, 0 unreadable or missing" in screen
    code, screen = run_on_terminal("check", "-q", big_capture)
    assert code == 0
    assert screen.strip() == "1 capture: 1 passed, 0 failed, 0 unreadable or missing"
