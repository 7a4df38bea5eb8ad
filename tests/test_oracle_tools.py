"""The helpers the fetching oracles share (grotool/oracle/tools.py): one cache
rule and one way to run an outside tool, for the kernel VM and for librte_gro."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grotool.dpdk import oracle as dpdk_oracle
from grotool.errors import EnvironmentProblem
from grotool.oracle import vm
from grotool.oracle.tools import cache_dir, run_tool

ROOT = Path(__file__).resolve().parent.parent


def test_cache_dir_override_then_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.setenv("GROTOOL_DPDK_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dpdk_oracle.cache_dir() == tmp_path / "mine"
    assert vm.cache_dir() == tmp_path / "xdg" / "grotool" / "vm"
    monkeypatch.delenv("GROTOOL_DPDK_CACHE")
    assert dpdk_oracle.cache_dir() == tmp_path / "xdg" / "grotool" / "dpdk"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir("dpdk", "GROTOOL_DPDK_CACHE") == tmp_path / "home" / ".cache" / "grotool" / "dpdk"
    assert vm.cache_dir() == tmp_path / "home" / ".cache" / "grotool" / "vm"


def test_run_tool_says_what_failed_in_one_line(tmp_path):
    script = tmp_path / "tool"
    script.write_text("#!/bin/sh\necho 'Reading package lists...' >&2\necho 'E: Unable to locate package x' >&2\n"
                      "echo 'a later remark' >&2\nexit 100\n")
    script.chmod(0o755)
    with pytest.raises(EnvironmentProblem) as caught:
        run_tool([str(script), "x"], "downloading x")
    assert str(caught.value) == f"downloading x: '{script}' failed: E: Unable to locate package x"
    with pytest.raises(EnvironmentProblem, match=r"^building: cannot run '/no/such/cc': No such file or directory$"):
        run_tool(["/no/such/cc"], "building")
    with pytest.raises(EnvironmentProblem, match=r"^waiting: 'sleep' did not finish within 0.2 s$"):
        run_tool(["sleep", "5"], "waiting", timeout=0.2)
    assert run_tool(["echo", "ok"], "echoing").stdout == "ok\n"


def test_a_failed_dpdk_download_is_one_line_and_exit_4_and_leaves_no_partial_cache(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "apt-get"
    fake.write_text("#!/bin/sh\necho 'E: Failed to fetch http://deb.debian.org/x.deb  404  Not Found' >&2\nexit 100\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "GROTOOL_DPDK_CACHE": str(cache),
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "grotool", "dpdk", str(ROOT / "captures" / "mixed.pcap"),
                        str(tmp_path / "out.pcap")], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 4, r.stderr
    assert r.stderr.strip().splitlines() == [
        "grotool: error: downloading DPDK 22.11 (apt-get download): 'apt-get' failed: "
        "E: Failed to fetch http://deb.debian.org/x.deb  404  Not Found"]
    assert [p.name for p in cache.iterdir()] == [".lock"]
    assert not (tmp_path / "out.pcap").exists()
