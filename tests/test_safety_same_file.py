"""An output that is the input file is refused before anything is read (issue 32
§3): the same path, a symbolic link or a hard link to it; one line, exit 5, and
the capture is left as it was."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXIT_OUTPUT = 5
ROOT = Path(__file__).resolve().parent.parent
MIXED = ROOT / "captures" / "mixed.pcap"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "grotool", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.fixture
def capture(tmp_path):
    path = tmp_path / "x.pcap"
    shutil.copyfile(MIXED, path)
    return path


def refused(r, capture):
    assert r.returncode == EXIT_OUTPUT, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "refusing to overwrite it" in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert capture.read_bytes() == MIXED.read_bytes()


@pytest.mark.parametrize("args", [
    ("replay", "{x}", "{x}"),
    ("replay", "-q", "{x}", "--json", "{x}"),
    ("replay", "-q", "{x}", "--packets", "{x}"),
    ("replay", "-q", "{x}", "{link}"),
    ("replay", "-q", "{x}", "{hard}"),
    ("replay", "-q", "{x}", "--plot", "{x}"),
    ("split", "{x}", "{x}"),
    ("split", "{x}", "--json", "{link}"),
    ("plot", "{x}", "{hard}"),
    ("explain", "{x}", "--jsonl", "{x}"),
    ("compare", "{x}", "{other}", "--json", "{x}"),
    ("sweep", "{x}", "--set", "budget=8,64", "--json", "{x}"),
    ("kernel", "{x}", "{x}"),
    ("kernel", "{x}", "-", "--json", "{link}"),
])
def test_output_that_is_the_input_is_refused(tmp_path, capture, args):
    link = tmp_path / "link.pcap"
    link.symlink_to(capture)
    hard = tmp_path / "hard.pcap"
    os.link(capture, hard)
    other = tmp_path / "other.pcap"
    shutil.copyfile(MIXED, other)
    r = run_cli(*[a.format(x=capture, link=link, hard=hard, other=other) for a in args])
    refused(r, capture)
    assert link.is_symlink() and os.stat(hard).st_ino == os.stat(capture).st_ino


def test_split_sidecar_given_as_output_is_refused(tmp_path, capture):
    segs = tmp_path / "x.segs.json"
    r = run_cli("replay", "-q", capture, "--packets", segs)
    assert r.returncode == 0, r.stderr
    before = segs.read_bytes()
    r = run_cli("split", capture, "--segs", segs, "--json", segs)
    assert r.returncode == EXIT_OUTPUT and "refusing to overwrite it" in r.stderr
    assert segs.read_bytes() == before


def test_library_replay_refuses_its_input(capture):
    from grotool.engine import Settings
    from grotool.errors import OutputError
    from grotool.replay import replay
    from grotool.split import split_capture

    with pytest.raises(OutputError, match="refusing to overwrite it"):
        replay(str(capture), str(capture), Settings())
    with pytest.raises(OutputError, match="refusing to overwrite it"):
        split_capture(str(capture), str(capture))
    assert capture.read_bytes() == MIXED.read_bytes()


def test_a_copy_is_not_the_input(tmp_path, capture):
    """Same bytes, another file: written as usual."""
    copy = tmp_path / "copy.pcap"
    shutil.copyfile(capture, copy)
    r = run_cli("replay", "-q", capture, copy)
    assert r.returncode == 0, r.stderr
    assert copy.read_bytes() != MIXED.read_bytes()


def test_dev_null_as_output_of_a_dev_null_input_is_not_refused_as_the_same_file():
    """Devices are written in place, never replaced: the same-file rule is about regular files."""
    r = run_cli("replay", "-q", "/dev/null", "/dev/null")
    assert r.returncode == 3 and "refusing" not in r.stderr


def test_check_update_refuses_a_golden_that_is_its_capture(tmp_path, capture):
    """x.gro a symbolic link to x.pcap: --update would write the golden over the capture."""
    (tmp_path / "x.gro").symlink_to(capture)
    r = run_cli("check", "--update", capture)
    refused(r, capture)
    assert "x.gro: cannot write golden: it is the same file as the input" in r.stderr
