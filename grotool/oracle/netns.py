"""A private network namespace holding one veth pair, set up so that the
kernel's GRO on the receiving end can be driven deterministically
(shared/spec/kernel-oracle.md, section 2).

Nothing is created outside the namespace.  The namespace carries the creating
process's pid in its name, so a run killed with SIGKILL leaves a namespace the
next run recognises as stale and removes.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import secrets
import shutil
import subprocess
from typing import Dict, List, Optional

from ..errors import EnvironmentProblem

PREFIX = "grotool-o"
NAME_RE = re.compile(r"^grotool-o(\d+)-[0-9a-f]+$")
TX_DEV = "gtx"
RX_DEV = "grx"
CLONE_NEWNET = 0x40000000


def kernel_config(options=("CONFIG_VLAN_8021Q", "CONFIG_HZ", "CONFIG_MAX_SKB_FRAGS")) -> Dict[str, str]:
    """The build options that change GRO decisions, from /proc/config.gz when the kernel exposes it."""
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
    except OSError:
        pass
    return found


def check_environment() -> None:
    """Raise EnvironmentProblem (exit 4) with one line naming what is missing."""
    if os.geteuid() != 0:
        raise EnvironmentProblem("grotool kernel needs root (it creates a private network namespace with a veth pair)")
    missing = [tool for tool in ("ip", "ethtool") if shutil.which(tool) is None]
    if missing:
        pkgs = {"ip": "iproute2", "ethtool": "ethtool"}
        raise EnvironmentProblem(
            "grotool kernel needs " + " and ".join(f"{t} ({pkgs[t]})" for t in missing) + " on PATH")


def _run(args: List[str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise EnvironmentProblem(f"'{' '.join(args)}' failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def list_namespaces() -> List[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except OSError:
        return []


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> List[str]:
    """Delete namespaces left by grotool runs whose process is gone."""
    removed = []
    for name in list_namespaces():
        m = NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


_libc = None


def _setns(fd: int) -> None:
    global _libc
    if hasattr(os, "setns"):
        os.setns(fd, CLONE_NEWNET)
        return
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise EnvironmentProblem(f"setns failed: {os.strerror(err)}")


class VethNamespace:
    """Context manager: the namespace exists between __enter__ and __exit__."""

    def __init__(self, udp_gro: str = "off", flush_timeout_ns: int = 5_000_000, defer_hard_irqs: int = 1):
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self.udp_gro = udp_gro
        self.flush_timeout_ns = flush_timeout_ns
        self.defer_hard_irqs = defer_hard_irqs
        self.created = False
        self.drop_filter = False

    # -- setup -------------------------------------------------------------------
    def __enter__(self) -> "VethNamespace":
        check_environment()
        remove_stale()
        _run(["ip", "netns", "add", self.name])
        self.created = True
        try:
            self._configure()
        except BaseException:
            self.remove()
            raise
        return self

    def _ns(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run(["ip", "netns", "exec", self.name, *args], check=check)

    def _configure(self) -> None:
        n = self.name
        # no addresses, no IPv6, no forwarding: nothing is ever processed or answered
        self._ns("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1",
                 "net.ipv4.ip_forward=0", check=False)
        _run(["ip", "-n", n, "link", "add", "name", TX_DEV, "numtxqueues", "1", "numrxqueues", "1",
              "mtu", "65535", "type", "veth", "peer", "name", RX_DEV, "numtxqueues", "1", "numrxqueues", "1",
              "mtu", "65535"])
        # veth only takes the NAPI/GRO path for skbs from a peer without TSO
        self._ns("ethtool", "-K", TX_DEV, "tso", "off", "gso", "off")
        rx = ["ethtool", "-K", RX_DEV, "gro", "on", "lro", "off",
              "rx-udp-gro-forwarding", "on" if self.udp_gro == "forward" else "off",
              "rx-gro-list", "on" if self.udp_gro == "fraglist" else "off"]
        self._ns(*rx)
        self._ns("sh", "-c",
                 f"echo {self.flush_timeout_ns} > /sys/class/net/{RX_DEV}/gro_flush_timeout && "
                 f"echo {self.defer_hard_irqs} > /sys/class/net/{RX_DEV}/napi_defer_hard_irqs")
        for dev in (TX_DEV, RX_DEV):
            _run(["ip", "-n", n, "link", "set", "dev", dev, "up"])
        # best effort: drop everything at tc ingress, which runs after the packet taps
        if shutil.which("tc"):
            ok = self._ns("tc", "qdisc", "add", "dev", RX_DEV, "clsact", check=False).returncode == 0
            ok = ok and self._ns("tc", "filter", "add", "dev", RX_DEV, "ingress", "bpf", "da", "bytecode",
                                 "1,6 0 0 2", check=False).returncode == 0
            self.drop_filter = ok

    # -- use -----------------------------------------------------------------------
    def enter(self) -> int:
        """Switch this thread into the namespace; returns a fd to switch back with."""
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)
        return back

    @staticmethod
    def leave(back: int) -> None:
        try:
            _setns(back)
        finally:
            os.close(back)

    def link_stats(self) -> Dict[str, Dict[str, int]]:
        """rx/tx dropped counters of both ends."""
        out = _run(["ip", "-n", self.name, "-s", "-j", "link", "show"], check=False)
        stats: Dict[str, Dict[str, int]] = {}
        try:
            for link in json.loads(out.stdout or "[]"):
                s64 = link.get("stats64", {})
                stats[link.get("ifname", "?")] = {
                    "rx_dropped": s64.get("rx", {}).get("dropped", 0),
                    "tx_dropped": s64.get("tx", {}).get("dropped", 0),
                    "rx_packets": s64.get("rx", {}).get("packets", 0),
                }
        except ValueError:
            pass
        return stats

    def settings(self) -> dict:
        return {"netns": self.name, "tx_dev": TX_DEV, "rx_dev": RX_DEV, "mtu": 65535,
                "gro_flush_timeout_ns": self.flush_timeout_ns, "napi_defer_hard_irqs": self.defer_hard_irqs,
                "udp_gro": self.udp_gro, "ingress_drop_filter": self.drop_filter, "kernel_config": kernel_config()}

    # -- teardown --------------------------------------------------------------------
    def remove(self) -> None:
        if self.created:
            _run(["ip", "netns", "del", self.name], check=False)
            self.created = False

    def __exit__(self, *exc) -> None:
        self.remove()
