"""A private network namespace holding one veth pair, configured so that the
GRO of the receiving end can be driven deterministically
(shared/spec/kernel-oracle.md, section 2).

Nothing is created outside the namespace.  Inside it, apart from the oracle's
own AF_PACKET sockets, only what the host options ask for exists (a
HostState, grotool.oracle.hoststate): VXLAN/GENEVE devices with no remote and
no address, UDP sockets with UDP_GRO on the wildcard address, and established
TCP sockets (TCP_REPAIR, addresses on the namespace's loopback).  They are closed before the
namespace is deleted (an open socket would keep a deleted namespace alive).  The name
carries the creating process's pid (``grotool-o<pid>-<random>``): a run killed
with SIGKILL leaves a namespace that the next run recognises as stale (its
process is gone, or the pid now belongs to a younger process) and removes.

The system tools do the configuration (``ip``, ``ethtool``, ``tc``; sysfs and
sysctl writes through ``ip netns exec NS sh -c ...``), except gro_max_size and
gro_ipv4_max_size, set with rtnetlink directly (grotool.oracle.rtnl).  Sockets enter the
namespace with setns(2) on the calling thread only, and switch back at once.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import socket
import re
import secrets
import shutil
import subprocess
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from ..errors import EnvironmentProblem, InputError
from . import rtnl
from .hoststate import Endpoint, HostState

PREFIX = "grotool-o"
NAME_RE = re.compile(r"^grotool-o(\d+)-[0-9a-f]+$")
NETNS_DIR = "/run/netns"
TX_DEV = "gtx"
RX_DEV = "grx"
MTU = 65535
# With an XDP program (kernels before 5.13, see gro_needs_xdp) veth refuses an MTU whose
# frames do not fit one page with XDP headroom and skb_shared_info (veth_xdp_set): 4096 -
# 256 - 14 - 320 = 3506 on x86_64; a little less for margin.
XDP_MTU = 3500
CLONE_NEWNET = 0x40000000
UDP_GRO_MODES = ("off", "forward", "fraglist")
_TOOL_PACKAGES = {"ip": "iproute2", "ethtool": "ethtool"}

_active: Set[str] = set()          # namespaces this process currently uses
_active_lock = threading.Lock()


CONFIG_OPTIONS = ("CONFIG_VLAN_8021Q", "CONFIG_HZ", "CONFIG_MAX_SKB_FRAGS", "CONFIG_VXLAN", "CONFIG_GENEVE",
                  "CONFIG_NET_FOU", "CONFIG_NET_IPGRE_DEMUX", "CONFIG_NET_IPGRE", "CONFIG_IPV6_GRE",
                  "CONFIG_NET_UDP_TUNNEL", "CONFIG_IPV6")
SOL_UDP = 17
UDP_GRO = 104                      # setsockopt(SOL_UDP, UDP_GRO): the socket takes UDP GSO packets
TCP_REPAIR = 19                    # a TCP socket connected without a handshake (CAP_NET_ADMIN)
MAX_LOCAL_TCP = 4096               # established connections one run may create


def kernel_config(options=CONFIG_OPTIONS) -> Dict[str, str]:
    """Build options that change GRO decisions, from /proc/config.gz when the kernel
    exposes it ("n" for an option that is not set); {} when it does not.  Read once
    per process: the running kernel's build does not change."""
    key = (tuple(options), os.environ.get("GROTOOL_KERNEL_CONFIG", ""))
    if key not in _config_cache:
        _config_cache[key] = _read_kernel_config(options)
    return dict(_config_cache[key])


_config_cache: Dict[tuple, Dict[str, str]] = {}


def _read_kernel_config(options) -> Dict[str, str]:
    import gzip

    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            found = parse_config(f, options)
    except (OSError, EOFError):
        found = {}
    if not found and os.environ.get("GROTOOL_KERNEL_CONFIG"):
        # a kernel without /proc/config.gz (Debian's): its build config as a file (the VM guest sets this)
        found = config_file(os.environ["GROTOOL_KERNEL_CONFIG"], options)
    return found


def config_file(path: str, options=CONFIG_OPTIONS) -> Dict[str, str]:
    """The options of a kernel build config file (boot/config-RELEASE); {} if unreadable."""
    try:
        with open(path) as f:
            return parse_config(f, options)
    except OSError:
        return {}


def parse_config(lines, options) -> Dict[str, str]:
    found: Dict[str, str] = {}
    for line in lines:
        if not line.startswith(("CONFIG_", "# CONFIG_")):
            continue
        for opt in options:
            if line.startswith(opt + "="):
                found[opt] = line.strip().split("=", 1)[1]
            elif line.startswith(f"# {opt} is not set"):
                found[opt] = "n"
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


def gro_needs_xdp(release: Optional[str] = None) -> bool:
    """Whether veth does GRO only with an XDP program on the receiving end: before
    5.13 (veth_gro_requested is 5.13's) NAPI, and so GRO, runs only for a veth with
    XDP.  GROTOOL_ORACLE_XDP=1 forces the XDP setup on any kernel (to test it)."""
    if os.environ.get("GROTOOL_ORACLE_XDP") == "1":
        return True
    m = re.match(r"(\d+)\.(\d+)", release or os.uname().release)
    return m is not None and (int(m.group(1)), int(m.group(2))) < (5, 13)


class KernelLacksFeature(EnvironmentProblem):
    """The running kernel cannot do what a host option asks (e.g. no GENEVE): exit 4."""


class VethNamespace:
    """The namespace exists between create() and remove() (or inside ``with``)."""

    def __init__(self, udp_gro: Optional[str] = None, flush_timeout_ns: int = 5_000_000, defer_hard_irqs: int = 1,
                 *, host: Optional[HostState] = None):
        if udp_gro is not None and udp_gro not in UDP_GRO_MODES:
            raise ValueError(f"udp_gro must be one of {UDP_GRO_MODES}")
        if host is None:
            host = HostState.build(udp_gro=udp_gro or "off")
        else:
            host = host.with_legacy_udp_gro(udp_gro)
        self.name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.host = host
        self.udp_gro = host.legacy_udp_gro
        self.flush_timeout_ns = int(flush_timeout_ns)
        self.defer_hard_irqs = int(defer_hard_irqs)
        self.xdp = gro_needs_xdp()               # the session attaches an XDP_PASS program to RX_DEV
        self.mtu = XDP_MTU if self.xdp else MTU
        self.created = False
        self.drop_filter = False
        self.features: Dict[str, Dict[str, str]] = {}
        self.gro_sizes: Dict[str, Optional[int]] = {}   # the receiving veth's, as read back
        self.removed_stale: List[str] = []
        self.tunnels: List[dict] = []                   # VXLAN/GENEVE devices made, as read back
        self.udp_sockets: List[socket.socket] = []
        self.tcp_sockets: List[socket.socket] = []
        self.local_flows: List[Tuple[Endpoint, Endpoint]] = []   # flows given a local established socket
        self._lo_addrs: Set[str] = set()

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
              "mtu", str(self.mtu), "type", "veth", "peer", "name", RX_DEV, "numtxqueues", "1", "numrxqueues", "1",
              "mtu", str(self.mtu)])
        # veth only takes the NAPI/GRO path for skbs from a peer without TSO
        self.ns_exec("ethtool", "-K", TX_DEV, "tso", "off", "gso", "off")
        self.ns_exec("ethtool", "-K", RX_DEV, "gro", "on", "lro", "off",
                     "rx-udp-gro-forwarding", "on" if self.host.udp_gro_forwarding else "off",
                     "rx-gro-list", "on" if self.host.rx_gro_list else "off")
        self._set_gro_sizes()
        self._sh(f"echo {self.flush_timeout_ns} > /sys/class/net/{RX_DEV}/gro_flush_timeout && "
                 f"echo {self.defer_hard_irqs} > /sys/class/net/{RX_DEV}/napi_defer_hard_irqs")
        _run(["ip", "-n", self.name, "-batch", "-"],
             input=f"link set dev {RX_DEV} up\nlink set dev {TX_DEV} up\n")
        # best effort: drop everything at tc ingress, which runs after GRO and the packet
        # taps, so that no frame reaches the IP stack
        if shutil.which("tc"):
            ok = self.ns_exec("tc", "qdisc", "add", "dev", RX_DEV, "clsact", check=False).returncode == 0
            ok = ok and self.ns_exec("tc", "filter", "add", "dev", RX_DEV, "ingress", "bpf", "da", "bytecode",
                                     "1,6 0 0 2", check=False).returncode == 0
            self.drop_filter = ok
        if (self.host.needs_sockets or self.host.vxlan_ports or self.host.geneve_ports) and not self.drop_filter:
            # with local sockets and tunnel devices the stack would process the replayed frames
            raise EnvironmentProblem("grotool kernel needs 'tc' (iproute2) with a working clsact ingress "
                                     "filter for the host options (sockets, tunnel devices)")
        self._make_tunnels()
        self._verify()
        self._open_udp_sockets()

    GRO_SIZE_ATTRS = (("gro_max_size", rtnl.IFLA_GRO_MAX_SIZE, "5.16", "--gro-max-size"),
                      ("gro_ipv4_max_size", rtnl.IFLA_GRO_IPV4_MAX_SIZE, "6.3", "--gro-ipv4-max-size"))

    def _read_gro_sizes(self, ifindex: int) -> Dict[str, Optional[int]]:
        try:
            got = rtnl.link_u32(ifindex, [attr for _, attr, _, _ in self.GRO_SIZE_ATTRS])
        except OSError as exc:
            raise EnvironmentProblem(f"cannot read the settings of {RX_DEV} (RTM_GETLINK): "
                                     f"{exc.strerror or exc}") from None
        return {name: got.get(attr) for name, attr, _, _ in self.GRO_SIZE_ATTRS}

    def _set_gro_sizes(self) -> None:
        """The receiving veth's gro_max_size and gro_ipv4_max_size (RTM_NEWLINK; the
        kernel's do_setlink sets gro_max_size first, and a gro_max_size of at most
        65536 sets gro_ipv4_max_size too: netif_set_gro_max_size).  A kernel without
        the attribute ignores it, so what it lacks is found by reading back first."""
        back = self.enter()
        try:
            ifindex = socket.if_nametoindex(RX_DEV)
            before = self._read_gro_sizes(ifindex)
            wanted = [(name, attr, getattr(self.host, name), since, option)
                      for name, attr, since, option in self.GRO_SIZE_ATTRS if getattr(self.host, name) is not None]
            for name, _attr, _value, since, option in wanted:
                if before[name] is None:
                    raise KernelLacksFeature(f"this kernel ({os.uname().release}) has no {name} device setting "
                                             f"(Linux {since}+): {option} cannot be set")
            if wanted:
                try:
                    rtnl.set_link_u32(ifindex, [(attr, value) for _, attr, value, _, _ in wanted])
                except OSError as exc:
                    what = ", ".join(f"{name} {value}" for name, _, value, _, _ in wanted)
                    raise KernelLacksFeature(f"this kernel ({os.uname().release}) refused {what} on {RX_DEV}: "
                                             f"{exc.strerror or exc}") from None
            self.gro_sizes = self._read_gro_sizes(ifindex)
        finally:
            self.leave(back)
        for name, _attr, value, _since, _option in wanted:
            if self.gro_sizes[name] != value:
                raise EnvironmentProblem(f"could not set {name} {value} on {RX_DEV} "
                                         f"(read back {self.gro_sizes[name]})")

    def _make_tunnels(self) -> None:
        """A VXLAN/GENEVE device per port, external (collect-metadata) mode: no remote,
        no address, no FDB; bringing it up opens its UDP sockets on the wildcard
        address (IPv4 and IPv6), whose gro_receive is the tunnel's."""
        for kind, ports in (("geneve", self.host.geneve_ports), ("vxlan", self.host.vxlan_ports)):
            for port in ports:
                dev = f"g{kind[:2]}{port}"
                proc = _run(["ip", "-n", self.name, "link", "add", dev, "type", kind, "external",
                             "dstport", str(port)], check=False)
                if proc.returncode != 0:
                    err = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
                    why = err[0] if err else f"exit {proc.returncode}"
                    if kind == "geneve":
                        cfg = kernel_config(("CONFIG_GENEVE",)).get("CONFIG_GENEVE")
                        raise KernelLacksFeature(
                            f"this kernel ({os.uname().release}) has no GENEVE support"
                            + (" (CONFIG_GENEVE is not set)" if cfg == "n" else "")
                            + f": 'ip link add type geneve' failed ({why}); --geneve-port needs it "
                              "(grotool replay models GENEVE from the kernel source)")
                    raise KernelLacksFeature(f"cannot create a VXLAN device for port {port} ({why})")
                self.ns_exec("ip", "link", "set", dev, "up")
                details = self.ns_exec("ip", "-d", "-o", "link", "show", dev, check=False).stdout.strip()
                self.tunnels.append({"kind": kind, "dev": dev, "dstport": port, "external": True,
                                     "up": ",UP" in details or "<UP" in details})
                if not self.tunnels[-1]["up"]:
                    raise EnvironmentProblem(f"the {kind} device for port {port} did not come up")

    def _in_ns(self, family: int, kind: int) -> socket.socket:
        back = self.enter()
        try:
            return socket.socket(family, kind)
        finally:
            self.leave(back)

    def _open_udp_sockets(self) -> None:
        """One IPv4 and one IPv6-only UDP socket per --udp-gro-socket port, bound to the
        wildcard address, with UDP_GRO set (which also turns on the socket lookup in
        udp4/6_gro_receive: udp_encap_needed_key)."""
        for port in self.host.udp_gro_sockets:
            for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
                s = self._in_ns(family, socket.SOCK_DGRAM)
                self.udp_sockets.append(s)
                try:
                    if family == socket.AF_INET6:
                        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    s.setsockopt(SOL_UDP, UDP_GRO, 1)
                    s.bind((addr, port))
                except OSError as exc:
                    raise EnvironmentProblem(f"cannot open a UDP_GRO socket on port {port} "
                                             f"({'IPv6' if family == socket.AF_INET6 else 'IPv4'}): "
                                             f"{exc.strerror}") from None

    def add_local_tcp(self, flows) -> None:
        """An established TCP socket for each (src, dst) flow not yet covered, made with
        TCP_REPAIR: bound to dst, connected to src, it enters ESTABLISHED at once
        without a handshake (and leaves without a FIN or a reset).  It is what
        tcp4/6_check_fraglist_gro finds for frames src -> dst, and nothing else
        exists: no listener, and no client socket that would make the reverse
        direction local too.  Both addresses go on the namespace's loopback (the
        bind needs a local address, the connect a route)."""
        todo = [(a, b) for a, b in flows if (a, b) not in self.local_flows]
        if not todo:
            return
        if len(self.local_flows) + len(todo) > MAX_LOCAL_TCP:
            raise InputError(f"--local-tcp would need {len(self.local_flows) + len(todo)} established "
                             f"sockets, more than {MAX_LOCAL_TCP}")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = len(self.local_flows) + len(todo) + 256
        if soft < want:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
            except (ValueError, OSError):
                pass
        self._loopback_addresses({e for flow in todo for e in flow})
        for src, dst in todo:
            self._established(src, dst)
            self.local_flows.append((src, dst))

    def _loopback_addresses(self, endpoints) -> None:
        lines = []
        if not self._lo_addrs:
            lines.append("link set dev lo up")
        six = [e for e in endpoints if e.family == 6 and e.addr not in self._lo_addrs]
        if six and not any(":" in a for a in self._lo_addrs):
            # IPv6 was switched off for every device; lo alone gets it back (it sends nothing)
            self._sh("echo 0 > /proc/sys/net/ipv6/conf/lo/disable_ipv6")
        for e in sorted(endpoints):
            if e.addr in self._lo_addrs:
                continue
            if e.family == 4:
                lines.append(f"addr add {e.addr}/32 dev lo")
            else:
                lines.append(f"addr add {e.addr}/128 dev lo nodad")
            self._lo_addrs.add(e.addr)
        if lines:
            _run(["ip", "-n", self.name, "-batch", "-"], input="\n".join(lines) + "\n")

    def _established(self, src: Endpoint, dst: Endpoint) -> None:
        family = socket.AF_INET if src.family == 4 else socket.AF_INET6
        # a new IPv6 address (and its local route) becomes usable from a workqueue,
        # even with nodad: retry while the kernel still says it is not there
        deadline = time.monotonic() + 3.0
        while True:
            sock = self._in_ns(family, socket.SOCK_STREAM)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_REPAIR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((dst.addr, dst.port))
                sock.connect((src.addr, src.port))
                self.tcp_sockets.append(sock)
                return
            except OSError as exc:
                sock.close()
                not_yet = exc.errno in (errno.EADDRNOTAVAIL, errno.ENETUNREACH, errno.EHOSTUNREACH)
                if not_yet and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                raise EnvironmentProblem(f"cannot make an established TCP socket for {src}>{dst} "
                                         f"(TCP_REPAIR): {exc.strerror or exc}") from None

    def close_sockets(self) -> None:
        for s in self.udp_sockets + self.tcp_sockets:
            try:
                s.close()
            except OSError:
                pass
        self.udp_sockets, self.tcp_sockets = [], []

    def _verify(self) -> None:
        """Read the settings back: a kernel that refused one makes the oracle meaningless."""
        for dev in (TX_DEV, RX_DEV):
            self.features[dev] = parse_features(self.ns_exec("ethtool", "-k", dev).stdout)
        rx, tx = self.features[RX_DEV], self.features[TX_DEV]
        want = {"generic-receive-offload": "on", "large-receive-offload": "off",
                "rx-udp-gro-forwarding": "on" if self.host.udp_gro_forwarding else "off",
                "rx-gro-list": "on" if self.host.rx_gro_list else "off"}
        for feature, value in want.items():
            if feature not in rx and value == "on":
                raise EnvironmentProblem(f"this kernel's veth has no {feature} feature")
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

    COUNTERS = ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")

    def link_counters(self) -> Dict[str, Dict[str, int]]:
        """Packet and drop counters of both ends, from the namespace's /proc/net/dev
        (read on this thread after setns: no process is started, which matters in a
        slow VM guest).  Its rx drop column is rx_dropped plus rx_missed_errors."""
        out: Dict[str, Dict[str, int]] = {TX_DEV: {}, RX_DEV: {}}
        back = self.enter()
        try:
            with open("/proc/thread-self/net/dev") as f:
                text = f.read()
        finally:
            self.leave(back)
        for line in text.splitlines():
            dev, sep, rest = line.partition(":")
            dev = dev.strip()
            if not sep or dev not in out:
                continue
            cols = rest.split()
            if len(cols) >= 12 and all(c.isdigit() for c in cols[:12]):
                out[dev] = {"rx_packets": int(cols[1]), "rx_dropped": int(cols[3]),
                            "tx_packets": int(cols[9]), "tx_dropped": int(cols[11])}
        return out

    def settings(self) -> dict:
        rx = self.features.get(RX_DEV, {})
        tx = self.features.get(TX_DEV, {})
        pick = ("generic-receive-offload", "large-receive-offload", "rx-udp-gro-forwarding", "rx-gro-list",
                "rx-checksumming", "rx-vlan-offload")

        def sock_json(s: socket.socket) -> dict:
            try:
                local = s.getsockname()
                return {"family": 6 if s.family == socket.AF_INET6 else 4, "local": f"{local[0]}:{local[1]}"}
            except OSError:
                return {}

        return {"netns": self.name, "tx_dev": TX_DEV, "rx_dev": RX_DEV, "mtu": self.mtu, "xdp_pass_on_rx": self.xdp,
                "gro_flush_timeout_ns": self.flush_timeout_ns, "napi_defer_hard_irqs": self.defer_hard_irqs,
                "udp_gro": self.udp_gro, "ingress_drop_filter": self.drop_filter,
                # read back from the receiving veth (null: this kernel has no such setting)
                "gro_max_size": self.gro_sizes.get("gro_max_size"),
                "gro_ipv4_max_size": self.gro_sizes.get("gro_ipv4_max_size"),
                "host": self.host.to_json(),
                "host_realised": {
                    "tunnels": [dict(t) for t in self.tunnels],
                    "udp_gro_sockets": [sock_json(s) for s in self.udp_sockets],
                    "local_tcp_flows": [f"{a}>{b}" for a, b in self.local_flows],
                    "loopback_addresses": sorted(self._lo_addrs)},
                "kernel_config": kernel_config(),
                "rx_features": {k: rx[k] for k in pick if k in rx},
                "tx_features": {k: tx[k] for k in ("tcp-segmentation-offload", "generic-segmentation-offload",
                                                   "tx-checksumming") if k in tx}}

    # -- teardown -----------------------------------------------------------------------
    def remove(self) -> None:
        self.close_sockets()                  # an open socket keeps a deleted namespace alive
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
