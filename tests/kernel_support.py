"""Helpers for the real-kernel oracle tests: a skip marker with a clear reason,
namespace listing, and a small struct-based frame builder (Ethernet, 802.1Q,
IPv4, IPv6, TCP, UDP) with correct checksums unless asked otherwise.

Independent of grotool's own parsing and checksum code on purpose.
"""

from __future__ import annotations

import os
import shutil
import struct
import re
import subprocess
from typing import List, Optional, Sequence

import pytest

MAC_DST = bytes.fromhex("0200000000aa")
MAC_SRC = bytes.fromhex("0200000000bb")
V4_SRC, V4_DST = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
V6_SRC = bytes.fromhex("fd000000000000000000000000000001")
V6_DST = bytes.fromhex("fd000000000000000000000000000002")
FIN, SYN, RST, PSH, ACK, URG, ECE, CWR = 1, 2, 4, 8, 16, 32, 64, 128
MSS = 1448


# -----------------------------------------------------------------------------
# skipping
# -----------------------------------------------------------------------------
def kernel_skip_reason() -> Optional[str]:
    if os.geteuid() != 0:
        return "needs root: the oracle creates a network namespace with a veth pair"
    for tool, pkg in (("ip", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(tool) is None:
            return f"needs '{tool}' ({pkg}) on PATH"
    if not os.path.exists("/proc/thread-self/ns/net"):
        return "needs network namespaces"
    return None


_REASON = kernel_skip_reason()
KERNEL_MARKS = [pytest.mark.kernel,
                pytest.mark.skipif(_REASON is not None, reason=f"real-kernel test skipped: {_REASON}")]


def needs_kernel(fn):
    """Decorator: marked `kernel` and skipped, with the reason, when the oracle cannot run here."""
    for mark in reversed(KERNEL_MARKS):
        fn = mark(fn)
    return fn


def grotool_netns() -> List[str]:
    """Namespaces that look like grotool's (grotool-o<pid>-<hex>)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return sorted(n for n in names if n.startswith("grotool-o"))


# -----------------------------------------------------------------------------
# checksums
# -----------------------------------------------------------------------------
def csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def pseudo(src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    if len(src) == 4:
        return src + dst + struct.pack("!BBH", 0, proto, length)
    return src + dst + struct.pack("!IxxxB", length, proto)


def seed_value(src: bytes, dst: bytes, proto: int, length: int) -> int:
    """The folded, uncomplemented pseudo-header sum (what TX offload leaves)."""
    return ~csum(pseudo(src, dst, proto, length)) & 0xFFFF


# -----------------------------------------------------------------------------
# frames
# -----------------------------------------------------------------------------
def payload_bytes(n: int, salt: int) -> bytes:
    return bytes(((salt + i) * 7 + 3) & 0xFF for i in range(n))


def _l4_check(l4: bytes, at: int, src: bytes, dst: bytes, proto: int, mode) -> bytes:
    """mode: None good, "bad" off by one, "seed" pseudo-header seed, "zero" 0."""
    l4 = l4[:at] + b"\0\0" + l4[at + 2:]
    if mode == "zero":
        value = 0
    elif mode == "seed":
        value = seed_value(src, dst, proto, len(l4))
    else:
        value = csum(pseudo(src, dst, proto, len(l4)) + l4)
        if proto == 17 and value == 0:
            value = 0xFFFF
        if mode == "bad":
            value = (value + 1) & 0xFFFF or 1
    return l4[:at] + struct.pack("!H", value) + l4[at + 2:]


def ip_wrap(l4: bytes, proto: int, *, family: int = 4, src: Optional[bytes] = None, dst: Optional[bytes] = None,
            ttl: int = 64, tos: int = 0, ip_id: int = 0, df: bool = True, ip_bad: bool = False) -> bytes:
    if family == 4:
        src, dst = src or V4_SRC, dst or V4_DST
        hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos, 20 + len(l4), ip_id & 0xFFFF, 0x4000 if df else 0,
                          ttl, proto, 0, src, dst)
        check = csum(hdr)
        if ip_bad:
            check = (check + 1) & 0xFFFF
        return hdr[:10] + struct.pack("!H", check) + hdr[12:] + l4
    src, dst = src or V6_SRC, dst or V6_DST
    return struct.pack("!IHBB16s16s", (6 << 28) | (tos << 20), len(l4), proto, ttl, src, dst) + l4


def ether(l3: bytes, family: int = 4, *, vlan: Optional[int] = None, pad: bool = False,
          dst: bytes = MAC_DST, src: bytes = MAC_SRC, ethertype: Optional[int] = None) -> bytes:
    etype = ethertype if ethertype is not None else (0x0800 if family == 4 else 0x86DD)
    hdr = dst + src
    if vlan is not None:
        hdr += struct.pack("!HH", 0x8100, vlan)
    frame = hdr + struct.pack("!H", etype) + l3
    if pad and len(frame) < 60:
        frame += b"\0" * (60 - len(frame))
    return frame


def tcp(payload=MSS, *, seq: int = 1000, ack: int = 5000, flags: int = ACK, sport: int = 40000,
        dport: int = 5201, family: int = 4, src: Optional[bytes] = None, dst: Optional[bytes] = None,
        ttl: int = 64, tos: int = 0, ip_id: int = 0, check=None, window: int = 512, options: bytes = b"",
        vlan: Optional[int] = None, pad: bool = False, raw: bool = False) -> bytes:
    """One TCP segment; payload is bytes or a length (seq-dependent pattern)."""
    if isinstance(payload, int):
        payload = payload_bytes(payload, seq)
    if family == 4:
        s, d = src or V4_SRC, dst or V4_DST
    else:
        s, d = src or V6_SRC, dst or V6_DST
    doff = (20 + len(options)) // 4
    l4 = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack, doff << 4, flags, window, 0, 0)
    l4 = _l4_check(l4 + options + payload, 16, s, d, 6, check)
    l3 = ip_wrap(l4, 6, family=family, src=s, dst=d, ttl=ttl, tos=tos, ip_id=ip_id)
    return l3 if raw else ether(l3, family, vlan=vlan, pad=pad)


def udp(payload=1000, *, sport: int = 40001, dport: int = 5202, family: int = 4, salt: int = 0,
        ip_id: int = 0, check=None, src: Optional[bytes] = None, dst: Optional[bytes] = None) -> bytes:
    if isinstance(payload, int):
        payload = payload_bytes(payload, salt)
    if family == 4:
        s, d = src or V4_SRC, dst or V4_DST
    else:
        s, d = src or V6_SRC, dst or V6_DST
    l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    l4 = _l4_check(l4, 6, s, d, 17, check)
    return ether(ip_wrap(l4, 17, family=family, src=s, dst=d, ip_id=ip_id), family)


def tcp_flow(n: int, *, mss: int = MSS, start_seq: int = 1000, flags_at: Sequence = (), **kw) -> List[bytes]:
    """n in-order segments of one flow, IPv4 ID +1 per segment.
    flags_at: (index, flags) pairs overriding the ACK-only flags."""
    special = dict(flags_at)
    return [tcp(mss, seq=start_seq + i * mss, ip_id=i, flags=special.get(i, ACK), **kw) for i in range(n)]


def arp_frame() -> bytes:
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, MAC_SRC, V4_SRC, b"\0" * 6, V4_DST)
    return ether(body, ethertype=0x0806, dst=b"\xff" * 6, pad=True)


# -----------------------------------------------------------------------------
# pcap files
# -----------------------------------------------------------------------------
def write_pcap(path, frames: Sequence[bytes], *, linktype: int = 1, ts0_ns: int = 1_700_000_000_000_000_000,
               step_ns: int = 10_000) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, linktype))
        for i, frame in enumerate(frames):
            sec, nsec = divmod(ts0_ns + i * step_ns, 1_000_000_000)
            f.write(struct.pack("<IIII", sec, nsec, len(frame), len(frame)) + frame)


def read_pcap(path):
    """(linktype, [(ts_ns, bytes)]) of a little-endian nanosecond or microsecond pcap."""
    data = open(path, "rb").read()
    magic, _maj, _min, _tz, _sig, _snap, linktype = struct.unpack_from("<IHHiIII", data, 0)
    scale = 1 if magic == 0xA1B23C4D else 1000
    off, out = 24, []
    while off < len(data):
        sec, frac, caplen, _wire = struct.unpack_from("<IIII", data, off)
        off += 16
        out.append((sec * 1_000_000_000 + frac * scale, data[off:off + caplen]))
        off += caplen
    return linktype, out


def rss_bucket(frame: bytes, key=None) -> int:
    """The GRO bucket (hash & 7) the RSS hash of grotool kernel --rss gives a frame."""
    from grotool.engine.config import DEFAULT_RSS_KEY
    from grotool.oracle import bpf

    return bpf.FrameHasher(DEFAULT_RSS_KEY if key is None else key)(frame) & 7


def sports_in_bucket(b: int, n: int, family: int = 4, start: int = 30000, key=None):
    """n source ports whose TCP flow (tcp()'s addresses) lands in bucket b."""
    out, sport = [], start
    while len(out) < n:
        if rss_bucket(tcp(0, sport=sport, family=family), key) == b:
            out.append(sport)
        sport += 1
    return out


# -----------------------------------------------------------------------------
# the oracle the differential tests use: this host's kernel, or a VM's
# -----------------------------------------------------------------------------
# GROTOOL_TEST_VM=debian:6.1 (or debian:6.12, or a vmlinuz with GROTOOL_TEST_VM_MODULES)
# sends every oracle call of the differential tests to one guest booted for the whole
# test session (grotool kernel --vm), instead of the host's kernel.
TEST_VM = os.environ.get("GROTOOL_TEST_VM") or None
_vm = None


def oracle_vm():
    """The session's VmSession (booted at first use), or None without GROTOOL_TEST_VM."""
    global _vm
    if TEST_VM is None:
        return None
    if _vm is None:
        from grotool.oracle.vm import VmSession

        session = VmSession(TEST_VM, modules=os.environ.get("GROTOOL_TEST_VM_MODULES") or None)
        session.__enter__()
        _vm = session
    return _vm


def close_vm() -> None:
    global _vm
    if _vm is not None:
        _vm.close()
        _vm = None


def oracle_replay_frames(frames, timestamps=None, *, require_reliable=False, **kw):
    """grotool.oracle.replay_frames, or the same through the test VM."""
    from grotool.oracle import DeliveredList, UnreliableRun, replay_frames

    vm = oracle_vm()
    if vm is None:
        return replay_frames(frames, timestamps, require_reliable=require_reliable, **kw)
    kw.pop("log", None)
    result = vm.replay(frames, timestamps, **kw)
    if require_reliable and not result.reliable:
        raise UnreliableRun("kernel replay unreliable: " + "; ".join(result.warnings))
    return DeliveredList(result)


def oracle_run_kernel_replay(input_path, output_path, json_path=None, **kw):
    """grotool.oracle.run_kernel_replay, or the same through the test VM."""
    from grotool.oracle import run_kernel_replay

    return run_kernel_replay(input_path, output_path, json_path, vm=oracle_vm(), **kw)


def oracle_kernel_profile() -> str:
    """The --kernel profile of the oracle's kernel (host or VM): its long-term series."""
    from grotool.engine.kernels import series_of

    vm = oracle_vm()
    return series_of(vm.image.release if vm is not None else os.uname().release)


def oracle_supports_rss() -> bool:
    """Whether the oracle's kernel can take grotool kernel --rss (its hash program
    needs tcx links, Linux 6.6 or later); known before any guest boots."""
    if TEST_VM is None:
        release = os.uname().release
    elif TEST_VM.startswith("debian:"):
        release = TEST_VM.split(":", 1)[1]
    else:
        return True                     # a user's image: let the oracle say
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", release).groups())
    return (major, minor) >= (6, 6)


def oracle_kernel_config():
    """The oracle kernel's GRO-relevant build options (netns.CONFIG_OPTIONS)."""
    from grotool.oracle import netns

    vm = oracle_vm()
    return vm.kernel_config() if vm is not None else netns.kernel_config()
