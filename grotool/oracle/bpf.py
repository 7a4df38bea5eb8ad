"""Give the frames the kernel oracle injects an RSS hash (``grotool kernel --rss``).

A frame sent on an AF_PACKET socket has skb->hash 0, so on the receiving veth
every flow shares GRO bucket 0 (dev_gro_receive takes skb_get_hash_raw & 7).
A NIC with RSS puts its Toeplitz hash there instead.  To give the real
dev_gro_receive that hash:

* the sender sets each frame's skb->mark to the hash grotool computes for it
  (the SO_MARK control message of sendmsg; __sock_cmsg_send, CAP_NET_RAW);
* a four-instruction eBPF program of type BPF_PROG_TYPE_SCHED_CLS, attached as
  a tcx link (BPF_LINK_CREATE, BPF_TCX_EGRESS, Linux 6.6 and later) to the
  sending veth's egress, copies the mark into the hash (bpf_set_hash);
* veth_xmit hands the skb to the peer's NAPI; skb_scrub_packet, run on the
  way, clears the mark only when the packet changes namespace and never
  touches the hash, so the hash reaches GRO.

The program is assembled here, loaded through the bpf() syscall and held only
by file descriptors: nothing is pinned, so closing the descriptors (or the
process ending in any way, SIGKILL included) detaches and frees it, and
deleting the namespace removes the device it was attached to.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket
import struct
import time
from typing import List, Optional

from ..engine.rss import Toeplitz
from ..errors import EnvironmentProblem

# bpf() syscall numbers by machine
_SYS_BPF = {"x86_64": 321, "aarch64": 280, "armv7l": 386, "i686": 357, "i386": 357, "ppc64le": 361,
            "s390x": 351, "riscv64": 280, "loongarch64": 280}

# enum bpf_cmd (uapi/linux/bpf.h)
BPF_PROG_LOAD = 5
BPF_PROG_GET_NEXT_ID = 11
BPF_PROG_GET_FD_BY_ID = 13
BPF_OBJ_GET_INFO_BY_FD = 15
BPF_LINK_CREATE = 28
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_TCX_EGRESS = 47                 # enum bpf_attach_type
BPF_FUNC_SET_HASH = 48              # bpf_set_hash(skb, hash)
SKB_MARK_OFFSET = 8                 # struct __sk_buff: len, pkt_type, mark
TC_ACT_OK = 0
ENOTSUPP = 524                      # the kernel's internal 'not supported', seen by user space
SO_MARK = 36
NAME_PREFIX = "gro_rss_"            # program names: gro_rss_<pid> (at most 15 characters)

_ATTR_SIZE = 144                    # union bpf_attr, zero-padded (the kernel wants the tail zero)
_INFO_SIZE = 80                     # struct bpf_prog_info up to and including name


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """struct bpf_insn: opcode, dst_reg (low nibble) / src_reg (high nibble), off, imm."""
    return struct.pack("<BBhi", code, dst | (src << 4), off, imm)


# r2 = ctx->mark; bpf_set_hash(ctx, r2); return TC_ACT_OK
PROGRAM = b"".join([
    _insn(0x61, dst=2, src=1, off=SKB_MARK_OFFSET),     # BPF_LDX | BPF_MEM | BPF_W
    _insn(0x85, imm=BPF_FUNC_SET_HASH),                 # BPF_JMP | BPF_CALL
    _insn(0xB7, dst=0, imm=TC_ACT_OK),                  # BPF_ALU64 | BPF_MOV | BPF_K
    _insn(0x95),                                        # BPF_JMP | BPF_EXIT
])

# return XDP_PASS: attached to the receiving veth of a kernel before 5.13, where veth
# runs NAPI (and so GRO) only for a device with an XDP program (veth_enable_xdp)
XDP_PASS = 2
BPF_PROG_TYPE_XDP = 6
BPF_XDP = 37                        # enum bpf_attach_type: XDP links (Linux 5.9+)
XDP_PROGRAM = _insn(0xB7, dst=0, imm=XDP_PASS) + _insn(0x95)
XDP_NAME_PREFIX = "gro_xdp_"

_libc = None


def _bpf(cmd: int, attr: ctypes.Array) -> int:
    """The bpf() syscall; returns its result or raises OSError."""
    global _libc
    number = _SYS_BPF.get(platform.machine())
    if number is None:
        raise EnvironmentProblem(f"grotool kernel --rss: no bpf() syscall number known for {platform.machine()}")
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    result = _libc.syscall(ctypes.c_long(number), ctypes.c_int(cmd), attr, ctypes.c_uint(len(attr)))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(result)


def _attr(*fields) -> ctypes.Array:
    """A zeroed bpf_attr with (offset, struct format, value) fields written in."""
    buf = ctypes.create_string_buffer(_ATTR_SIZE)
    for offset, fmt, value in fields:
        struct.pack_into(fmt, buf, offset, value)
    return buf


def load_program(name: Optional[str] = None) -> int:
    """Load PROGRAM as a SCHED_CLS program; returns its fd."""
    name = (name or f"{NAME_PREFIX}{os.getpid()}")[:15]
    insns = ctypes.create_string_buffer(PROGRAM, len(PROGRAM))
    license_ = ctypes.create_string_buffer(b"GPL")
    common = [(0, "<I", BPF_PROG_TYPE_SCHED_CLS), (4, "<I", len(PROGRAM) // 8),
              (8, "<Q", ctypes.addressof(insns)), (16, "<Q", ctypes.addressof(license_)),
              (48, "16s", name.encode()), (68, "<I", BPF_TCX_EGRESS)]
    try:
        return _bpf(BPF_PROG_LOAD, _attr(*common))
    except OSError as exc:
        failure = exc
    # again with the verifier's log, for the reason
    log = ctypes.create_string_buffer(1 << 16)
    try:
        fd = _bpf(BPF_PROG_LOAD, _attr(*common, (24, "<I", 1), (28, "<I", len(log)),
                                       (32, "<Q", ctypes.addressof(log))))
    except OSError:
        pass
    else:
        return fd
    # the verifier's reason is its last line before the "processed N insns" summary
    detail = [line for line in log.value.decode(errors="replace").strip().splitlines()
              if line.strip() and not line.startswith("processed ")]
    raise EnvironmentProblem(f"grotool kernel --rss: loading the eBPF program failed: {failure.strerror}"
                             + (f" ({detail[-1]})" if detail else ""))


def attach_egress(prog_fd: int, ifindex: int) -> int:
    """A tcx link running the program on the device's egress; returns the link fd."""
    attr = _attr((0, "<I", prog_fd), (4, "<I", ifindex), (8, "<I", BPF_TCX_EGRESS))
    try:
        return _bpf(BPF_LINK_CREATE, attr)
    except OSError as exc:
        hint = " (tcx links need Linux 6.6 or later)" if exc.errno in (errno.EINVAL, ENOTSUPP) else ""
        raise EnvironmentProblem(f"grotool kernel --rss: attaching the eBPF program failed: "
                                 f"{exc.strerror}{hint}") from None


def program_names() -> List[str]:
    """Names of every eBPF program loaded in the system (root)."""
    names = []
    prog_id = 0
    while True:
        attr = _attr((0, "<I", prog_id))
        try:
            _bpf(BPF_PROG_GET_NEXT_ID, attr)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return names
            raise
        prog_id = struct.unpack_from("<I", attr, 4)[0]
        try:
            fd = _bpf(BPF_PROG_GET_FD_BY_ID, _attr((0, "<I", prog_id)))
        except OSError:
            continue                              # freed meanwhile
        try:
            info = ctypes.create_string_buffer(_INFO_SIZE)
            _bpf(BPF_OBJ_GET_INFO_BY_FD, _attr((0, "<I", fd), (4, "<I", _INFO_SIZE),
                                               (8, "<Q", ctypes.addressof(info))))
            names.append(info.raw[64:80].split(b"\0", 1)[0].decode(errors="replace"))
        finally:
            os.close(fd)


def our_programs(pid: Optional[int] = None, wait: float = 0.0) -> List[str]:
    """grotool's hash programs still loaded (of one process, or any); freeing a
    closed program is deferred by RCU, so ``wait`` seconds are allowed for it."""
    prefix = f"{NAME_PREFIX}{pid}" if pid is not None else NAME_PREFIX
    end = time.monotonic() + wait
    while True:
        found = [n for n in program_names() if n == prefix or (pid is None and n.startswith(prefix))]
        if not found or time.monotonic() >= end:
            return found
        time.sleep(0.02)


class HashFromMark:
    """The program, loaded and attached to one device's egress.  Create it on a
    thread that is inside the device's namespace (the ifindex is resolved
    there); close() detaches and releases it."""

    def __init__(self, ifindex: int):
        self.prog_fd: Optional[int] = None
        self.link_fd: Optional[int] = None
        self.prog_fd = load_program()
        try:
            self.link_fd = attach_egress(self.prog_fd, ifindex)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for attr in ("link_fd", "prog_fd"):
            fd = getattr(self, attr)
            setattr(self, attr, None)
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


class XdpPass(HashFromMark):
    """An XDP program that passes every frame, linked to one device (create it on a
    thread inside the device's namespace); close() (HashFromMark's) detaches and frees it."""

    def __init__(self, ifindex: int):
        self.prog_fd: Optional[int] = None
        self.link_fd: Optional[int] = None
        insns = ctypes.create_string_buffer(XDP_PROGRAM, len(XDP_PROGRAM))
        license_ = ctypes.create_string_buffer(b"GPL")
        name = f"{XDP_NAME_PREFIX}{os.getpid()}"[:15]
        try:
            self.prog_fd = _bpf(BPF_PROG_LOAD, _attr((0, "<I", BPF_PROG_TYPE_XDP), (4, "<I", len(XDP_PROGRAM) // 8),
                                                     (8, "<Q", ctypes.addressof(insns)),
                                                     (16, "<Q", ctypes.addressof(license_)),
                                                     (48, "16s", name.encode())))
        except OSError as exc:
            raise EnvironmentProblem(f"grotool kernel: loading the XDP pass program failed: {exc.strerror}") from None
        try:
            self.link_fd = _bpf(BPF_LINK_CREATE, _attr((0, "<I", self.prog_fd), (4, "<I", ifindex), (8, "<I", BPF_XDP)))
        except OSError as exc:
            self.close()
            raise EnvironmentProblem(f"grotool kernel: attaching the XDP pass program to the receiving veth "
                                     f"failed: {exc.strerror}") from None


class FrameHasher:
    """The skb->hash grotool's RSS model (engine/rss.py) gives an Ethernet frame:
    the same function the nic device uses, with the same key."""

    def __init__(self, key: bytes):
        self.key = bytes(key)
        self.toeplitz = Toeplitz(self.key)

    def __call__(self, frame: bytes) -> int:
        if len(frame) < 14:
            return 0
        return self.toeplitz.flow_hash(frame, 14, (frame[12] << 8) | frame[13])


def mark_cmsg(mark: int) -> list:
    """Ancillary data for sendmsg that sets the sent skb's mark."""
    return [(socket.SOL_SOCKET, SO_MARK, struct.pack("=I", mark & 0xFFFFFFFF))]
