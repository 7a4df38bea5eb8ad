"""Every example in README.md and docs/*.md runs, and prints what it shows.

The convention (also in docs/README.md, for whoever writes a doc):

* A fenced block is run when its language (the first word after the fence)
  is `sh`, `bash`, `shell` or `console` (shell), or `python` (`pycon`).
  Blocks in any other language (`text`, `json`, `yaml`, `c`, none) are
  shown, never run: use them for formats, output on its own and code that
  is not grotool's.
* A shell block whose lines start with `$ ` is a session: each `$ ` command
  (with `\\` continuation lines) runs on its own, as a user's shell runs it
  (a pipe's status is its last command's), and the lines after it, up to the
  next `$ `, are what it must print on standard output, compared line by
  line with trailing spaces dropped; `...` in a shown line matches any
  text (as doctest's ELLIPSIS). Nothing shown means nothing printed.
* A shell block without `$ ` lines is a script: it runs with `bash -e -o
  pipefail`, and every command must exit 0. Output is not compared.
* A `python` block with `>>>` lines is a doctest (ELLIPSIS and
  NORMALIZE_WHITESPACE); one without is executed. A file's python blocks
  share one namespace, in document order.
* Words after the language mark the block:
  - `kernel`: needs root and the real kernel (`grotool kernel`); a pytest
    `kernel` test, so CI (root, GROTOOL_REQUIRE_KERNEL=1) must run it;
  - `exit=N`: the (last) command exits N instead of 0;
  - `needs=TOOL[,TOOL]`: needs those programs (tshark, jq); skipped without
    them, except in CI (GROTOOL_REQUIRE_KERNEL=1), where a missing one fails;
  - `setup`: a README set-up line `pip install ... && COMMAND`: COMMAND runs
    (grotool is already importable here), the install does not;
  - `ci-command`: the command must be the one .ci/run runs, verbatim (the
    suite itself: not run again from here);
  - `no-run: REASON`: not run; the reason is required and printed.
* Examples run in a fresh temporary folder holding a copy of `captures/`
  and `tests/data/` (relative paths as from the repository's root), with
  `grotool`, `python` and `sudo` on PATH running this checkout's grotool
  with this interpreter. Blocks of one file run in document order in the
  same folder, so a later block may use an earlier one's output.

Every `*.md` in docs/ is read, so a new doc's examples run without touching
this file.
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SHELL = {"sh", "bash", "shell", "console"}
PYTHON = {"python", "pycon"}
CI = os.environ.get("GROTOOL_REQUIRE_KERNEL") == "1"


@dataclass
class Example:
    doc: Path
    line: int
    lang: str
    body: str
    kernel: bool = False
    exit_code: int = 0
    needs: list = field(default_factory=list)
    setup: bool = False
    ci_command: bool = False
    no_run: str | None = None

    @property
    def name(self):
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def parse_info(info: str):
    words = info.strip()
    lang, _, rest = words.partition(" ")
    tags = {}
    rest = rest.strip()
    if "no-run:" in rest:
        rest, _, reason = rest.partition("no-run:")
        tags["no_run"] = reason.strip()
    for word in rest.split():
        key, _, value = word.partition("=")
        tags[key] = value
    return lang.lower(), tags


KNOWN_TAGS = {"kernel", "exit", "needs", "setup", "ci-command", "no_run"}


def fenced_blocks(text: str):
    """(first line number, info string, body) of each fenced block, as CommonMark
    reads them: a fence of N backticks or tildes is closed by a line of at least
    N of the same, so blocks shown inside a longer fence are not blocks."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^ {0,3}(`{3,}|~{3,})(.*)$", lines[i])
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2), i
        close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        i += 1
        body = []
        while i < len(lines) and not close.match(lines[i]):
            body.append(lines[i])
            i += 1
        i += 1
        yield start + 1, info, "\n".join(body) + "\n"


def examples_of(doc: Path):
    found = []
    for line, info, body in fenced_blocks(doc.read_text()):
        lang, tags = parse_info(info)
        unknown = set(tags) - KNOWN_TAGS
        assert not unknown, f"{doc.name}:{line}: unknown example tag(s) {sorted(unknown)}"
        if lang not in SHELL | PYTHON:
            continue                           # text, json, yaml, c, ...: shown, never run
        found.append(Example(doc, line, lang, body, kernel="kernel" in tags,
                             exit_code=int(tags.get("exit", 0) or 0),
                             needs=[t for t in tags.get("needs", "").split(",") if t],
                             setup="setup" in tags, ci_command="ci-command" in tags,
                             no_run=tags.get("no_run")))
    return found


ALL = [ex for doc in DOCS for ex in examples_of(doc)]


def _params():
    for ex in ALL:
        marks = [pytest.mark.kernel] if ex.kernel else []
        yield pytest.param(ex, id=ex.name, marks=marks)


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    """One folder per document (blocks of a document share it), with the bundled
    captures and the recorded ones, and a bin folder of wrappers."""
    bin_dir = tmp_path_factory.mktemp("bin")
    wrappers = {
        "grotool": f'exec "{sys.executable}" -m grotool "$@"\n',
        "python": f'exec "{sys.executable}" "$@"\n',
        "python3": f'exec "{sys.executable}" "$@"\n',
        # examples say `sudo grotool kernel`; they run only as root (kernel tests)
        "sudo": 'exec "$@"\n',
    }
    for name, body in wrappers.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    dirs = {}

    def for_doc(doc: Path):
        if doc not in dirs:
            work = tmp_path_factory.mktemp(doc.stem.lower())
            shutil.copytree(ROOT / "captures", work / "captures")
            (work / "tests").mkdir()
            shutil.copytree(ROOT / "tests" / "data", work / "tests" / "data")
            dirs[doc] = work
        return dirs[doc]

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return for_doc, env


def session(body: str):
    """(command, shown output lines) pairs of a `$ ` session."""
    pairs, command, shown = [], None, []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            if command is not None:
                pairs.append((command, shown))
            command, shown = line[2:], []
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
        else:
            assert command is not None, f"output before the first `$ ` command: {line!r}"
            shown.append(line)
        i += 1
    if command is not None:
        pairs.append((command, shown))
    return pairs


def matches(shown: list[str], printed: list[str]) -> bool:
    if len(shown) != len(printed):
        return False
    for want, got in zip(shown, printed):
        want, got = want.rstrip(), got.rstrip()
        if "..." in want:
            pattern = ".*".join(re.escape(part) for part in want.split("..."))
            if not re.fullmatch(pattern, got):
                return False
        elif want != got:
            return False
    return True


def run_shell(script: str, cwd: Path, env: dict, strict: bool = True):
    """A script runs with -e and pipefail; a session's command as a user's shell
    runs it (a pipe's status is its last command's: `| head` may cut the first)."""
    options = ["-e", "-o", "pipefail"] if strict else []
    return subprocess.run(["bash", *options, "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def check_needs(ex: Example):
    missing = [tool for tool in ex.needs if shutil.which(tool) is None]
    if missing:
        if CI:
            pytest.fail(f"{ex.name}: needs {', '.join(missing)}, which .ci/run installs")
        pytest.skip(f"needs {', '.join(missing)} (installed by .ci/run)")


_namespaces: dict = {}


@pytest.mark.parametrize("ex", list(_params()))
def test_example(ex: Example, workdirs):
    for_doc, env = workdirs
    if ex.no_run is not None:
        assert ex.no_run, f"{ex.name}: `no-run:` needs a reason"
        pytest.skip(f"not run: {ex.no_run}")
    if ex.ci_command:
        ci = (ROOT / ".ci" / "run").read_text().splitlines()
        command = ex.body.strip()
        assert command in [line.strip() for line in ci], \
            f"{ex.name}: {command!r} is not a line of .ci/run"
        return
    check_needs(ex)
    cwd = for_doc(ex.doc)
    if ex.lang in PYTHON:
        run_python(ex, cwd)
        return
    body = ex.body
    if ex.setup:
        first, _, rest = body.strip().partition(" && ")
        assert first.startswith("pip install ") and rest and "\n" not in body.strip(), \
            f"{ex.name}: a setup line is `pip install ... && COMMAND`"
        body = rest + "\n"
    pairs = session(body) if any(line.startswith("$ ") for line in body.splitlines()) else None
    if pairs is None:
        r = run_shell(body, cwd, env)
        assert r.returncode == ex.exit_code, \
            f"{ex.name}: exit {r.returncode}, expected {ex.exit_code}\n{body}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return
    for k, (command, shown) in enumerate(pairs):
        r = run_shell(command, cwd, env, strict=False)
        want = ex.exit_code if k == len(pairs) - 1 else 0
        assert r.returncode == want, \
            f"{ex.name}: `{command}` exit {r.returncode}, expected {want}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        printed = r.stdout.splitlines()
        assert matches(shown, printed), \
            f"{ex.name}: `{command}` printed\n" + "\n".join(printed) + "\n--- the doc shows\n" + "\n".join(shown)


def run_python(ex: Example, cwd: Path):
    globs = _namespaces.setdefault(ex.doc, {"__name__": "__doc_example__"})
    old = os.getcwd()
    os.chdir(cwd)
    try:
        if ">>>" in ex.body:
            test = doctest.DocTestParser().get_doctest(ex.body, globs, ex.name, str(ex.doc), ex.line)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
            out = []
            runner.run(test, out=out.append, clear_globs=False)
            globs.update(test.globs)           # a DocTest works on a copy: keep its names for the next block
            assert runner.failures == 0, "".join(out)
        else:
            exec(compile(ex.body, ex.name, "exec"), globs)
    finally:
        os.chdir(old)


# -- the convention itself ---------------------------------------------------------------

def test_every_document_is_read():
    """New docs are picked up by the glob; the README and the docs have examples."""
    names = {ex.doc.name for ex in ALL}
    assert "README.md" in names
    assert {p.name for p in DOCS} >= {"README.md", "api.md", "golden.md", "events.md"}
    assert len(ALL) >= 30


def test_parsing_of_tags_and_sessions():
    assert parse_info("console kernel exit=1") == ("console", {"kernel": "", "exit": "1"})
    assert parse_info("sh no-run: needs a Dask cluster") == ("sh", {"no_run": "needs a Dask cluster"})
    assert session("$ a \\\n   b\nout 1\nout 2\n$ c\n") == [("a  b", ["out 1", "out 2"]), ("c", [])]
    assert matches(["grotool, version ... (engine: ...)"], ["grotool, version 0.1.0 (engine: interpreted)"])
    assert not matches(["x"], ["x", "y"]) and not matches(["a...b"], ["a c"])
    nested = "````text\n```sh\nnot run\n```\n````\n\n```sh kernel\nrun\n```\n"
    assert list(fenced_blocks(nested)) == [(1, "text", "```sh\nnot run\n```\n"), (7, "sh kernel", "run\n")]


def test_readme_setup_commands():
    """The README's two set-up commands: one installs and runs the main job on a
    bundled capture, the other installs the test extras and runs the suite, and
    that one is .ci/run's command."""
    readme = [ex for ex in ALL if ex.doc.name == "README.md"]
    setup = [ex for ex in readme if ex.setup]
    ci = [ex for ex in readme if ex.ci_command]
    assert len(setup) == 1 and len(ci) == 1
    assert setup[0].body.strip().startswith("pip install -e . && grotool replay captures/")
    assert ci[0].body.strip() == "pip install -q -e '.[test]' && python -m pytest -q"
    # grotool is not on PyPI: no doc may tell anyone to install it from there
    for doc in DOCS:
        assert not re.search(r"pip install\s+['\"]?grotool\b", doc.read_text()), doc.name


def test_readme_lists_every_command():
    """The README's command table has one row per command of `grotool --help`, no more."""
    r = subprocess.run([sys.executable, "-m", "grotool", "--help"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("Commands:\n")[1].split("\n\n")[0]
    commands = {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.strip()}
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Commands\n")[1].split("\n## ")[0]
    listed = set(re.findall(r"^\| `([a-z]+)` \|", table, re.M))
    assert commands and listed == commands


def test_relative_links_resolve():
    """Every relative link of README.md and docs/*.md points at a file of the repository."""
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)}: {target}"
