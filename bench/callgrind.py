"""Instructions counted by valgrind's callgrind, for bench.py --instructions.

Method (docs/performance.md): ``PYTHONHASHSEED=0 valgrind --tool=callgrind``
of a grotool command on a one-packet input and on an N-packet input of the
same kind; the one-packet run is start-up, and (N-packet run - one-packet
run) / (N - 1) is the instructions per packet.  Callgrind counts the process
it starts (every thread of it), not programs that process execs, so the
command must start grotool's interpreter itself: see ``valgrind_command``.
"""

from __future__ import annotations

import os
import shutil
import subprocess

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "busybox"}
ASK_EXECUTABLE = "import sys; print(sys.executable)"


def callgrind_total(path: str) -> int:
    """The instructions (event ``Ir``) of one callgrind output file, read from
    its ``totals:`` line (``summary:`` where there is none)."""
    events = totals = summary = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:"):
                totals = line.split()[1:]
            elif line.startswith("summary:"):
                summary = line.split()[1:]
    counts = totals if totals is not None else summary
    if events is None or "Ir" not in events or counts is None or len(counts) <= events.index("Ir"):
        raise ValueError(f"{path}: no instruction total (events:/totals: lines) in this callgrind output")
    return int(counts[events.index("Ir")])


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _find(word: str, cwd: str) -> str | None:
    if "/" in word:
        path = os.path.join(cwd, word)
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(word)


class CannotCount(Exception):
    """The build's command cannot be run under callgrind as given (the message says why)."""


def valgrind_command(cmd: list, cwd: str) -> tuple:
    """(argv, environment additions) that start the build ``cmd`` as one
    process callgrind can count.  A leading ``env NAME=VALUE ...`` becomes
    environment; a script whose ``#!`` names a binary (a console script such as
    /venv/bin/grotool) becomes that binary running the script; a shell-script
    wrapper of Python (a pyenv shim) used as ``SHIM -m ...`` becomes the
    interpreter it starts (its ``sys.executable``).  Any other shell script
    raises CannotCount: callgrind would count the shell, not grotool."""
    words = list(cmd)
    env = {}
    if words and os.path.basename(words[0]) == "env":
        words.pop(0)
        while words and "=" in words[0] and not words[0].startswith("-"):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words and words[0].startswith("-"):
            raise CannotCount(f"env option {words[0]!r}: only NAME=VALUE assignments are understood")
    if not words:
        raise CannotCount("no program to run")
    program, rest = words[0], words[1:]
    path = _find(program, cwd)
    if path is None:
        raise CannotCount(f"{program}: not found")
    if _is_elf(path):
        return [path, *rest], env
    with open(path, "rb") as f:
        first = f.readline(512)
    if not first.startswith(b"#!"):
        raise CannotCount(f"{path}: neither a binary nor a #! script")
    interpreter, *interpreter_args = first[2:].decode(errors="replace").split()
    if os.path.basename(interpreter) == "env" and interpreter_args:
        interpreter = shutil.which(interpreter_args.pop(0)) or interpreter
    if os.path.basename(os.path.realpath(interpreter)) not in SHELLS and _is_elf(interpreter):
        return [interpreter, *interpreter_args, path, *rest], env
    if rest[:1] == ["-m"]:
        # a Python wrapper (pyenv shim): ask it which interpreter it runs
        try:
            said = subprocess.run([path, "-c", ASK_EXECUTABLE], capture_output=True, text=True, timeout=60,
                                  cwd=cwd, env={**os.environ, **env}).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            said = ""
        if said and _is_elf(said):
            return [said, *rest], env
    raise CannotCount(f"{path} is a shell script (a pyenv shim or other wrapper): callgrind would count "
                      "the shell, not grotool; give the interpreter itself in the build "
                      "(python -c 'import sys; print(sys.executable)' prints it)")


def count_instructions(argv: list, env: dict, cwd: str, out_file: str) -> int:
    """Instructions of one run of ``argv`` under callgrind (PYTHONHASHSEED=0)."""
    run_env = {**os.environ, **env, "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", *argv],
                       cwd=cwd, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        said = r.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise SystemExit(f"valgrind {' '.join(argv)} failed with exit code {r.returncode}: " + " / ".join(said))
    try:
        return callgrind_total(out_file)
    finally:
        os.unlink(out_file)
