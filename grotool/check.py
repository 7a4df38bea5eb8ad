"""Goldens: CI regression on captures (``grotool check``).

A golden (``x.gro`` next to ``x.pcap``) is a small text file: a header saying
which grotool wrote it, with which replay settings (Linux's, or ``--stack dpdk``
and DPDK's knobs) and where the expectation came from (``grotool replay``, the
real kernel through ``grotool kernel``, or the real librte_gro through
``grotool dpdk``), then one line per delivered packet in delivery order.  The format is described
in docs/golden.md; nothing in it depends on the working directory or the
machine.  No printing here: the command line (grotool/cli/check_cmd.py) shows
the results.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from dataclasses import replace, dataclass, field, fields
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import __version__
from .dpdk.engine import DpdkSettings
from .engine.config import Settings
from .errors import EnvironmentProblem, InputError

GOLDEN_FORMAT = "grotool.golden/2"
# /2 added the capture's digest (`# capture-sha256:`); /1 goldens are still read and checked
GOLDEN_FORMATS_READ = ("grotool.golden/1", GOLDEN_FORMAT)
GOLDEN_SUFFIX = ".gro"
CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap", ".pcap.gz", ".pcapng.gz", ".cap.gz")
DIGEST_HEX = 12
ORIGIN_REPLAY = "grotool replay"
ORIGIN_KERNEL = "grotool kernel"
ORIGIN_LIBRARY = "grotool dpdk"   # the real librte_gro (``check --update --from-library``)
ORIGINS_REAL = (ORIGIN_KERNEL, ORIGIN_LIBRARY)
NO_REASON = "-"                 # kernel- and library-origin goldens: neither gives reasons
MAX_SHOWN_PACKETS = 4

# statuses of one capture
PASS, FAIL, ERROR, MISSING = "pass", "fail", "error", "no golden"
WRITTEN, UPDATED, UNCHANGED, KEPT = "written", "updated", "unchanged", "kept"


# ----------------------------------------------------------------------------
# settings <-> replay options
# ----------------------------------------------------------------------------
_DEFAULTS = Settings()


# Settings fields whose replay option is not simply the field name with dashes
_OPTION_NAMES = {"udp_gro_sockets": "--udp-gro-socket", "vxlan_ports": "--vxlan-port",
                 "geneve_ports": "--geneve-port", "veth_rss": "--rss"}


def _option_name(name: str) -> str:
    return _OPTION_NAMES.get(name) or "--" + name.replace("_", "-")


def settings_to_args(settings: Settings) -> List[str]:
    """The replay options that give ``settings``: only those differing from
    the defaults, in Settings field order (stable, so goldens diff well)."""
    args: List[str] = []
    for f in fields(Settings):
        value = getattr(settings, f.name)
        if value == getattr(_DEFAULTS, f.name):
            continue
        if isinstance(value, bool):
            args.append(_option_name(f.name) if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, bytes):
            args += [_option_name(f.name), value.hex()]
        elif isinstance(value, tuple):           # repeatable options: one per value
            for item in value:
                args += [_option_name(f.name), str(item)]
        else:
            args += [_option_name(f.name), str(value)]
    return args


# A golden's settings: Linux's (Settings) or DPDK's (DpdkSettings, `--stack dpdk`)
StackSettings = Union[Settings, DpdkSettings]
_DPDK_DEFAULTS = DpdkSettings()
# DpdkSettings fields and their `replay --stack dpdk` options
_DPDK_OPTIONS = {"mode": "--dpdk-mode", "burst": "--burst", "flush_every": "--dpdk-flush-every",
                 "max_flows": "--dpdk-max-flows", "max_items": "--dpdk-max-items",
                 "gro_types": "--dpdk-gro-types", "vxlan_ports": "--vxlan-port"}


def dpdk_settings_to_args(settings: DpdkSettings) -> List[str]:
    """``--stack dpdk`` and the knobs that differ from the defaults, in DpdkSettings
    field order; the GRO types as one comma-separated value, VXLAN ports one
    option each (as the command line takes them)."""
    args = ["--stack", "dpdk"]
    for f in fields(DpdkSettings):
        value = getattr(settings, f.name)
        if value == getattr(_DPDK_DEFAULTS, f.name):
            continue
        if f.name == "gro_types":
            args += [_DPDK_OPTIONS[f.name], ",".join(value)]
        elif f.name == "vxlan_ports":
            for port in value:
                args += [_DPDK_OPTIONS[f.name], str(port)]
        else:
            args += [_DPDK_OPTIONS[f.name], str(value)]
    return args


def stack_settings_to_args(settings: StackSettings) -> List[str]:
    """The replay options that give ``settings``, of either stack (Linux's
    write no ``--stack``: goldens of the Linux stack read as before)."""
    if isinstance(settings, DpdkSettings):
        return dpdk_settings_to_args(settings)
    return settings_to_args(settings)


def args_to_dpdk_settings(args: Sequence[str], where: str = "settings") -> DpdkSettings:
    """DpdkSettings from the options after ``--stack dpdk`` (dpdk_settings_to_args)."""
    by_option = {option: name for name, option in _DPDK_OPTIONS.items()}
    values: Dict[str, object] = {}
    for k in range(0, len(args), 2):
        arg = args[k]
        name = by_option.get(arg)
        if name is None:
            raise InputError(f"{where}: {arg!r} is not a DPDK knob (with --stack dpdk only those apply)")
        if k + 1 >= len(args):
            raise InputError(f"{where}: {arg} needs a value")
        raw = args[k + 1]
        try:
            if name == "mode":
                values[name] = raw
            elif name == "gro_types":
                values[name] = tuple(t for t in raw.split(",") if t)
            elif name == "vxlan_ports":
                values[name] = tuple(values.get(name, ())) + (int(raw),)
            else:
                values[name] = int(raw)
        except ValueError:
            raise InputError(f"{where}: bad value {raw!r} for {arg}") from None
    settings = DpdkSettings(**values)
    problem = settings.problem()
    if problem:
        raise InputError(f"{where}: {problem}")
    return settings


def args_to_stack_settings(args: Sequence[str], where: str = "settings") -> StackSettings:
    """A golden's settings line: Linux's replay options, or ``--stack dpdk`` and DPDK's knobs."""
    if "--stack" not in args:
        return args_to_settings(args, where)
    at = args.index("--stack")
    stack = args[at + 1] if at + 1 < len(args) else ""
    rest = list(args[:at]) + list(args[at + 2:])
    if stack == "dpdk":
        return args_to_dpdk_settings(rest, where)
    if stack == "linux":
        return args_to_settings(rest, where)
    raise InputError(f"{where}: unknown stack {stack!r} (linux or dpdk)")


def args_to_settings(args: Sequence[str], where: str = "settings") -> Settings:
    """Settings from replay options as ``settings_to_args`` writes them."""
    by_option = {_option_name(f.name): f for f in fields(Settings)}
    values: Dict[str, object] = {}
    k = 0
    while k < len(args):
        arg = args[k]
        f = by_option.get(arg)
        if f is None and arg.startswith("--no-"):
            f = by_option.get("--" + arg[5:])
            if f is not None and isinstance(getattr(_DEFAULTS, f.name), bool):
                values[f.name] = False
                k += 1
                continue
            f = None
        if f is None:
            raise InputError(f"{where}: unknown replay option {arg!r}")
        default = getattr(_DEFAULTS, f.name)
        if isinstance(default, bool):
            values[f.name] = True
            k += 1
            continue
        if k + 1 >= len(args):
            raise InputError(f"{where}: {arg} needs a value")
        raw = args[k + 1]
        try:
            if isinstance(default, bytes):
                values[f.name] = bytes.fromhex(raw)
            elif isinstance(default, tuple):
                item = raw if f.name == "local_tcp" else int(raw)
                values[f.name] = tuple(values.get(f.name, ())) + (item,)
            elif isinstance(default, int):
                values[f.name] = int(raw)
            else:
                values[f.name] = raw
        except ValueError:
            raise InputError(f"{where}: bad value {raw!r} for {arg}") from None
        k += 2
    settings = Settings(**values)
    try:
        settings.validate()
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    return settings


# ----------------------------------------------------------------------------
# golden lines
# ----------------------------------------------------------------------------
_LINE = re.compile(r"^(?P<flow>.+?)  seq (?P<seq>\d+|-)  len (?P<len>\d+)  segs (?P<segs>\d+)  "
                   r"frame (?P<frame>\d+)  (?P<reason>[a-z0-9_]+|-)  (?P<digest>[0-9a-f]{%d})$" % DIGEST_HEX)


@dataclass(frozen=True)
class Entry:
    """One delivered packet as a golden records it."""

    flow: str                   # flow label, as grotool replay's table shows it
    seq: Optional[int]          # TCP: first sequence number; None otherwise
    length: int                 # TCP/UDP payload bytes; whole frame bytes for anything else
    segs: int                   # input frames it covers
    frame: int                  # first input frame it covers (1-based, as Wireshark numbers frames)
    reason: str                 # flush reason, or "-" (kernel origin)
    digest: str                 # first 12 hex digits of the sha256 of the packet's bytes

    def line(self) -> str:
        seq = "-" if self.seq is None else str(self.seq)
        return (f"{self.flow}  seq {seq}  len {self.length}  segs {self.segs}  frame {self.frame}  "
                f"{self.reason}  {self.digest}")

    def short(self) -> str:
        seq = "" if self.seq is None else f"seq {self.seq} "
        reason = "" if self.reason == NO_REASON else f" {self.reason}"
        return f"{seq}len {self.length} segs {self.segs} frame {self.frame}{reason} bytes {self.digest}"

    @classmethod
    def parse(cls, text: str, where: str) -> "Entry":
        m = _LINE.match(text)
        if m is None:
            raise InputError(f"{where}: not a golden packet line: {text[:80]!r}")
        seq = None if m["seq"] == "-" else int(m["seq"])
        return cls(m["flow"], seq, int(m["len"]), int(m["segs"]), int(m["frame"]), m["reason"], m["digest"])


def _dissect(linktype: int, data: bytes):
    """(kind, seq, payload length) of a delivered packet, or None when it is
    neither TCP nor UDP.  One place to switch to a shared dissector."""
    from .compare import KIND_BYTES, _classify

    kind, _tup, seq, _flags, length, _csums, _payload = _classify(linktype, data, len(data))
    if kind == KIND_BYTES:
        return None
    return kind, seq, length


def make_entry(linktype: int, flow: str, data: bytes, segs: int, first_index: int, reason: str) -> Entry:
    parsed = _dissect(linktype, data)
    if parsed is None:
        seq, length = None, len(data)
    else:
        kind, seq, length = parsed
        if kind != "tcp":
            seq = None
    return Entry(flow, seq, length, segs, first_index + 1, reason, hashlib.sha256(data).hexdigest()[:DIGEST_HEX])


class EntryRecorder:
    """A replay observer (grotool.replay.replay) that turns deliveries into golden entries."""

    def __init__(self):
        self.entries: List[Entry] = []
        self._linktype = 1
        self._namer = None

    def start(self, linktype: int) -> None:
        from .report.flows import FlowNamer

        self._linktype = linktype
        self._namer = FlowNamer(linktype)

    def __call__(self, d) -> None:
        from .report.flows import flow_label

        if self._namer is None:
            self.start(self._linktype)
        flow = flow_label(self._namer(d.key, d.data))
        self.entries.append(make_entry(self._linktype, flow, d.data, d.segs, d.indices[0], d.reason))


# ----------------------------------------------------------------------------
# golden files
# ----------------------------------------------------------------------------
@dataclass
class Golden:
    capture: str                          # the capture's file name (no directory)
    frames: int                           # input frames
    settings: StackSettings               # Linux's Settings, or DpdkSettings (`--stack dpdk`)
    origin: str = ORIGIN_REPLAY           # ORIGIN_REPLAY, ORIGIN_KERNEL or ORIGIN_LIBRARY
    kernel: str = ""                      # the origin's detail: the kernel release and the options of
                                          # `grotool kernel`, or the librte_gro version
    version: str = __version__            # grotool version that wrote it
    entries: List[Entry] = field(default_factory=list)
    capture_sha256: str = ""              # sha256 of the capture file it was written for ("" in a /1 golden)
    format: str = GOLDEN_FORMAT           # the format of the file it was read from

    @property
    def settings_args(self) -> List[str]:
        return stack_settings_to_args(self.settings)

    def origin_text(self) -> str:
        return f"{self.origin} {self.kernel}".rstrip()

    def text(self) -> str:
        settings = " ".join(self.settings_args) or "(defaults)"
        lines = [
            f"# {GOLDEN_FORMAT}",
            f"# grotool {self.version}",
            f"# capture: {self.capture} ({self.frames} frames)",
        ] + ([f"# capture-sha256: {self.capture_sha256}"] if self.capture_sha256 else []) + [
            f"# origin: {self.origin_text()}",
            f"# settings: {settings}",
            f"# packets: {len(self.entries)}",
            "# one line per delivered packet, in delivery order:",
            "# FLOW  seq FIRST_SEQ  len PAYLOAD  segs SEGMENTS  frame FIRST_FRAME  REASON  SHA256_PREFIX",
        ]
        lines += [e.line() for e in self.entries]
        return "\n".join(lines) + "\n"

    @classmethod
    def load(cls, path: str) -> "Golden":
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise InputError(f"{path}: cannot read golden: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InputError(f"{path}: not a golden (not UTF-8 text)") from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: str) -> "Golden":
        lines = text.splitlines()
        first = lines[0].strip() if lines else ""
        if first[2:] not in GOLDEN_FORMATS_READ or not first.startswith("# "):
            raise InputError(f"{path}: not a golden (first line is not '# {GOLDEN_FORMAT}')")
        fmt = first[2:]
        header: Dict[str, str] = {}
        entries: List[Entry] = []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            if line.startswith("#"):
                body = line[1:].strip()
                if body.startswith("grotool ") and "version" not in header:
                    header["version"] = body.split(None, 1)[1]
                elif ":" in body and not entries:
                    key, value = body.split(":", 1)
                    header.setdefault(key.strip(), value.strip())
                continue
            entries.append(Entry.parse(line, f"{path}:{number}"))
        for key in ("capture", "origin", "settings"):
            if key not in header:
                raise InputError(f"{path}: golden header has no '{key}:' line")
        m = re.match(r"^(.*) \((\d+) frames\)$", header["capture"])
        if m is None:
            raise InputError(f"{path}: bad capture line {header['capture']!r}")
        origin_text = header["origin"]
        real = [o for o in ORIGINS_REAL if origin_text == o or origin_text.startswith(o + " ")]
        if real:
            origin, kernel = real[0], origin_text[len(real[0]):].strip()
        elif origin_text == ORIGIN_REPLAY:
            origin, kernel = ORIGIN_REPLAY, ""
        else:
            raise InputError(f"{path}: unknown origin {origin_text!r}")
        settings_text = header["settings"]
        args = [] if settings_text == "(defaults)" else settings_text.split()
        settings = args_to_stack_settings(args, f"{path}: settings")
        wanted = {ORIGIN_LIBRARY: DpdkSettings, ORIGIN_KERNEL: Settings}.get(origin)
        if wanted is not None and not isinstance(settings, wanted):
            raise InputError(f"{path}: origin {origin_text!r} with settings {settings_text!r}: the kernel's "
                             f"expectation is Linux's, librte_gro's needs --stack dpdk")
        if "packets" in header and header["packets"] != str(len(entries)):
            raise InputError(f"{path}: header says {header['packets']} packets, the file has {len(entries)}")
        digest = header.get("capture-sha256", "") if fmt != "grotool.golden/1" else ""
        if digest and not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise InputError(f"{path}: bad capture-sha256 {digest[:80]!r}")
        return cls(m[1], int(m[2]), settings, origin, kernel, header.get("version", "?"), entries, digest, fmt)

    def write(self, path: str) -> None:
        """Through grotool's safe opener: a temporary file renamed into place
        (a device or FIFO written in place); a failure is an OutputError."""
        from .io.safe_output import open_output

        with open_output(path, "golden") as out:
            out.write(self.text().encode("utf-8"))


def golden_path_for(capture: str) -> str:
    base = capture[:-3] if capture.endswith(".gz") else capture
    return os.path.splitext(base)[0] + GOLDEN_SUFFIX


def is_capture_name(name: str) -> bool:
    return name.lower().endswith(CAPTURE_SUFFIXES)


def capture_for_golden(golden: str) -> Optional[str]:
    stem = golden[:-len(GOLDEN_SUFFIX)]
    for suffix in CAPTURE_SUFFIXES:
        if os.path.isfile(stem + suffix):
            return stem + suffix
    return None


@dataclass
class Target:
    capture: Optional[str]
    golden: str
    problem: str = ""                     # set when the target cannot be checked


def find_targets(paths: Sequence[str]) -> List[Target]:
    """Captures and their goldens from files and folders (folders recursively,
    sorted, hidden entries skipped)."""
    targets: List[Target] = []
    seen: Dict[str, str] = {}

    def add(capture: Optional[str], golden: str, problem: str = "") -> None:
        key = os.path.abspath(golden)
        if capture is not None and key in seen and seen[key] != os.path.abspath(capture):
            targets.append(Target(capture, golden, f"shares its golden {golden} with {seen[key]}"))
            return
        if key in seen:
            return
        seen[key] = os.path.abspath(capture) if capture else ""
        targets.append(Target(capture, golden, problem))

    for path in paths:
        if os.path.isdir(path):
            found = []
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in sorted(files)
                          if is_capture_name(n) and not n.startswith(".")]
            if not found:
                targets.append(Target(None, path, "no captures (.pcap, .pcapng, .cap, optionally .gz) in this folder"))
            for capture in found:
                add(capture, golden_path_for(capture))
        elif path.endswith(GOLDEN_SUFFIX):
            capture = capture_for_golden(path)
            if capture is None:
                add(None, path, "no capture next to this golden")
            else:
                add(capture, path)
        elif os.path.exists(path):
            add(path, golden_path_for(path))
        else:
            targets.append(Target(None, path, "no such file or folder"))
    return targets


# ----------------------------------------------------------------------------
# producing entries
# ----------------------------------------------------------------------------
def replay_entries(capture: str, settings: StackSettings,
                   progress: Optional[Callable] = None) -> Tuple[List[Entry], int]:
    """(entries, input frames) of grotool's replay of ``capture``: through the
    Linux engine, or (DpdkSettings) through the DPDK model."""
    if isinstance(settings, DpdkSettings):
        return dpdk_entries(capture, settings)
    from .replay import replay

    recorder = EntryRecorder()
    result = replay(capture, None, settings, observers=[recorder], progress=progress)
    return recorder.entries, result.frames


def _dpdk_packet_entries(packets, reasons: bool) -> List[Entry]:
    """Golden entries of packets DPDK returned (Ethernet frames, as read_input gives
    them), named as kernel-origin entries are: the same packet, the same line,
    whether the model or the real library returned it."""
    from .report.flows import describe, flow_label

    return [make_entry(1, flow_label(describe(1, p.data)), p.data, len(p.covers), min(p.covers),
                       p.reason if reasons else NO_REASON) for p in packets]


def dpdk_entries(capture: str, settings: DpdkSettings) -> Tuple[List[Entry], int]:
    """(entries, input frames) of ``capture`` through the DPDK model (`replay --stack dpdk`)."""
    from .dpdk.engine import simulate
    from .oracle import read_input

    problem = settings.problem()
    if problem:
        raise InputError(f"{capture}: {problem}")
    frames, _stamps, _info = read_input(capture)
    return _dpdk_packet_entries(simulate(frames, settings), True), len(frames)


def library_entries(capture: str, settings: DpdkSettings) -> Tuple[List[Entry], int, str]:
    """(entries, input frames, origin detail) from the real librte_gro (`grotool dpdk`,
    built on first use; EnvironmentProblem when it cannot be); no reasons."""
    from .dpdk.oracle import library_version, run_library
    from .oracle import read_input

    frames, _stamps, _info = read_input(capture)
    entries = _dpdk_packet_entries(run_library(frames, settings), False)
    return entries, len(frames), f"librte_gro {library_version()}"


def kernel_settings_problem(settings: StackSettings) -> str:
    """Why these settings cannot be the real kernel's, or ''."""
    if isinstance(settings, DpdkSettings):
        return ("a kernel-origin golden is Linux's: with --stack dpdk the expectation comes from the real "
                "librte_gro (--from-library)")
    if settings.device != "veth":
        return "a kernel-origin golden needs --device veth settings (the kernel oracle's conditions)"
    if settings.budget > 64:
        return "a kernel-origin golden needs --budget 64 or less (frames per kernel poll)"
    if settings != Settings(device="veth", budget=settings.budget, csum=settings.csum, kernel=settings.kernel):
        return "a kernel-origin golden takes only --device veth, --budget, --csum and --kernel"
    return ""


def oracle_profile(vm=None) -> Optional[str]:
    """The --kernel profile of the kernel a kernel-origin golden comes from (the
    host's, or ``vm``'s, a grotool.oracle.vm.VmSession): its long-term series,
    or None when it is of none grotool models."""
    from .engine.kernels import series_of

    try:
        return series_of(vm.image.release if vm is not None else os.uname().release)
    except ValueError:
        return None


def kernel_entries(capture: str, settings: Settings, vm=None) -> Tuple[List[Entry], int, str]:
    """(entries, input frames, origin detail) from the real kernel (root), or
    from the kernel of ``vm`` (no root).

    The kernel run matches ``grotool replay --device veth`` with the same
    --csum and a budget of at most 64; its packets carry no reasons."""
    from .oracle import run_kernel_replay
    from .report.flows import describe, flow_label

    problem = kernel_settings_problem(settings)
    if problem:
        raise InputError(f"{capture}: {problem}")
    run = run_kernel_replay(capture, None, None, csum=settings.csum, batch=settings.budget, vm=vm)
    if not run.reliable:
        raise EnvironmentProblem(f"{capture}: the kernel run was unreliable: " + "; ".join(run.warnings))
    entries = []
    for pkt in run.packets:
        flow = flow_label(describe(1, pkt.data))
        entries.append(make_entry(1, flow, pkt.data, max(1, pkt.gso_segs), min(pkt.covers), NO_REASON))
    frames = sum(b.frames for b in run.batches)
    detail = f"{run.settings.get('kernel', '?')} --csum {settings.csum} --batch {settings.budget}"
    return entries, frames, detail


# ----------------------------------------------------------------------------
# differences
# ----------------------------------------------------------------------------
@dataclass
class Difference:
    flow: str
    old: List[Tuple[int, Entry]]          # (delivery position, entry) in the golden
    new: List[Tuple[int, Entry]]          # and in this replay
    packet: int                           # 1-based packet number within the flow (first involved)
    kind: str = "packets"                 # "packets" or "order"

    def frames(self) -> Tuple[int, int]:
        entries = [e for _, e in self.new] or [e for _, e in self.old]
        return min(e.frame for e in entries), max(e.frame for e in entries)

    def what_changed(self) -> str:
        """One line: which fields differ, or what the packing difference is."""
        if self.kind == "order":
            return "same packets per flow, delivered in another order"
        if len(self.old) == 1 and len(self.new) == 1:
            a, b = self.old[0][1], self.new[0][1]
            parts = []
            if a.seq != b.seq:
                parts.append(f"seq {a.seq} -> {b.seq}")
            if a.length != b.length:
                parts.append(f"len {a.length} -> {b.length}")
            if a.segs != b.segs:
                parts.append(f"segs {a.segs} -> {b.segs}")
            if a.frame != b.frame:
                parts.append(f"first frame {a.frame} -> {b.frame}")
            if a.reason != b.reason and a.reason != NO_REASON:
                parts.append(f"reason {a.reason} -> {b.reason}")
            if a.digest != b.digest:
                if parts:
                    parts.append("bytes differ")
                else:
                    parts.append("same seq, size, segments and reason, but the packet bytes differ "
                                 "(a header field: TTL/hop limit, TOS, IP ID, flags, window, options, checksum)")
            return "; ".join(parts)
        return (f"golden has {_count(len(self.old))}{_sum(self.old)}, now {_count(len(self.new))}"
                f"{_sum(self.new)}")


def _count(n: int) -> str:
    return f"{n} packet{'s' if n != 1 else ''}"


def _sum(items: List[Tuple[int, Entry]]) -> str:
    if not items:
        return ""
    sizes = " + ".join(str(e.length) for _, e in items[:6]) + (" + ..." if len(items) > 6 else "")
    segs = sum(e.segs for _, e in items)
    return f" ({sizes} bytes, {segs} segments)"


def _comparable(e: Entry, ignore_reason: bool) -> tuple:
    return (e.seq, e.length, e.segs, e.frame, NO_REASON if ignore_reason else e.reason, e.digest)


def diff_entries(old: Sequence[Entry], new: Sequence[Entry]) -> List[Difference]:
    """Differences flow by flow (order of first appearance); when every flow
    agrees but the interleaving does not, one "order" difference."""
    # a kernel- or library-origin golden has no reasons (nor has a new expectation from
    # either, --from-kernel, --from-library): compare everything else
    ignore = any(bool(side) and all(e.reason == NO_REASON for e in side) for side in (old, new))
    by_flow_old: Dict[str, List[Tuple[int, Entry]]] = {}
    by_flow_new: Dict[str, List[Tuple[int, Entry]]] = {}
    for pos, e in enumerate(old):
        by_flow_old.setdefault(e.flow, []).append((pos, e))
    for pos, e in enumerate(new):
        by_flow_new.setdefault(e.flow, []).append((pos, e))
    flows = list(by_flow_old) + [f for f in by_flow_new if f not in by_flow_old]
    diffs: List[Difference] = []
    for flow in flows:
        a = by_flow_old.get(flow, [])
        b = by_flow_new.get(flow, [])
        ka = [_comparable(e, ignore) for _, e in a]
        kb = [_comparable(e, ignore) for _, e in b]
        if ka == kb:
            continue
        matcher = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                diffs.append(Difference(flow, a[i1:i2], b[j1:j2], min(i1, len(a)) + 1))
    if not diffs and len(old) == len(new):
        for pos, (x, y) in enumerate(zip(old, new)):
            if x.flow != y.flow:
                diffs.append(Difference(x.flow, [(pos, x)], [(pos, y)], 0, kind="order"))
                break
    return diffs


# ----------------------------------------------------------------------------
# checking one capture
# ----------------------------------------------------------------------------
@dataclass
class CaptureResult:
    capture: Optional[str]
    golden: str
    status: str
    packets: int = 0                       # delivered packets (this replay, else the golden's)
    frames: int = 0
    origin: str = ""
    settings_args: List[str] = field(default_factory=list)
    differences: List[Difference] = field(default_factory=list)
    message: str = ""
    cause: str = ""                        # a failure: whether the capture or grotool changed (golden digest)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.status in (FAIL, KEPT)

    @property
    def broken(self) -> bool:
        return self.status in (ERROR, MISSING)


def check_target(target: Target, *, update: bool = False, settings: Optional[StackSettings] = None,
                 from_kernel: bool = False, progress: Optional[Callable] = None, vm=None,
                 from_library: bool = False) -> CaptureResult:
    """Check (or with ``update`` write) one capture's golden.  An unreadable
    capture or golden becomes an ERROR result; a missing privilege or tool
    (EnvironmentProblem, --from-kernel, --from-library) is raised."""
    import time

    started = time.monotonic()
    result = CaptureResult(target.capture, target.golden, ERROR)
    try:
        _check(target, result, update, settings, from_kernel, progress, vm, from_library)
    except InputError as exc:
        result.status = ERROR
        result.message = str(exc)
    result.seconds = time.monotonic() - started
    return result


@dataclass(frozen=True)
class Origin:
    """Where check_all runs, for a job that may run elsewhere (a Dask worker
    with another working directory, or another machine): the directory that
    relative paths are relative to, and what was readable there."""

    directory: str
    capture_readable: bool
    golden_exists: bool


def _readable(path: Optional[str]) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.R_OK)


def _worker_problem(target: Target, origin: Origin) -> str:
    """A file that check_all's machine reads but this worker cannot: said plainly."""
    import socket

    for path, given, seen in ((target.capture, "capture", origin.capture_readable),
                              (target.golden, "golden", origin.golden_exists)):
        if not seen or not path or _readable(path):
            continue
        try:
            with open(path, "rb"):
                why = "not a readable file"
        except OSError as exc:
            why = exc.strerror or str(exc)
        return (f"the {given} {path} cannot be read on worker {socket.gethostname()} ({why}), though it can "
                f"where grotool check runs: workers read captures and goldens at the same absolute paths")
    return ""


def check_job(job: tuple) -> CaptureResult:
    """check_target for an executor (grotool.executor): one picklable argument
    (target, update, settings, from_kernel[, origin[, from_library]]), no progress callback.
    With an ``Origin`` (what check_all sends) relative paths are taken from its
    directory, and a file this worker cannot read while the origin could is
    an error saying so (not "no golden"); the result shows the paths as given."""
    target, update, settings, from_kernel = job[:4]
    origin: Optional[Origin] = job[4] if len(job) > 4 else None
    from_library = bool(job[5]) if len(job) > 5 else False
    if origin is None:
        return check_target(target, update=update, settings=settings, from_kernel=from_kernel,
                            from_library=from_library)
    given = target
    target = Target(os.path.join(origin.directory, given.capture) if given.capture else None,
                    os.path.join(origin.directory, given.golden), given.problem)
    problem = "" if target.problem else _worker_problem(target, origin)
    if problem:
        result = CaptureResult(given.capture, given.golden, ERROR, message=problem)
    else:
        result = check_target(target, update=update, settings=settings, from_kernel=from_kernel,
                              from_library=from_library)
    # as the user named them, whichever directory the worker runs in
    for absolute, shown in sorted(((target.capture, given.capture), (target.golden, given.golden)),
                                  key=lambda pair: -len(pair[0] or "")):
        if absolute and shown and absolute != shown:
            result.message = result.message.replace(absolute, shown)
    result.capture, result.golden = given.capture, given.golden
    return result


def check_all(targets: Sequence[Target], executor, *, update: bool = False,
              settings: Optional[StackSettings] = None, from_kernel: bool = False,
              progress: Optional[Callable[[int, int], None]] = None, from_library: bool = False
              ) -> List[CaptureResult]:
    """check_target for every target on an executor (grotool.executor: this
    process, local processes or a Dask cluster), results in the order of
    ``targets``.  ``progress(done, total)`` is called here as each capture
    completes; it only observes.  Each job carries this directory and what
    is readable here (Origin): a worker elsewhere reads absolute paths."""
    here = os.getcwd()
    jobs = [(t, update, settings, from_kernel,
             Origin(here, _readable(t.capture), os.path.exists(t.golden)), from_library) for t in targets]
    return executor.map(check_job, jobs, progress=progress)


def _check(target: Target, result: CaptureResult, update: bool, settings: Optional[StackSettings],
           from_kernel: bool, progress: Optional[Callable], vm=None, from_library: bool = False) -> None:
    if target.problem:
        raise InputError(f"{target.capture or target.golden}: {target.problem}")
    capture = target.capture
    golden: Optional[Golden] = None
    if os.path.exists(target.golden):
        golden = Golden.load(target.golden)
    elif not update:
        result.status = MISSING
        result.message = f"no golden {target.golden} (write one with grotool check --update)"
        return
    if golden is not None and not update:
        result.origin = golden.origin_text()
        result.settings_args = golden.settings_args
        entries, frames = replay_entries(capture, golden.settings, progress)
        result.packets, result.frames = len(entries), frames
        result.differences = diff_entries(golden.entries, entries)
        if frames != golden.frames:
            result.message = f"the capture has {frames} frames, the golden was written for {golden.frames}"
        result.status = FAIL if result.differences or frames != golden.frames else PASS
        if result.status == FAIL:
            result.cause = failure_cause(golden, capture)
        return
    # update: write a missing golden, or rewrite one
    use = settings or (golden.settings if golden is not None else Settings())
    if from_kernel:
        problem = kernel_settings_problem(use) if isinstance(use, DpdkSettings) else ""
        if problem:
            raise InputError(f"{capture}: {problem}")
        profile = oracle_profile(vm)
        if profile is not None:
            use = replace(use, kernel=profile)       # a check replays under the kernel's own profile
        entries, frames, detail = kernel_entries(capture, use, vm)
        new = Golden(os.path.basename(capture), frames, use, ORIGIN_KERNEL, detail, entries=entries)
    elif from_library:
        if not isinstance(use, DpdkSettings):
            raise InputError(f"{capture}: --from-library takes the expectation from the real librte_gro: "
                             "the golden needs --stack dpdk settings")
        entries, frames, detail = library_entries(capture, use)
        new = Golden(os.path.basename(capture), frames, use, ORIGIN_LIBRARY, detail, entries=entries)
    elif golden is not None and golden.origin in ORIGINS_REAL:
        # never overwrite the real kernel's (or librte_gro's) expectation with grotool's own output
        entries, frames = replay_entries(capture, golden.settings, progress)
        result.origin = golden.origin_text()
        result.settings_args = golden.settings_args
        result.packets, result.frames = len(entries), frames
        result.differences = diff_entries(golden.entries, entries)
        result.status = KEPT if result.differences else UNCHANGED
        if golden.origin == ORIGIN_KERNEL:
            result.message = "kernel-origin golden kept (regenerate it from the kernel with --from-kernel, as root)"
        else:
            result.message = "librte_gro-origin golden kept (regenerate it from the library with --from-library)"
        if result.differences:
            result.cause = failure_cause(golden, capture)
        return
    else:
        entries, frames = replay_entries(capture, use, progress)
        new = Golden(os.path.basename(capture), frames, use, entries=entries)
    new.capture_sha256 = capture_digest(capture)
    result.origin = new.origin_text()
    result.settings_args = new.settings_args
    result.packets, result.frames = len(entries), frames
    if golden is not None:
        result.differences = diff_entries(golden.entries, entries)
        same_header = (golden.settings == new.settings and golden.origin_text() == new.origin_text()
                       and golden.frames == new.frames and golden.capture == new.capture
                       and golden.capture_sha256 == new.capture_sha256 and golden.format == new.format)
        if not result.differences and same_header and golden.version == new.version:
            result.status = UNCHANGED
            return
    new.write(target.golden)
    result.status = UPDATED if golden is not None else WRITTEN


def capture_digest(capture: str) -> str:
    """sha256 of the capture file's bytes as stored (a .gz file: the compressed bytes)."""
    digest = hashlib.sha256()
    try:
        with open(capture, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(f"{capture}: cannot read: {exc.strerror}") from None
    return digest.hexdigest()


def failure_cause(golden: Golden, capture: str) -> str:
    """One line for a failed check: did the capture change, or grotool?  From
    the digest the golden recorded (computed here only when a check fails)."""
    if not golden.capture_sha256:
        return (f"the golden records no digest of its capture ({golden.format}; --update adds one): "
                "it cannot tell whether the capture or grotool changed")
    now = capture_digest(capture)
    if now == golden.capture_sha256:
        return (f"the capture is the one the golden was written for (sha256 {now[:DIGEST_HEX]}): "
                f"grotool's result changed (golden by grotool {golden.version}, now {__version__})")
    return (f"the capture changed since the golden was written (sha256 {golden.capture_sha256[:DIGEST_HEX]} "
            f"then, {now[:DIGEST_HEX]} now)")


def explain_command(capture: str, diff: Difference, settings_args: Sequence[str]) -> str:
    """The `grotool explain` command line that shows why (issue 10, part 2)."""
    import shlex

    first, last = diff.frames()
    frames = str(first) if first == last else f"{first}-{last}"
    return " ".join(["grotool", "explain", shlex.quote(capture), "--frame", frames]
                    + [shlex.quote(a) for a in settings_args])


def describe_difference(capture: str, diff: Difference, settings_args: Sequence[str]) -> List[str]:
    """Readable lines for one difference: flow, packet, old vs new, explain command."""
    if diff.kind == "order":
        pos, a = diff.old[0]
        _, b = diff.new[0]
        lines = [f"delivery #{pos + 1}: golden delivers {a.flow}, now {b.flow} ({diff.what_changed()})"]
    else:
        where = f"packet #{diff.packet} of the flow"
        positions = [p for p, _ in diff.new] or [p for p, _ in diff.old]
        lines = [f"{diff.flow}, {where} (delivered #{positions[0] + 1}): {diff.what_changed()}"]
        for label, items in (("golden", diff.old), ("now   ", diff.new)):
            if not items:
                lines.append(f"  {label}: nothing")
            for k, (_, e) in enumerate(items[:MAX_SHOWN_PACKETS]):
                lines.append(f"  {label if k == 0 else ' ' * len(label)}: {e.short()}")
            if len(items) > MAX_SHOWN_PACKETS:
                lines.append(f"  {' ' * len(label)}  ... {len(items) - MAX_SHOWN_PACKETS} more")
    lines.append(f"  why: {explain_command(capture, diff, settings_args)}")
    return lines


# ----------------------------------------------------------------------------
# JUnit XML
# ----------------------------------------------------------------------------
def junit_xml(results: Sequence[CaptureResult], max_differences: int = 20) -> bytes:
    """A JUnit XML report: one testsuite, one testcase per capture; a difference
    is a <failure>, an unreadable capture or golden an <error>."""
    import xml.etree.ElementTree as ET

    failures = sum(1 for r in results if r.failed)
    errors = sum(1 for r in results if r.broken)
    total_time = f"{sum(r.seconds for r in results):.3f}"
    suites = ET.Element("testsuites", name="grotool check", tests=str(len(results)), failures=str(failures),
                        errors=str(errors), time=total_time)
    suite = ET.SubElement(suites, "testsuite", name="grotool check", tests=str(len(results)),
                          failures=str(failures), errors=str(errors), skipped="0", time=total_time)
    for r in results:
        name = r.capture or r.golden
        case = ET.SubElement(suite, "testcase", classname="grotool.check", name=name, time=f"{r.seconds:.3f}")
        if r.failed:
            lines = []
            if r.message:
                lines.append(r.message)
            if r.cause:
                lines.append(r.cause)
            for d in r.differences[:max_differences]:
                lines += describe_difference(name, d, r.settings_args)
            if len(r.differences) > max_differences:
                lines.append(f"... {len(r.differences) - max_differences} more differences")
            failure = ET.SubElement(case, "failure", type="golden-mismatch",
                                    message=f"{len(r.differences)} difference(s) from {r.golden}")
            failure.text = "\n".join(lines)
        elif r.broken:
            error = ET.SubElement(case, "error", type="unreadable" if r.status == ERROR else "missing-golden",
                                  message=r.message)
            error.text = r.message
        else:
            out = ET.SubElement(case, "system-out")
            out.text = f"{r.status}: {r.packets} packets, origin {r.origin}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
