"""A private network namespace holding one veth pair, configured so that the
GRO of the receiving end can be driven deterministically
(shared/spec/kernel-oracle.md, section 2).

Nothing is created outside the namespace, and no address, route or socket
exists inside it apart from the oracle's own AF_PACKET sockets.  The name
carries the creating process's pid (``grotool-o<pid>-<random>``): a run killed
with SIGKILL leaves a namespace that the next run recognises as stale (its
process is gone, or the pid now belongs to a younger process) and removes.

The system tools do the configuration (``ip``, ``ethtool``, ``tc``; sysfs and
sysctl writes through ``ip netns exec NS sh -c ...``).  Sockets enter the
namespace with setns(2) on the calling thread only, and switch back at once.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
from typing import Dict, List, Optional, Set

from ..errors import EnvironmentProblem

PREFIX = "grotool-o"
NAME_RE = re.compile(r"^grotool-o(\d+)-[0-9a-f]+$")
NETNS_DIR = "/run/netns"
TX_DEV = "gtx"
RX_DEV = "grx"
MTU = 65535
CLONE_NEWNET = 0x40000000
UDP_GRO_MODES = ("off", "forward", "fraglist")
_TOOL_PACKAGES = {"ip": "iproute2", "ethtool": "ethtool"}

_active: Set[str] = set()          # namespaces this process currently uses
_active_lock = threading.Lock()


def kernel_config(options=("CONFIG_VLAN_8021Q", "CONFIG_HZ", "CONFIG_MAX_SKB_FRAGS")) -> Dict[str, str]:
    """Build options that change GRO decisions, from /proc/config.gz when the kernel
    exposes it ("n" for an option that is not set); {} when it does not."""
    import gzip

    found: Dict[str, str] = {}
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                for opt in options:
                    if line.startswith(opt + "="):
                        found[opt] = line.strip().split("=", 1)[1]
                    elif line.startswith(f"# {opt} is not set"):
                        found[opt] = "n"
    except (OSError, EOFError):
        pass
    return found


def check_environment() -> None:
    """Raise EnvironmentProblem (exit 4) with one line naming what is missing."""
    problems = []
    if os.geteuid() != 0:
        problems.append("root (it creates a private network namespace with a veth pair)")
    missing = [t for t in ("ip", "ethtool") if shutil.which(t) is None]
    if missing:
        problems.append(" and ".join(f"'{t}' ({_TOOL_PACKAGES[t]})" for t in missing) + " on PATH")
    if problems:
        raise EnvironmentProblem("grotool kernel needs " + "; and ".join(problems))
    if not os.path.exists("/proc/thread-self/ns/net"):
        raise EnvironmentProblem("grotool kernel needs network namespaces (/proc/thread-self/ns/net is missing)")


def _run(args: List[str], check: bool = True, input: Optional[str] = None,
         timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(args, capture_output=True, text=True, input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvironmentProblem(f"'{' '.join(args)}' did not finish within {timeout:g} s") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot run '{args[0]}': {exc.strerror}") from None
    if check and proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        raise EnvironmentProblem(f"'{' '.join(args)}' failed: {msg[0] if msg else f'exit {proc.returncode}'}")
    return proc


def list_namespaces() -> List[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except OSError:
        return []


def grotool_namespaces() -> List[str]:
    return [n for n in list_namespaces() if NAME_RE.match(n)]


def _process_start_wallclock(pid: int) -> Optional[float]:
    """When the process started (seconds since the epoch), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        with open("/proc/stat") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, StopIteration, ValueError):
        return None
    try:
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None
    return btime + start_ticks / os.sysconf("SC_CLK_TCK")


def is_stale(name: str) -> bool:
    """A grotool namespace whose creating process no longer runs."""
    m = NAME_RE.match(name)
    if not m:
        return False
    pid = int(m.group(1))
    if pid == os.getpid():
        with _active_lock:
            return name not in _active
    started = _process_start_wallclock(pid)
    if started is None:
        return True
    try:
        created = os.stat(os.path.join(NETNS_DIR, name)).st_mtime
    except OSError:
        return False
    # the pid was reused by a process younger than the namespace (btime has 1 s resolution)
    return started > created + 2.0


def remove_stale() -> List[str]:
    """Delete namespaces left behind by grotool runs that are gone; returns their names."""
    removed = []
    for name in grotool_namespaces():
        if is_stale(name):
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


_libc = None


def setns_net(fd: int) -> None:
    """setns(fd, CLONE_NEWNET) for the calling thread."""
    global _libc
    if hasattr(os, "setns"):                       # Python 3.12+
        try:
            os.setns(fd, CLONE_NEWNET)
        except OSError as exc:
            raise EnvironmentProblem(f"setns failed: {exc.strerror}") from None
        return
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise EnvironmentProblem(f"setns failed: {os.strerror(ctypes.get_errno())}")


def parse_features(text: str) -> Dict[str, str]:
    """`ethtool -k` output as {feature: "on"/"off"} (the "[fixed]" marks dropped)."""
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("Features for"):
            key, _, value = line.partition(":")
            value = value.strip().split()
            if value:
                out[key.strip()] = value[0]
    return out


class VethNamespace:
    """The namespace exists between create() and remove() (or inside ``with``)."""

    def __init__(self, udp_gro: str = "off", flush_timeout_ns: int = 5_000_000, defer_hard_irqs: int = 1):
        if udp_gro not in UDP_GRO_MODES:
            raise ValueError(f"udp_gro must be one of {UDP_GRO_MODES}")
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.udp_gro = udp_gro
        self.flush_timeout_ns = int(flush_timeout_ns)
        self.defer_hard_irqs = int(defer_hard_irqs)
        self.created = False
        self.drop_filter = False
        self.features: Dict[str, Dict[str, str]] = {}
        self.removed_stale: List[str] = []

    # -- setup ------------------------------------------------------------------
    def create(self) -> "VethNamespace":
        check_environment()
        self.removed_stale = remove_stale()
        with _active_lock:
            _active.add(self.name)
        # marked before it exists: a signal arriving during `ip netns add` still removes it
        self.created = True
        try:
            _run(["ip", "netns", "add", self.name])
            self._configure()
        except BaseException:
            self.remove()
            raise
        return self

    __enter__ = create

    def ns_exec(self, *args: str, check: bool = True, input: Optional[str] = None) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", self.name, *args], check=check, input=input)

    def _sh(self, script: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.ns_exec("sh", "-c", script, check=check)

    def _configure(self) -> None:
        # No IPv6 (nothing is ever sent by the stack: no DAD, MLD, RS) and no forwarding;
        # set before the devices exist so that they inherit it.  IPv6 may be absent.
        self._sh("echo 0 > /proc/sys/net/ipv4/ip_forward; "
                 "for f in /proc/sys/net/ipv6/conf/all/disable_ipv6 /proc/sys/net/ipv6/conf/default/disable_ipv6; "
                 "do [ -e $f ] && echo 1 > $f; done; true")
        _run(["ip", "-n", self.name, "link", "add", "name", TX_DEV, "numtxqueues", "1", "numrxqueues", "1",
              "mtu", str(MTU), "type", "veth", "peer", "name", RX_DEV, "numtxqueues", "1", "numrxqueues", "1",
              "mtu", str(MTU)])
        # veth only takes the NAPI/GRO path for skbs from a peer without TSO
        self.ns_exec("ethtool", "-K", TX_DEV, "tso", "off", "gso", "off")
        self.ns_exec("ethtool", "-K", RX_DEV, "gro", "on", "lro", "off",
                     "rx-udp-gro-forwarding", "on" if self.udp_gro == "forward" else "off",
                     "rx-gro-list", "on" if self.udp_gro == "fraglist" else "off")
        self._sh(f"echo {self.flush_timeout_ns} > /sys/class/net/{RX_DEV}/gro_flush_timeout && "
                 f"echo {self.defer_hard_irqs} > /sys/class/net/{RX_DEV}/napi_defer_hard_irqs")
        _run(["ip", "-n", self.name, "-batch", "-"],
             input=f"link set dev {RX_DEV} up\nlink set dev {TX_DEV} up\n")
        # best effort: drop everything at tc ingress, which runs after the packet taps,
        # so that no frame reaches the IP stack
        if shutil.which("tc"):
            ok = self.ns_exec("tc", "qdisc", "add", "dev", RX_DEV, "clsact", check=False).returncode == 0
            ok = ok and self.ns_exec("tc", "filter", "add", "dev", RX_DEV, "ingress", "bpf", "da", "bytecode",
                                     "1,6 0 0 2", check=False).returncode == 0
            self.drop_filter = ok
        self._verify()

    def _verify(self) -> None:
        """Read the settings back: a kernel that refused one makes the oracle meaningless."""
        for dev in (TX_DEV, RX_DEV):
            self.features[dev] = parse_features(self.ns_exec("ethtool", "-k", dev).stdout)
        rx, tx = self.features[RX_DEV], self.features[TX_DEV]
        want = {"generic-receive-offload": "on", "large-receive-offload": "off",
                "rx-udp-gro-forwarding": "on" if self.udp_gro == "forward" else "off",
                "rx-gro-list": "on" if self.udp_gro == "fraglist" else "off"}
        for feature, value in want.items():
            if feature in rx and rx[feature] != value:
                raise EnvironmentProblem(f"could not set {feature} {value} on the receiving veth")
        if tx.get("tcp-segmentation-offload", "off") != "off":
            raise EnvironmentProblem("could not turn TSO off on the sending veth")
        got = self._sh(f"cat /sys/class/net/{RX_DEV}/gro_flush_timeout /sys/class/net/{RX_DEV}/napi_defer_hard_irqs")
        values = got.stdout.split()
        if values != [str(self.flush_timeout_ns), str(self.defer_hard_irqs)]:
            raise EnvironmentProblem(f"could not set gro_flush_timeout/napi_defer_hard_irqs on {RX_DEV} "
                                     f"(read back {' '.join(values)})")

    # -- use ------------------------------------------------------------------------
    def enter(self) -> int:
        """Switch this thread into the namespace; returns the fd to switch back with."""
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            fd = os.open(os.path.join(NETNS_DIR, self.name), os.O_RDONLY)
            try:
                setns_net(fd)
            finally:
                os.close(fd)
        except BaseException:
            os.close(back)
            raise
        return back

    @staticmethod
    def leave(back: int) -> None:
        try:
            setns_net(back)
        finally:
            os.close(back)

    COUNTERS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped", "rx_missed_errors")

    def link_counters(self) -> Dict[str, Dict[str, int]]:
        """/sys/class/net/DEV/statistics counters of both ends."""
        script = "; ".join(f"echo {dev} {c} $(cat /sys/class/net/{dev}/statistics/{c} 2>/dev/null || echo 0)"
                           for dev in (TX_DEV, RX_DEV) for c in self.COUNTERS)
        out: Dict[str, Dict[str, int]] = {TX_DEV: {}, RX_DEV: {}}
        for line in self._sh(script, check=False).stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] in out and parts[2].isdigit():
                out[parts[0]][parts[1]] = int(parts[2])
        return out

    def settings(self) -> dict:
        rx = self.features.get(RX_DEV, {})
        tx = self.features.get(TX_DEV, {})
        pick = ("generic-receive-offload", "large-receive-offload", "rx-udp-gro-forwarding", "rx-gro-list",
                "rx-checksumming", "rx-vlan-offload")
        return {"netns": self.name, "tx_dev": TX_DEV, "rx_dev": RX_DEV, "mtu": MTU,
                "gro_flush_timeout_ns": self.flush_timeout_ns, "napi_defer_hard_irqs": self.defer_hard_irqs,
                "udp_gro": self.udp_gro, "ingress_drop_filter": self.drop_filter,
                "kernel_config": kernel_config(),
                "rx_features": {k: rx[k] for k in pick if k in rx},
                "tx_features": {k: tx[k] for k in ("tcp-segmentation-offload", "generic-segmentation-offload",
                                                   "tx-checksumming") if k in tx}}

    # -- teardown -----------------------------------------------------------------------
    def remove(self) -> None:
        if not self.created:
            return
        for attempt in range(3):
            proc = _run(["ip", "netns", "del", self.name], check=False)
            if proc.returncode == 0 or not os.path.exists(os.path.join(NETNS_DIR, self.name)):
                break
            time.sleep(0.05 * (attempt + 1))
        self.created = False
        with _active_lock:
            _active.discard(self.name)

    def __exit__(self, *exc) -> None:
        self.remove()
