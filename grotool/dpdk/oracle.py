"""The real librte_gro as an oracle (``grotool dpdk``).

On first use, Debian's DPDK 22.11 is fetched with ``apt-get download`` and
unpacked with ``dpkg-deb -x`` (no install: libdpdk-dev alone would pull 216
packages) into ``$GROTOOL_DPDK_CACHE``, else ``$XDG_CACHE_HOME/grotool/dpdk``,
else ``~/.cache/grotool/dpdk``; a small C harness (harness.c beside this file)
is compiled against it there.  The harness runs without root: EAL with
``--no-huge --no-pci -m 256 --no-shconf -l 0 --no-telemetry``, the ring
mempool driver linked into the harness.  Each frame becomes an mbuf whose
packet_type and l2/l3/l4 lengths come from grotool.dpdk.classify (the same
classification the model reads).  Missing apt, dpkg-deb, the packages or a C
compiler: EnvironmentProblem (exit 4).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import List, Sequence

from ..errors import EnvironmentProblem, InputError
from ..oracle.tools import cache_dir as shared_cache_dir, run_tool
from .classify import classify
from .engine import DpdkPacket, DpdkSettings

# What librte_gro.so.23 and the ring mempool driver need at run time, and the headers
# (libdpdk-dev; its rte_string_fns.h includes libbsd's <bsd/string.h>).
PACKAGES = ("librte-gro23", "librte-mempool-ring23", "librte-eal23", "librte-mbuf23", "librte-mempool23",
            "librte-ring23", "librte-kvargs23", "librte-telemetry23", "librte-ethdev23", "librte-meter23",
            "librte-net23", "libdpdk-dev", "libbsd-dev")
EAL_ARGS = ("--no-huge", "--no-pci", "-m", "256", "--no-shconf", "-l", "0", "--no-telemetry")
LIBDIR = "usr/lib/x86_64-linux-gnu"
GRO_TYPE_BITS = {"tcp4": 1 << 0, "vxlan_tcp4": 1 << 1, "udp4": 1 << 2, "vxlan_udp4": 1 << 3}   # rte_gro.h
HARNESS_SOURCE = Path(__file__).with_name("harness.c")
# mbuf data room is a uint16_t that also holds the headroom (RTE_PKTMBUF_HEADROOM 128)
MAX_FRAME = 65535 - 128
HARNESS_LINK = ("librte_mempool_ring", "librte_gro", "librte_mbuf", "librte_mempool", "librte_eal")   # cache key


def cache_dir() -> Path:
    """Where Debian's DPDK and the harness are kept between runs ($GROTOOL_DPDK_CACHE)."""
    return shared_cache_dir("dpdk", "GROTOOL_DPDK_CACHE")


def _need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise EnvironmentProblem(f"grotool dpdk needs '{tool}' {why}")
    return path


def _fetch(root: Path) -> None:
    """apt-get download + dpkg-deb -x of PACKAGES into root (once)."""
    _need("apt-get", "(apt) to download Debian's DPDK 22.11")
    _need("dpkg-deb", "(dpkg) to unpack Debian's DPDK 22.11")
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root.parent))
    try:
        os.chmod(work, 0o755)    # apt's _apt user writes the downloads here
        run_tool(["apt-get", "download", "-q", *PACKAGES], "downloading DPDK 22.11 (apt-get download)", cwd=work)
        tree = work / "tree"
        for deb in sorted(work.glob("*.deb")):
            run_tool(["dpkg-deb", "-x", str(deb), str(tree)], f"unpacking {deb.name}")
        if not (tree / LIBDIR / "librte_gro.so.23").exists():
            raise EnvironmentProblem("downloading DPDK 22.11: librte_gro.so.23 not in the packages")
        shutil.rmtree(root, ignore_errors=True)
        os.rename(tree, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def harness_path() -> Path:
    """The compiled harness (fetching DPDK and compiling on first use)."""
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    recipe = HARNESS_SOURCE.read_bytes() + " ".join(HARNESS_LINK).encode()
    digest = hashlib.sha256(recipe).hexdigest()[:16]
    exe = base / f"harness-{digest}"
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        root = base / "root"
        if not (root / LIBDIR / "librte_gro.so.23").exists():
            _fetch(root)
        if not exe.exists():
            cc = shutil.which("cc") or shutil.which("gcc")
            if cc is None:
                raise EnvironmentProblem("grotool dpdk needs a C compiler (cc) to build its harness")
            lib = root / LIBDIR
            tmp = base / f".{exe.name}.tmp"
            # -msse4.2: Debian builds DPDK for that baseline, and rte_memcpy.h's inlines need it
            run_tool([cc, "-O1", "-msse4.2", "-o", str(tmp), str(HARNESS_SOURCE),
                  f"-I{root}/usr/include", f"-I{root}/usr/include/dpdk",
                  f"-I{root}/usr/include/x86_64-linux-gnu/dpdk", f"-L{lib}",
                  # the ring mempool driver linked in (its constructor registers the ops), not loaded
                  # with -d: EAL refuses a plugin under any world-writable directory (a HOME in /tmp)
                  "-Wl,--no-as-needed", "-l:librte_mempool_ring.so.23",
                  "-l:librte_gro.so.23", "-l:librte_mbuf.so.23", "-l:librte_mempool.so.23", "-l:librte_eal.so.23",
                  f"-Wl,--disable-new-dtags,-rpath,{lib}"], "building the DPDK harness")
            os.rename(tmp, exe)
    return exe


def library_version() -> str:
    """The version of the fetched DPDK (its Debian changelog's first line), e.g.
    "22.11.11-0+deb12u1"; "22.11" when the changelog is not there."""
    import gzip
    import re

    changelog = cache_dir() / "root" / "usr" / "share" / "doc" / "librte-gro23" / "changelog.Debian.gz"
    try:
        with gzip.open(changelog, "rt", errors="replace") as f:
            m = re.match(r"^\S+ \(([^)\s]+)\)", f.readline())
    except (OSError, EOFError):
        m = None
    return m[1] if m else "22.11"


def _mbufs_needed(count: int, settings: DpdkSettings) -> int:
    """One mbuf per frame the library can hold at once: a merged packet is a chain of
    its frames' mbufs, so heavy mode holds up to every frame between two flushes."""
    window = settings.burst * (settings.flush_every if settings.mode == "heavy" else 1)
    return min(count, window) + 64


def _memory_mb(frames: Sequence[bytes], settings: DpdkSettings) -> int:
    """EAL memory (-m): 256 MB, more when the mbuf pool needs it."""
    longest = max((len(f) for f in frames), default=60)
    pool = _mbufs_needed(len(frames), settings) * (max(longest, 60) + 128 + 256)
    return max(256, (pool >> 20) + 128)


def _encode(frames: Sequence[bytes], settings: DpdkSettings) -> bytes:
    longest = max((len(f) for f in frames), default=60)
    if longest > MAX_FRAME:
        raise InputError(f"a frame of {longest} bytes does not fit one mbuf (at most {MAX_FRAME})")
    mbufs = _mbufs_needed(len(frames), settings)
    types = sum(GRO_TYPE_BITS[t] for t in settings.gro_types)
    parts = [struct.pack("<7IQ", 1 if settings.mode == "heavy" else 0, settings.burst, settings.flush_every,
                         settings.max_flows, settings.max_items, max(longest, 60), mbufs, types)]
    for frame in frames:
        m = classify(frame, settings.vxlan_ports)
        parts.append(struct.pack("<IIHHHHHH", len(frame), m.packet_type, m.l2_len, m.l3_len, m.l4_len,
                                 m.outer_l2_len, m.outer_l3_len, 0))
        parts.append(frame)
    return b"".join(parts)


def run_library(frames: Sequence[bytes], settings: DpdkSettings, timeout: float = 300) -> List[DpdkPacket]:
    """What librte_gro returns for these Ethernet frames, in its order."""
    problem = settings.problem()
    if problem:
        raise InputError(problem)
    exe = harness_path()
    root = cache_dir() / "root"
    lib = root / LIBDIR
    args = [str(exe), *EAL_ARGS]
    args[args.index("-m") + 1] = str(_memory_mb(frames, settings))
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib))
    try:
        proc = subprocess.run(args, input=_encode(frames, settings), capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"the DPDK harness did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        err = [ln for ln in proc.stderr.decode(errors="replace").splitlines() if "grotool-dpdk" in ln or "FATAL" in ln]
        raise EnvironmentProblem(f"the DPDK harness failed (exit {proc.returncode})"
                                 + (f": {err[-1]}" if err else ""))
    return _decode(proc.stdout)


def _decode(out: bytes) -> List[DpdkPacket]:
    packets, pos = [], 0
    while True:
        (n,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if n == 0xFFFFFFFF:
            return packets
        covers = list(struct.unpack_from(f"<{n}I", out, pos))
        pos += 4 * n
        (length,) = struct.unpack_from("<I", out, pos)
        pos += 4
        packets.append(DpdkPacket(out[pos:pos + length], covers, "", -1))
        pos += length
