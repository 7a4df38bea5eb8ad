"""grotool plot / replay --plot, and the exit-4 path without matplotlib."""

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.engine.config import Settings
from grotool.replay import replay
from grotool.report.plot import PlotCollector, render

ROOT = Path(__file__).resolve().parent.parent
MISSING = ("grotool: error: plotting needs matplotlib, which is not installed "
           "(pip install 'grotool[plot]')\n")

# Runs grotool's CLI with every import of matplotlib failing, as on an install without the extra.
WITHOUT_MATPLOTLIB = """
import sys
class NoMatplotlib:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return None
sys.meta_path.insert(0, NoMatplotlib())
from grotool.cli import main
sys.argv = ["grotool"] + sys.argv[1:]
main()
"""


def run(*args, code=None):
    cmd = [sys.executable, "-c", code, *map(str, args)] if code else [sys.executable, "-m", "grotool", *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def png_size(path):
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_plot_command_writes_a_png(tmp_path):
    out = tmp_path / "mixed.png"
    r = run("plot", "captures/mixed.pcap", out)
    assert r.returncode == 0, r.stderr
    assert png_size(out) == (1320, 1430)
    assert r.stderr == "mixed.png: 318 frames in, 271 packets out, 47 super-packets\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mixed.png"]


def test_replay_plot_svg_has_the_three_panels(tmp_path):
    out = tmp_path / "bulk.svg"
    r = run("replay", "-q", "--device", "veth", "captures/bulk-4flows.pcap", tmp_path / "o.pcap", "--plot", out)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    for text in ("Packet sizes per flow", "Segments per packet: 400 frames in, 73 packets out, ratio 5.48",
                 "Why each packet was delivered, over time", "tcp_ts_changed (55)", "budget_exhausted_all (10)",
                 "tcp 10.1.0.1:40000 &gt; 10.0.0.1:5201  (19 pkts, 17 super)"):
        assert text in svg, text


def test_collector_keeps_what_the_panels_need():
    collector = PlotCollector()
    replay(str(ROOT / "captures" / "bulk-4flows.pcap"), None, Settings(device="veth"), observers=[collector])
    assert collector.packets == 73
    assert sum(collector.segs) == 400
    assert sorted(set(collector.reason)) == ["budget_exhausted_all", "tcp_ack_changed", "tcp_push", "tcp_ts_changed"]
    assert len(collector.flow_names) == 4


def test_empty_replay_still_draws(tmp_path):
    render(PlotCollector(), str(tmp_path / "empty.png"), "nothing")
    assert png_size(tmp_path / "empty.png") == (1320, 1430)


def test_without_matplotlib_plot_exits_4(tmp_path):
    out = tmp_path / "x.png"
    r = run("plot", "captures/mixed.pcap", out, code=WITHOUT_MATPLOTLIB)
    assert (r.returncode, r.stderr, r.stdout) == (4, MISSING, "")
    assert not out.exists()


def test_without_matplotlib_replay_plot_exits_4_before_writing(tmp_path):
    r = run("replay", "captures/mixed.pcap", tmp_path / "o.pcap", "--plot", tmp_path / "x.png",
            code=WITHOUT_MATPLOTLIB)
    assert (r.returncode, r.stderr, r.stdout) == (4, MISSING, "")
    assert list(tmp_path.iterdir()) == []
    # and replay without --plot does not need matplotlib
    r = run("replay", "-q", "captures/mixed.pcap", tmp_path / "o.pcap", code=WITHOUT_MATPLOTLIB)
    assert r.returncode == 0 and (tmp_path / "o.pcap").exists()


def test_unwritable_plot_is_one_line(tmp_path):
    r = run("plot", "captures/mixed.pcap", tmp_path / "no" / "such" / "dir.png")
    assert r.returncode == 5          # an output that cannot be written (issue 32: it was 3, after the replay)
    assert len(r.stderr.splitlines()) == 1 and "cannot write the plot" in r.stderr


def test_plot_output_is_checked_before_the_input_is_read(tmp_path):
    """issue 32: a bad plot path was found after the whole replay (exit 3); now
    first, so a bad input behind it is never read."""
    garbage = tmp_path / "garbage.pcap"
    garbage.write_bytes(b"not a capture at all")
    for args in (("plot", garbage, tmp_path / "no" / "dir.png"),
                 ("replay", "-q", garbage, "--plot", tmp_path / "no" / "dir.png")):
        r = run(*args)
        assert r.returncode == 5, r.stderr
        assert "no" + os.sep + "dir.png: cannot write" in r.stderr and "not a pcap" not in r.stderr


def test_plot_format_is_checked_before_the_replay(tmp_path):
    r = run("plot", "captures/mixed.pcap", tmp_path / "picture.xyz")
    assert r.returncode == 5
    assert "format 'xyz' is not one matplotlib draws" in r.stderr and len(r.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
