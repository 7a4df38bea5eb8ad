"""The compiled and the interpreted engine are one engine: every bundled
capture replayed under both gives the same bytes in every output.

The compiled build is the engine's .py files compiled in place by setup.py
(`pip install -e .` with Cython and a C compiler).  Without it these tests are
skipped; in CI GROTOOL_REQUIRE_COMPILED=1 turns that skip into a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(ROOT.glob("captures/*.pcap")) + sorted(ROOT.glob("tests/data/*.pcap"))

# default nic device; the veth device (the kernel oracle's conditions) with full
# output checksums and annotated pcapng output
CONFIGS = {
    "nic": ([], "out.pcap"),
    "veth": (["--device", "veth", "--l4-csum", "full", "--csum", "verify"], "out.pcapng"),
}


def _env(pure: bool) -> dict:
    env = dict(os.environ)
    env.pop("GROTOOL_PURE", None)
    if pure:
        env["GROTOOL_PURE"] = "1"
    return env


def _grotool(args, pure: bool, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "grotool", *args], cwd=cwd, env=_env(pure),
                          capture_output=True, timeout=300)


def _engine_build(pure: bool) -> str:
    code = "from grotool._build import engine_build; print(engine_build())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(pure), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def compiled_build():
    build = _engine_build(pure=False)
    if not build.startswith("compiled"):
        message = f"no compiled engine here ({build}): build it with pip install -e . (Cython and a C compiler)"
        if os.environ.get("GROTOOL_REQUIRE_COMPILED") == "1":
            pytest.fail(f"GROTOOL_REQUIRE_COMPILED=1 but {message}")
        pytest.skip(message)
    return build


def test_pure_env_forces_the_interpreted_engine(compiled_build):
    assert compiled_build.startswith("compiled, Cython 3.")
    assert _engine_build(pure=True) == "interpreted, forced by GROTOOL_PURE"
    version = _grotool(["--version"], pure=False)
    assert version.returncode == 0
    assert version.stdout.decode() == f"grotool, version 0.1.0 (engine: {compiled_build})\n"


def test_every_engine_module_is_compiled(compiled_build):
    # no module of the engine silently left interpreted in the compiled build
    code = ("import importlib, pathlib, grotool.engine as e\n"
            "for p in sorted(pathlib.Path(e.__file__).parent.glob('*.py')):\n"
            "    name = 'grotool.engine' if p.stem == '__init__' else 'grotool.engine.' + p.stem\n"
            "    m = importlib.import_module(name)\n"
            "    print(name, type(m.__loader__).__name__)\n")
    for pure, loader in ((False, "ExtensionFileLoader"), (True, "SourceFileLoader")):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(pure), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert len(lines) >= 18
        assert all(line.endswith(" " + loader) for line in lines), lines


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("capture", CAPTURES, ids=[c.name for c in CAPTURES])
def test_both_builds_give_identical_outputs(compiled_build, capture, config, tmp_path):
    options, output_name = CONFIGS[config]
    results = {}
    for pure in (False, True):
        out = tmp_path / ("interpreted" if pure else "compiled")
        out.mkdir()
        proc = _grotool(["replay", str(capture), str(out / output_name), "--json", str(out / "stats.json"),
                         "--packets", str(out / "packets.jsonl"), *options], pure=pure)
        assert proc.returncode == 0, proc.stderr.decode()
        files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
        results[pure] = (proc.stdout, proc.stderr, files)
    compiled, interpreted = results[False], results[True]
    assert sorted(compiled[2]) == sorted(["stats.json", "packets.jsonl", output_name])
    for name in compiled[2]:
        assert compiled[2][name] == interpreted[2][name], f"{name} differs between the builds"
    assert compiled[0] == interpreted[0], "terminal output differs between the builds"
    assert compiled[1] == interpreted[1], "warnings differ between the builds"
    # the documents are real results: every input frame is covered exactly once
    stats = json.loads(compiled[2]["stats.json"])
    packets = [json.loads(line) for line in compiled[2]["packets.jsonl"].splitlines()]
    assert len(packets) == stats["totals"]["packets_out"] > 0
    covered = sorted(i for p in packets for i in p["covers"])
    assert covered == list(range(stats["totals"]["packets_in"]))


def test_the_interpreted_engine_needs_no_cython(tmp_path):
    """csum.py and tcp.py read `cython.compiled` to pick their byte readers: the
    compiler takes it from Cython, the interpreter from a stand-in, so the
    interpreted engine neither imports Cython nor needs it installed (a machine
    that got the interpreted fallback), and gives the same bytes."""
    capture = ROOT / "captures" / "bulk-4flows.pcap"
    without = ("import atexit, sys; sys.modules['cython'] = None; from grotool.cli import run; "
               "from grotool.engine import csum, tcp; assert csum.cython.compiled is False; "
               "assert tcp.cython.compiled is False; "
               "atexit.register(lambda: sys.modules['cython'] is None or sys.exit(9)); run()")
    outputs = []
    for name, argv in (("without", [sys.executable, "-c", without]), ("with", [sys.executable, "-m", "grotool"])):
        out = tmp_path / f"{name}.pcap"
        proc = subprocess.run([*argv, "replay", str(capture), str(out), "--csum", "verify"], cwd=ROOT,
                              env=_env(pure=True), capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr.decode()
        outputs.append((proc.stdout, out.read_bytes()))
    assert outputs[0] == outputs[1]
    assert b"400 packets in, 115 out" in outputs[0][0]


def test_the_source_finder_takes_grotool_sources_only(tmp_path):
    # the finder grotool/__init__.py installs when the interpreted engine is to run
    # (GROTOOL_PURE, or a stale compiled module: stale_modules below) takes a
    # grotool module's source even beside a fresh extension, and leaves other
    # packages alone; a compiled run installs no finder at all
    from importlib.machinery import EXTENSION_SUFFIXES, SourceFileLoader

    from grotool._build import _SourceFinder

    source = tmp_path / "rules.py"
    source.write_text("X = 1\n")
    compiled = tmp_path / ("rules" + EXTENSION_SUFFIXES[0])
    compiled.write_bytes(b"not really an extension")
    os.utime(source, (1_000_000_000, 1_000_000_000))
    os.utime(compiled, (1_000_000_200, 1_000_000_200))
    spec = _SourceFinder().find_spec("grotool.rules", [str(tmp_path)])
    assert isinstance(spec.loader, SourceFileLoader) and spec.origin == str(source)
    assert _SourceFinder().find_spec("other.rules", [str(tmp_path)]) is None
    assert _SourceFinder().find_spec("grotool.absent", [str(tmp_path)]) is None
    code = "import sys, grotool; print([type(f).__name__ for f in sys.meta_path].count('_SourceFinder'))"
    for pure, finders in ((False, "0"), (True, "1")):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(pure=pure), capture_output=True,
                              text=True, timeout=60)
        assert proc.stdout.strip() == finders, (pure, proc.stderr)


@pytest.mark.parametrize("modules", [
    # importlib.abc brings importlib.resources, pathlib, zipfile and tempfile: in an
    # interpreter whose site does not load them already (-S here), three times a
    # bare start-up, paid by every grotool command
    ("importlib.abc", "importlib.resources"),
    # python -m grotool imports the package before __main__ turns the cycle
    # collector off: typing (and re, enum, functools it brings) imported there
    # cost collections (3 M instructions); click imports it later, collector off
    ("typing", "re"),
])
def test_choosing_the_build_does_not_import(modules):
    import site

    env = dict(_env(pure=False), PYTHONPATH=os.pathsep.join([str(ROOT), *site.getsitepackages()]))
    code = f"import sys, grotool; print(sorted({set(modules)!r} & set(sys.modules)))"
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_stale_modules_lists_every_source_newer_than_its_extension(tmp_path):
    from importlib.machinery import EXTENSION_SUFFIXES

    from grotool._build import stale_modules

    suffix = EXTENSION_SUFFIXES[0]
    (tmp_path / "io").mkdir()
    for rel, source_at, compiled_at in (("replay", 100, 200), ("io/capture", 300, 200), ("io/__init__", 500, 100),
                                        ("cli", 300, None)):
        source = tmp_path / (rel + ".py")
        source.write_text("")
        os.utime(source, (1_000_000_000 + source_at,) * 2)
        if compiled_at is not None:
            compiled = tmp_path / (rel + suffix)
            compiled.write_bytes(b"")
            os.utime(compiled, (1_000_000_000 + compiled_at,) * 2)
    # cli has no extension (never compiled): not stale
    assert stale_modules(str(tmp_path)) == ["grotool.io", "grotool.io.capture"]


def test_one_stale_module_makes_the_whole_build_interpreted(compiled_build, tmp_path):
    # the compiled replay module uses the compiled capture module's C types: with
    # capture.py edited after the build, taking the source for it alone made
    # importing replay fail (a traceback); every module is taken from source then
    import shutil

    package = tmp_path / "grotool"
    shutil.copytree(ROOT / "grotool", package, ignore=shutil.ignore_patterns("__pycache__"))
    from importlib.machinery import EXTENSION_SUFFIXES

    built = max(os.path.getmtime(p) for p in (package / "io").glob("capture*" + EXTENSION_SUFFIXES[0]))
    os.utime(package / "io" / "capture.py", (built + 60, built + 60))    # edited after the build
    env = _env(pure=False)
    env["PYTHONPATH"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "grotool", "replay", str(CAPTURES[0]), "-q", "--json", "-"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["totals"]["packets_in"] > 0
    code = "import grotool.engine.gro as g; print(type(g.__loader__).__name__, g.__file__)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.split() == ["SourceFileLoader", str(package / "engine" / "gro.py")]
    version = subprocess.run([sys.executable, "-m", "grotool", "--version"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=60)
    assert version.stdout == ("grotool, version 0.1.0 (engine: interpreted: 1 compiled modules are older than "
                              "their source, rebuild with pip install -e .)\n")


def test_skb_declarations_are_exactly_the_fields_init_sets():
    # engine/skb.pxd turns every Skb field into a typed C field, which reads as
    # a default (None, 0) before it is set, where the interpreted engine raises
    # AttributeError.  So the declared fields must be exactly the slots, and
    # Skb.__init__ and new_skb must set every one of them.
    import re

    pxd = (ROOT / "grotool" / "engine" / "skb.pxd").read_text()
    skb_class = pxd.split("cdef class Skb:")[1].split("cdef class ")[0]
    declared = re.findall(r"^    cdef public [\w ]+? (\w+)(?:\[\d+\])?$", skb_class, re.M)   # name or name[N]
    assert "data" in declared and "off" in declared and len(declared) == len(set(declared))
    code = ("from grotool.engine.skb import Skb, new_skb\n"
            "s = Skb(b'\\x00' * 60, 5, 7, 14)\n"
            "t = new_skb(b'\\x00' * 70, 5, 65, 5, 7, 14, 0x800, b'')\n"
            "print(' '.join(n for n in Skb.__slots__ if hasattr(s, n) and hasattr(t, n)))\n"
            "print(' '.join(Skb.__slots__))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(pure=True), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    set_by_init, slots = (line.split() for line in proc.stdout.splitlines())
    assert set(declared) == set(slots)
    assert set(slots) == set(set_by_init), set(slots) - set(set_by_init)


def test_new_skb_sets_what_skb_init_sets_in_the_compiled_build(compiled_build):
    # the compiled new_skb sets only the fields a new object does not already hold
    # as 0 or None: every field must still equal what Skb() and its rebased
    # offsets give, in both builds
    code = ("from grotool.engine.skb import Skb, new_skb\n"
            "frame = bytes(range(60))\n"
            "s = Skb(frame, 5, 7, 14, 0, 0x800, b'k')\n"
            "t = new_skb(b'xxxxx' + frame + b'yy', 5, 65, 5, 7, 14, 0x800, b'k')\n"
            "moved = ('data', 'start', 'end', 'off', 'network_offsets')\n"
            "same = [n for n in Skb.__slots__ if n not in moved and getattr(s, n) == getattr(t, n)]\n"
            "print(len(same) == len(Skb.__slots__) - len(moved), [n for n in Skb.__slots__ if n not in moved and n not in same])\n"
            "print(t.data[t.start:t.end] == frame, t.off - t.start == s.off, list(t.network_offsets) == [19, 19])\n")
    for pure in (False, True):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(pure=pure), capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["True", "[]", "True", "True", "True"], (pure, proc.stdout)


# Header words read in place (C integers in the compiled build) must keep their
# full unsigned values: a top byte of 0x80 or more shifted by 24 overflows a C int.
# These run in both builds (CI runs the suite with GROTOOL_PURE=1 too).
def test_header_words_keep_their_unsigned_values():
    from grotool.engine import csum, tcp

    assert tcp.word32(b"\xff\xfe\xfd\xfc", 0) == 0xFFFEFDFC
    assert tcp.word32(b"\x00\x80\x00\x00\x00\x01", 1) == 0x80000000
    assert tcp.same_bytes(b"xab", 1, b"ab", 0, 2) and not tcp.same_bytes(b"ab", 0, b"ac", 0, 2)
    header = bytes.fromhex("4500003c1c4640004006" "0000" "c0a80001" "c0a800c7")
    # the sum of the address words, reduced, plus protocol and length
    words = 0xC0A8 + 0x0001 + 0xC0A8 + 0x00C7
    assert tcp.pseudo4(header, 0, 40) == words % 0xFFFF + 6 + 40
    assert tcp.pseudo4(bytearray(header), 0, 1460, 17) == words % 0xFFFF + 17 + 1460
    v6 = bytes(8) + bytes(range(0xF0, 0x100)) + bytes(range(0xE0, 0xF0))
    words6 = sum((v6[i] << 8) | v6[i + 1] for i in range(8, 40, 2))
    assert tcp.pseudo6(v6, 0, 100000) == words6 % 0xFFFF + 6 + 100000
    assert csum.seed(0x1FFFE) == 0xFFFF and csum.fold(0xFFFF0001) == 0x1
    checked = bytearray(header)
    total = sum((checked[i] << 8) | checked[i + 1] for i in range(0, 20, 2))
    check = (~(total % 0xFFFF)) & 0xFFFF
    checked[10:12] = check.to_bytes(2, "big")
    assert csum.ip_header_ok(bytes(checked), 0) and not csum.ip_header_ok(header, 0)


CORPUS = ROOT.parent / "shared" / "corpus" / "tcpdump"


def _digests_in_both_builds(folder) -> tuple:
    """tests/corpus_digest.py's lines for every capture of ``folder``: (compiled, interpreted)."""
    lines = {}
    for pure in (False, True):
        proc = subprocess.run([sys.executable, str(ROOT / "tests" / "corpus_digest.py"), str(folder)], cwd=ROOT,
                              env=_env(pure), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines[pure] = proc.stdout.splitlines()
    return lines[False], lines[True]


def _assert_same_replays(compiled, interpreted) -> None:
    differing = [a for a, b in zip(compiled, interpreted) if a != b]
    assert compiled == interpreted, f"{len(differing)} replays differ, first: {differing[:3]}"


@pytest.mark.skipif(not CORPUS.is_dir(), reason="tcpdump corpus not present next to the checkout")
def test_both_builds_agree_on_the_tcpdump_corpus(compiled_build):
    """The compiled build reads header bytes through unchecked C pointers where
    the source has checked the length first: a missing check would read past a
    frame and differ from the interpreted build.  Every capture of tcpdump's
    test corpus (damaged, truncated, every link type and protocol), under three
    hosts, gives the same output capture and statistics in both builds."""
    compiled, interpreted = _digests_in_both_builds(CORPUS)
    assert len(compiled) >= 3 * 700
    replayed = [line for line in compiled if "refused:" not in line]
    assert len(replayed) >= 3 * 690 and sum(int(line.split()[2]) for line in replayed) > 10000
    _assert_same_replays(compiled, interpreted)


# The compiled build writes pcap record headers with C stores and copies a
# super-packet's pieces into one new string; the interpreted build packs with
# struct and joins slices.  Edge cases of both, in both builds, give the bytes
# an independent struct-and-slice construction gives.
_WRITER_AND_JOIN = r"""
import hashlib, struct, sys
from grotool.io.capture import PcapWriter, PCAP_TIME_LIMIT_NS
from grotool.engine.skb import Skb, _join_super_packet

path = sys.argv[1]
records = [(0, b""), (1, b"\x01"), (999_999_999, bytes(range(60))), (1_000_000_000, bytearray(b"ab" * 700)),
           (PCAP_TIME_LIMIT_NS - 1, b"\xff" * 65535), (1_700_000_000_123_456_789, b"x" * 9)]
w = PcapWriter(path)
for ts, data in records:
    w.write(ts, data)
w.write(5, b"short", wirelen=1514)           # a truncated record keeps its wire length
w.close()
expect = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)
for ts, data in records + [(5, b"short")]:
    wire = 1514 if data == b"short" else len(data)
    expect += struct.pack("<IIII", ts // 10**9, ts % 10**9, len(data), wire) + bytes(data)
got = open(path, "rb").read()
print("writer", got == expect, hashlib.sha256(got).hexdigest())

frames = [bytes(range(i, i + 80)) for i in range(0, 120, 40)]
cases = [
    ((bytearray(b"H" * 34), frames[0], [frames[1], frames[2]]), 54, (26, 26)),
    ((bytearray(b"H" * 54), frames[0], []), 54, ()),
    ((bytearray(b""), frames[0], [frames[1]]), 0, (80,)),
    ((bytearray(b"H" * 20), frames[0], [frames[1]]), 80, (0,)),
    # pieces not wholly in their frames: the slicing path (Python slice rules)
    ((bytearray(b"H" * 20), frames[0], [frames[1]]), 90, (10,)),
    ((bytearray(b"H" * 20), frames[0], [frames[1]]), 54, (200,)),
]
for pieces, header_len, lens in cases:
    header, first, merged = pieces
    expect = bytes(header) + first[header_len:] + b"".join(f[len(f) - n:] for f, n in zip(merged, lens))
    head = Skb(first, 0, 0, 14)
    head.off = header_len
    for i, (frame, n) in enumerate(zip(merged, lens)):
        segment = Skb(frame, 0, i + 1, 14)
        segment.payload_len = n
        if head.last_merged is None:
            head.next_merged = segment
        else:
            head.last_merged.next_merged = segment
        head.last_merged = segment
    try:
        got = _join_super_packet(header, head)
    except Exception as exc:
        got = type(exc).__name__
    print("join", got == expect, got if isinstance(got, str) else hashlib.sha256(got).hexdigest())
"""


def test_writer_and_super_packet_bytes_are_the_same_in_both_builds(compiled_build, tmp_path):
    outputs = {}
    for pure in (False, True):
        proc = subprocess.run([sys.executable, "-c", _WRITER_AND_JOIN, str(tmp_path / f"w{int(pure)}.pcap")],
                              cwd=ROOT, env=_env(pure), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        outputs[pure] = proc.stdout.splitlines()
    assert outputs[False] == outputs[True]
    assert len(outputs[False]) == 7
    assert all(line.split()[1] == "True" for line in outputs[False]), outputs[False]


def test_both_builds_agree_on_damaged_captures(compiled_build, tmp_path):
    """The same comparison on captures that GRO does merge, damaged
    (tests/mutated_captures.py: runs of the bundled, recorded and generated
    TCP, UDP, GRE, VXLAN and fraglist flows with header bytes flipped, frames
    cut short, some shuffled): every replay gives the same output capture and
    statistics in both builds, and the damaged flows still coalesce."""
    made = subprocess.run([sys.executable, str(ROOT / "tests" / "mutated_captures.py"), str(tmp_path), "3", "150"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    compiled, interpreted = _digests_in_both_builds(tmp_path)
    assert len(compiled) == 3 * 150 and not any("refused:" in line for line in compiled)
    assert sum(int(line.split()[4]) for line in compiled) > 2500      # 3,433 super-packets for seed 3
    _assert_same_replays(compiled, interpreted)
