"""The kernel oracle inside a virtual machine running another Linux kernel
(``grotool kernel --vm IMAGE``), with no root needed on the host.

qemu boots the guest kernel with a small initramfs (static busybox and the
virtio/9p modules), which mounts the host's root file system read-only over
virtio-9p, chroots into it and runs the host's own python3 on this grotool
checkout: ``python -m grotool.oracle.vmguest``, the same oracle code
(grotool.oracle.kernel) as ``grotool kernel`` on the host.  A second, writable
9p share (a private temporary directory) carries the jobs and their results:
the host writes ``jobs/N.job``, the guest answers ``results/N.result``
(pickles: host and guest are the same Python on the same files).  One boot
serves any number of replays::

    with VmSession("debian:6.1") as vm:
        for frames in captures:
            result = vm.replay(frames, host=HostState.build())

Images (resolve_image):

* ``debian:6.1``, ``debian:6.12``: the newest generic
  ``linux-image-6.1.0-NN-amd64`` / ``linux-image-6.12.NN+deb12-amd64`` on the
  configured apt sources, fetched once with ``apt-get download`` and unpacked
  with ``dpkg-deb -x`` into the cache (``$GROTOOL_VM_CACHE``, else
  ``$XDG_CACHE_HOME/grotool/vm``, else ``~/.cache/grotool/vm``); ``depmod -b``
  indexes its modules;
* a path to a vmlinuz, with ``modules`` = its ``/lib/modules/RELEASE``.

Acceleration: KVM when /dev/kvm is usable and the CPU has vmx or svm, else
TCG (``-accel tcg -cpu max``), about 15 s to boot a Debian kernel.

Every failure to get a guest (no qemu, no busybox, a download that fails, a
kernel without virtio-9p or veth, a guest that does not come up in time) is
an EnvironmentProblem (exit 4), and nothing is left behind: qemu is killed
(also when this process dies: PR_SET_PDEATHSIG) and the job directory removed.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import itertools
import lzma
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from ..errors import EnvironmentProblem, GrotoolError, InputError
from .hoststate import HostState
from .tools import cache_dir as shared_cache_dir, run_tool

__all__ = ["VmSession", "VmImage", "resolve_image", "cache_dir", "IMAGES", "kvm_usable", "GUEST_FLUSH_TIMEOUT_NS"]

# debian:SERIES -> the generic amd64 image packages of that series (newest NN wins)
IMAGES = {
    "debian:6.1": re.compile(r"^linux-image-6\.1\.0-(\d+)-amd64$"),
    "debian:6.12": re.compile(r"^linux-image-6\.12\.(\d+)\+deb12-amd64$"),
}
# what the initramfs loads to reach the host root: virtio PCI transport and 9p
BOOT_MODULES = ("virtio_pci", "9pnet_virtio", "9p")
# what the guest loads before it reports ready (the oracle's devices and tc filter)
GUEST_MODULES = ("veth",)
GUEST_OPTIONAL_MODULES = ("8021q", "vxlan", "geneve", "sch_ingress", "cls_bpf", "udp_tunnel", "ip6_udp_tunnel")
# gro_flush_timeout inside the guest: under TCG a Python loop sends 64 frames in a few
# milliseconds to 25 ms (cold), more than half of the host's 5 ms; 100 ms leaves room (see docs/kernel-vm.md)
GUEST_FLUSH_TIMEOUT_NS = 100_000_000
DEFAULT_BOOT_TIMEOUT = 180.0
DEFAULT_MEMORY_MB = 1024
POLL_S = 0.02
_PR_SET_PDEATHSIG = 1


def cache_dir() -> Path:
    """Where kernel images and initramfs files are kept between runs ($GROTOOL_VM_CACHE)."""
    return shared_cache_dir("vm", "GROTOOL_VM_CACHE")


def _need_tool(name: str, package: str, why: str) -> str:
    path = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/sbin/{name}") if os.access(p, os.X_OK)),
                                      None)
    if path is None:
        raise EnvironmentProblem(f"grotool kernel --vm needs '{name}' ({package}) {why}")
    return path


# -----------------------------------------------------------------------------
# images
# -----------------------------------------------------------------------------
@dataclass(frozen=True)
class VmImage:
    """A bootable kernel: its vmlinuz, a root under which lib/modules/RELEASE holds
    its modules (the tree modprobe -d reads), its release and its build config."""

    name: str
    vmlinuz: Path
    modules_root: Path
    release: str
    config: Optional[Path]
    package: Optional[str] = None

    @property
    def modules_dir(self) -> Path:
        return self.modules_root / "lib" / "modules" / self.release


def newest_package(image: str) -> str:
    """The newest package of a debian:SERIES image on the configured apt sources."""
    pattern = IMAGES[image]
    _need_tool("apt-cache", "apt", "to find the kernel package of " + image)
    names = run_tool(["apt-cache", "pkgnames", "linux-image-"], f"looking up {image}", timeout=120).stdout.split()
    found = [(int(m.group(1)), n) for n in names for m in [pattern.match(n)] if m]
    if not found:
        raise EnvironmentProblem(f"no {pattern.pattern.strip('^$')} package on the configured apt sources "
                                 f"(for {image}); run apt-get update, or give a vmlinuz path and --vm-modules")
    return max(found)[1]


def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def fetch_debian(image: str, log: Optional[Callable[[str], None]] = None) -> VmImage:
    """Download and unpack (once; later calls use the cache) the newest package of ``image``."""
    package = newest_package(image)
    root = cache_dir() / package
    with _lock(cache_dir() / f".{package}.lock"):
        if not (root / ".complete").exists():
            _need_tool("apt-get", "apt", "to download " + package)
            _need_tool("dpkg-deb", "dpkg", "to unpack " + package)
            depmod = _need_tool("depmod", "kmod", "to index the guest kernel's modules")
            work = Path(tempfile.mkdtemp(prefix=f".{package}-", dir=cache_dir()))
            try:
                if log:
                    log(f"downloading {package}")
                run_tool(["apt-get", "download", "-q", package], f"downloading {package}", cwd=work)
                debs = sorted(work.glob("*.deb"))
                if not debs:
                    raise EnvironmentProblem(f"downloading {package}: apt-get download left no .deb")
                tree = work / "tree"
                run_tool(["dpkg-deb", "-x", str(debs[0]), str(tree)], f"unpacking {package}")
                release = _release_of(tree)
                run_tool([depmod, "-b", str(tree), release], f"indexing the modules of {package}")
                debs[0].unlink()
                shutil.rmtree(root, ignore_errors=True)
                os.rename(tree, root)
                (root / ".complete").write_text(package + "\n")
            finally:
                shutil.rmtree(work, ignore_errors=True)
    release = _release_of(root)
    config = root / "boot" / f"config-{release}"
    return VmImage(image, root / "boot" / f"vmlinuz-{release}", root, release,
                   config if config.exists() else None, package)


def _release_of(tree: Path) -> str:
    releases = sorted(p.name for p in (tree / "lib" / "modules").iterdir() if p.is_dir()) \
        if (tree / "lib" / "modules").is_dir() else []
    if len(releases) != 1:
        raise EnvironmentProblem(f"{tree}: expected one lib/modules/RELEASE directory, found {len(releases)}")
    return releases[0]


def resolve_image(image: str, modules: Optional[str] = None,
                  log: Optional[Callable[[str], None]] = None) -> VmImage:
    """``debian:6.1``/``debian:6.12`` (downloaded into the cache), or a vmlinuz path
    with ``modules``, its lib/modules/RELEASE directory."""
    if image in IMAGES:
        if modules:
            raise InputError(f"--vm-modules goes with a vmlinuz path, not with {image}")
        return fetch_debian(image, log)
    if image.startswith("debian:"):
        raise InputError(f"unknown VM image {image!r}: use one of {', '.join(IMAGES)}, or a vmlinuz path")
    vmlinuz = Path(image)
    if not vmlinuz.is_file():
        raise InputError(f"VM image {image!r} is neither {' nor '.join(IMAGES)} nor a kernel image file")
    if not modules:
        raise InputError("a vmlinuz needs --vm-modules DIR (its /lib/modules/RELEASE directory)")
    mdir = Path(modules).resolve()
    if not mdir.is_dir():
        raise InputError(f"--vm-modules {modules}: not a directory")
    release = mdir.name
    if mdir.parent.name == "modules" and mdir.parent.parent.name == "lib":
        root = mdir.parent.parent.parent
    else:                      # give modprobe -d its ROOT/lib/modules/RELEASE layout through a link
        root = cache_dir() / "roots" / release
        (root / "lib" / "modules").mkdir(parents=True, exist_ok=True)
        link = root / "lib" / "modules" / release
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(mdir)
    if not (mdir / "modules.dep").exists():
        depmod = _need_tool("depmod", "kmod", "to index the guest kernel's modules")
        run_tool([depmod, "-b", str(root), release], f"indexing {mdir}")
    config = next((p for p in (mdir / "config", vmlinuz.parent / f"config-{release}") if p.is_file()), None)
    return VmImage(str(vmlinuz), vmlinuz.resolve(), root, release, config)


# -----------------------------------------------------------------------------
# initramfs
# -----------------------------------------------------------------------------
INIT_SCRIPT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
fail() { echo "grotool-vm: $*"; poweroff -f; sleep 5; }
while read -r m; do
    [ -n "$m" ] && { insmod "/lib/mods/$m" || fail "insmod $m failed"; }
done < /modules.order
grep -q 9p /proc/filesystems || fail "this kernel has no 9p file system (CONFIG_9P_FS)"
O=trans=virtio,version=9p2000.L,msize=262144
mkdir -p /host /job
mount -t 9p -o $O,cache=loose,ro hostroot /host || fail "cannot mount the host root over virtio-9p"
mount -t 9p -o $O grotooljob /job || fail "cannot mount the job directory over virtio-9p"
. /job/guest.env
for d in /run /tmp /var/tmp; do mount -t tmpfs tmpfs /host$d || fail "tmpfs on $d"; done
mkdir -p /host/run/grotool-job
mount --move /job /host/run/grotool-job
mount --move /proc /host/proc
mount --move /sys /host/sys
mount --move /dev /host/dev
mount -t devpts devpts /host/dev/pts 2>/dev/null
mount -t bpf bpf /host/sys/fs/bpf 2>/dev/null
cd /host
chroot /host /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp \
    PYTHONPATH="$GROTOOL_PYTHONPATH" PYTHONDONTWRITEBYTECODE=1 GROTOOL_PURE="$GROTOOL_PURE" \
    GROTOOL_KERNEL_CONFIG="$GROTOOL_KERNEL_CONFIG" GROTOOL_VM_MODULES_ROOT="$GROTOOL_VM_MODULES_ROOT" \
    "$GROTOOL_PYTHON" -m grotool.oracle.vmguest /run/grotool-job
echo "grotool-vm: guest server ended ($?)"
poweroff -f
sleep 5
"""


def _is_static_elf(path: str) -> bool:
    """No PT_INTERP program header: runs without a dynamic loader (in the initramfs)."""
    import struct

    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))


def _module_index(image: VmImage):
    """({module name: path relative to modules_dir}, {module path: [dependency paths]}, builtin names)."""
    def name(path: str) -> str:
        base = os.path.basename(path)
        return base.split(".ko")[0].replace("-", "_")

    deps: Dict[str, List[str]] = {}
    try:
        for line in (image.modules_dir / "modules.dep").read_text().splitlines():
            mod, _, rest = line.partition(":")
            deps[mod] = rest.split()
    except OSError as exc:
        raise EnvironmentProblem(f"{image.modules_dir}/modules.dep: {exc.strerror}") from None
    builtin = set()
    try:
        builtin = {name(ln) for ln in (image.modules_dir / "modules.builtin").read_text().split()}
    except OSError:
        pass
    return {name(m): m for m in deps}, deps, builtin


def _load_order(image: VmImage, wanted: Sequence[str]) -> List[str]:
    """Module paths to insmod, dependencies first; EnvironmentProblem for a module the
    kernel has neither built in nor as a module."""
    by_name, deps, builtin = _module_index(image)
    order: List[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for dep in deps.get(path, []):
            visit(dep)
        order.append(path)

    for mod in wanted:
        if mod in by_name:
            visit(by_name[mod])
        elif mod not in builtin:
            feature = {"9p": "the 9p file system (CONFIG_9P_FS)", "9pnet_virtio": "virtio-9p (CONFIG_NET_9P_VIRTIO)",
                       "virtio_pci": "virtio PCI (CONFIG_VIRTIO_PCI)"}.get(mod, mod)
            raise EnvironmentProblem(f"the kernel {image.name} ({image.release}) lacks {feature}, "
                                     "which grotool kernel --vm needs to reach the host's files")
    return order


def _read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".zst"):
        zstd = _need_tool("zstd", "zstd", f"to unpack {path.name}")
        return subprocess.run([zstd, "-dc", str(path)], capture_output=True, check=True).stdout
    if path.name.endswith(".gz"):
        import gzip

        return gzip.decompress(data)
    return data


def _cpio(entries) -> bytes:
    """A newc cpio archive of (name, mode, data) entries (directories have data None)."""
    out = bytearray()
    for ino, (name, mode, data) in enumerate(itertools.chain(entries, [("TRAILER!!!", 0, b"")]), 1):
        data = data or b""
        raw = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0]
        out += b"070701" + b"".join(b"%08X" % v for v in fields) + raw
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def build_initramfs(image: VmImage, out_dir: Path) -> Path:
    """The initramfs (static busybox, the boot modules, /init), cached beside the image."""
    busybox = shutil.which("busybox")
    if busybox is None or not _is_static_elf(os.path.realpath(busybox)):
        raise EnvironmentProblem("grotool kernel --vm needs a static busybox on PATH (busybox-static)")
    order = _load_order(image, BOOT_MODULES)
    st = os.stat(os.path.realpath(busybox))
    digest = hashlib.sha256((INIT_SCRIPT + "\n".join(order)).encode()).hexdigest()[:12]
    key = f"{image.release}-{int(st.st_mtime)}-{st.st_size}-{digest}"
    target = out_dir / f"initramfs-{key}.cpio"
    if target.exists():
        return target
    entries = [(d, 0o40755, None) for d in ("bin", "dev", "proc", "sys", "lib", "lib/mods", "host", "job")]
    entries.append(("bin/busybox", 0o100755, Path(os.path.realpath(busybox)).read_bytes()))
    entries.append(("init", 0o100755, INIT_SCRIPT.encode()))
    names = []
    for i, rel in enumerate(order):
        fname = f"{i:02d}-{os.path.basename(rel).split('.ko')[0]}.ko"
        entries.append((f"lib/mods/{fname}", 0o100644, _read_module(image.modules_dir / rel)))
        names.append(fname)
    entries.append(("modules.order", 0o100644, ("\n".join(names) + "\n").encode()))
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".initramfs-", dir=out_dir)
    with os.fdopen(fd, "wb") as f:
        f.write(_cpio(entries))
    os.replace(tmp, target)
    return target


# -----------------------------------------------------------------------------
# qemu
# -----------------------------------------------------------------------------
def kvm_usable() -> bool:
    """/dev/kvm that this user can open, on a CPU with hardware virtualisation
    (a /dev/kvm without vmx/svm makes qemu abort or hang after the BIOS)."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), [])
    except OSError:
        return False
    return "vmx" in flags or "svm" in flags


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def checkout_root() -> str:
    """The directory that holds this grotool package (what the guest puts on PYTHONPATH)."""
    return str(Path(__file__).resolve().parent.parent.parent)


class VmSession:
    """One guest, booted on ``__enter__`` and powered off on ``__exit__``; any number
    of ``replay`` calls in between, each in the guest's own network namespace
    (reused between calls with the same host state)."""

    def __init__(self, image: str, *, modules: Optional[str] = None, boot_timeout: float = DEFAULT_BOOT_TIMEOUT,
                 memory_mb: int = DEFAULT_MEMORY_MB, accel: Optional[str] = None,
                 log: Optional[Callable[[str], None]] = None):
        self.image_spec = image
        self.modules = modules
        self.boot_timeout = float(boot_timeout)
        self.memory_mb = int(memory_mb)
        self.accel = accel
        self.log = log
        self.image: Optional[VmImage] = None
        self.proc: Optional[subprocess.Popen] = None
        self.jobdir: Optional[Path] = None
        self.guest: dict = {}
        self.boot_seconds = 0.0
        self._ids = itertools.count(1)

    # -- lifetime ---------------------------------------------------------------------
    def __enter__(self) -> "VmSession":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        qemu = shutil.which("qemu-system-x86_64")
        if qemu is None:
            raise EnvironmentProblem("grotool kernel --vm needs 'qemu-system-x86_64' (qemu-system-x86)")
        self.image = resolve_image(self.image_spec, self.modules, self.log)
        initrd = build_initramfs(self.image, cache_dir() / "initramfs")
        self.jobdir = Path(tempfile.mkdtemp(prefix="grotool-vm-"))
        (self.jobdir / "jobs").mkdir()
        (self.jobdir / "results").mkdir()
        env = {"GROTOOL_PYTHON": os.path.realpath(sys.executable), "GROTOOL_PYTHONPATH": checkout_root(),
               "GROTOOL_PURE": os.environ.get("GROTOOL_PURE", ""),
               "GROTOOL_KERNEL_CONFIG": str(self.image.config or ""),
               "GROTOOL_VM_MODULES_ROOT": str(self.image.modules_root)}
        (self.jobdir / "guest.env").write_text("".join(f"{k}='{v}'\n" for k, v in env.items()))
        accel = self.accel or ("kvm" if kvm_usable() else "tcg")
        self.accel = accel
        cpu = "host" if accel == "kvm" else "max"
        console = self.jobdir / "console.log"
        args = [qemu, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                "-accel", accel, "-cpu", cpu, "-smp", "1", "-m", str(self.memory_mb),
                "-kernel", str(self.image.vmlinuz), "-initrd", str(initrd),
                "-append", "console=ttyS0 panic=-1 quiet loglevel=3 mitigations=off",
                "-serial", f"file:{console}", "-monitor", "none", "-nic", "none",
                "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
                "-virtfs", f"local,path={self.jobdir},mount_tag=grotooljob,security_model=none,multidevs=remap"]
        self.qemu_args = args
        started = time.monotonic()
        if self.log:
            self.log(f"booting {self.image.release} under qemu ({accel})")
        try:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(self.jobdir / "qemu.err", "wb"), start_new_session=True,
                                         preexec_fn=_die_with_parent)
        except OSError as exc:
            raise EnvironmentProblem(f"cannot start qemu: {exc.strerror}") from None
        ready = self.jobdir / "ready.pickle"
        deadline = started + self.boot_timeout
        while not ready.exists():
            if self.proc.poll() is not None:
                raise EnvironmentProblem(f"the {self.image.release} guest stopped before it came up: "
                                         f"{self._last_words()}")
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"the {self.image.release} guest did not come up within "
                                         f"{self.boot_timeout:g} s ({accel}): {self._last_words()}")
            time.sleep(POLL_S * 5)
        self.guest = pickle.loads(ready.read_bytes())
        self.boot_seconds = time.monotonic() - started
        if self.guest.get("error"):
            raise EnvironmentProblem(f"the {self.image.release} guest cannot run the oracle: {self.guest['error']}")
        if self.log:
            self.log(f"guest {self.guest.get('release')} up in {self.boot_seconds:.1f} s")

    def _last_words(self) -> str:
        """The most telling line of the guest console (or qemu's stderr)."""
        lines: List[str] = []
        for name in ("console.log", "qemu.err"):
            try:
                text = (self.jobdir / name).read_text(errors="replace") if self.jobdir else ""
            except OSError:
                continue
            lines += [ln.strip() for ln in text.splitlines() if ln.strip()]
        ours = [ln for ln in lines if "grotool-vm:" in ln or "Kernel panic" in ln or "qemu" in ln.lower()
                or "Error" in ln or "Traceback" in ln]
        pick = ours or lines
        return pick[-1][:300] if pick else "no console output"

    def close(self) -> None:
        """Stop the guest (kill qemu) and remove the job directory.  Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            if self.jobdir is not None:
                try:
                    (self.jobdir / "stop").write_text("")
                except OSError:
                    pass
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc is not None and proc.stderr is not None:
            proc.stderr.close()
        jobdir, self.jobdir = self.jobdir, None
        if jobdir is not None:
            shutil.rmtree(jobdir, ignore_errors=True)

    # -- replays -----------------------------------------------------------------------
    def describe(self) -> dict:
        """What the sidecar records about the VM."""
        img = self.image
        return {"image": self.image_spec, "package": img.package if img else None,
                "vmlinuz": str(img.vmlinuz) if img else None, "release": self.guest.get("release"),
                "version": self.guest.get("version"), "accel": self.accel, "qemu_cpu": "host" if self.accel == "kvm" else "max",
                "boot_seconds": round(self.boot_seconds, 2), "modules": self.guest.get("modules", {}),
                "gro_flush_timeout_ns": self.guest.get("flush_timeout_ns")}

    def kernel_config(self) -> Dict[str, str]:
        """The guest kernel's build options that matter to GRO (netns.CONFIG_OPTIONS), from
        the image's config file; {} when the image has none."""
        from .netns import config_file

        return config_file(str(self.image.config)) if self.image and self.image.config else {}

    def replay(self, frames: Sequence[bytes], timestamps: Optional[Sequence[int]] = None, *, csum: str = "auto",
               host: Optional[HostState] = None, udp_gro: Optional[str] = None, batch: int = 64,
               rss_key: Optional[bytes] = None, max_seconds: float = 300, with_hint: bool = True,
               guest_env: Optional[Dict[str, str]] = None):
        """Replay Ethernet frames in the guest: a KernelReplayResult as kernel_replay gives,
        its ``settings["vm"]`` describing the guest.  A GrotoolError raised in the guest is
        raised here as the same class with the same message.  ``guest_env``: environment
        variables the guest's oracle sees while it sets up this replay's namespace (e.g.
        GROTOOL_ORACLE_XDP=1); replays with other values get their own namespace."""
        from .kernel import check_frame

        if self.proc is None or self.jobdir is None:
            raise RuntimeError("VmSession.replay outside its 'with' block")
        if host is None:
            host = HostState.build(udp_gro=udp_gro or "off")
        else:
            host = host.with_legacy_udp_gro(udp_gro)
        frames = [bytes(f) for f in frames]
        for i, f in enumerate(frames):
            check_frame(f, i)
        job_id = next(self._ids)
        job = {"frames": frames, "timestamps": list(timestamps) if timestamps is not None else None,
               "csum": csum, "host": host, "batch": batch, "rss_key": rss_key, "hint": with_hint,
               "env": dict(guest_env or {})}
        tmp = self.jobdir / "jobs" / f".{job_id}.tmp"
        tmp.write_bytes(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        os.rename(tmp, self.jobdir / "jobs" / f"{job_id:08d}.job")
        result_path = self.jobdir / "results" / f"{job_id:08d}.result"
        deadline = time.monotonic() + max_seconds
        while not result_path.exists():
            if self.proc.poll() is not None:
                self.proc = None
                raise EnvironmentProblem(f"the {self.guest.get('release')} guest stopped during a replay: "
                                         f"{self._last_words()}")
            if time.monotonic() > deadline:
                raise EnvironmentProblem(f"kernel replay in the VM did not finish within {max_seconds:g} s "
                                         "(--max-seconds)")
            time.sleep(POLL_S)
        answer = pickle.loads(result_path.read_bytes())
        result_path.unlink()
        if answer.get("error"):
            cls = {c.__name__: c for c in _error_classes()}.get(answer["error_class"], EnvironmentProblem)
            raise cls(answer["error"])
        result = answer["result"]
        result.settings["vm"] = self.describe()
        result.settings["vm"]["replay_seconds"] = round(answer.get("seconds", 0.0), 3)
        return result


def _error_classes():
    from .kernel import UnreliableRun
    from .netns import KernelLacksFeature

    return [GrotoolError, InputError, EnvironmentProblem, KernelLacksFeature, UnreliableRun]
