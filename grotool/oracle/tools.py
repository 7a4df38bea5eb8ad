"""What the oracles that fetch and build on first use share (the kernel VM,
grotool.oracle.vm; DPDK's librte_gro, grotool.dpdk.oracle): where they keep
it between runs, and running an outside tool as one line of error on failure."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List

from ..errors import EnvironmentProblem

# the lines of a failing tool's output worth showing first (apt, dpkg, depmod, cc)
_ERROR_LINE_PREFIXES = ("E:", "dpkg", "depmod", "error", "fatal")


def cache_dir(kind: str, override_env: str) -> Path:
    """``$override_env``, else ``$XDG_CACHE_HOME/grotool/KIND``, else ``~/.cache/grotool/KIND``."""
    if os.environ.get(override_env):
        return Path(os.environ[override_env])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grotool" / kind


def run_tool(args: List[str], what: str, *, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a tool to completion (no stdin, output captured); EnvironmentProblem
    (exit 4) saying ``what`` was being done and the tool's own error line when it
    cannot run, fails or outlasts ``timeout``."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"{what}: '{args[0]}' did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise EnvironmentProblem(f"{what}: cannot run '{args[0]}': {exc.strerror}") from None
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        err = [ln for ln in lines if ln.startswith(_ERROR_LINE_PREFIXES)] or lines
        raise EnvironmentProblem(f"{what}: '{args[0]}' failed: {err[-1] if err else f'exit {proc.returncode}'}")
    return proc
