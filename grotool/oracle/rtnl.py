"""The few rtnetlink requests the oracle makes itself (AF_NETLINK, NETLINK_ROUTE),
for device settings that not every iproute2 can set (this host's `ip link`
rejects gro_ipv4_max_size): RTM_NEWLINK with u32 IFLA_* attributes, and
RTM_GETLINK to read them back.

The socket must be opened inside the namespace of the device (the caller
switches the thread in and out, grotool.oracle.netns.VethNamespace.enter).
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Dict, Iterable, Tuple

# include/uapi/linux/if_link.h: the IFLA_* attribute numbers (stable ABI)
IFLA_GRO_MAX_SIZE = 58             # 5.16+
IFLA_GRO_IPV4_MAX_SIZE = 64        # 6.3+
RTM_NEWLINK, RTM_GETLINK = 16, 18
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSGHDR = struct.Struct("=IHHII")      # len, type, flags, seq, pid
IFINFOMSG = struct.Struct("=BxHiII")    # family, type, index, flags, change
RTATTR = struct.Struct("=HH")           # len, type


def _align(n: int) -> int:
    return (n + 3) & ~3


def _message(kind: int, flags: int, seq: int, body: bytes) -> bytes:
    return NLMSGHDR.pack(NLMSGHDR.size + len(body), kind, flags, seq, 0) + body


def _u32_attrs(values: Iterable[Tuple[int, int]]) -> bytes:
    out = b""
    for attr, value in values:
        out += RTATTR.pack(RTATTR.size + 4, attr) + struct.pack("=I", value)
    return out


def _request(kind: int, flags: int, body: bytes) -> bytes:
    """Send one request and return the payload of its answer (the RTM_NEWLINK of a
    get, or b"" for an acknowledged set); OSError with the kernel's errno."""
    seq = int.from_bytes(os.urandom(4), "little") or 1
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.bind((0, 0))
        sock.settimeout(5.0)
        sock.send(_message(kind, flags | NLM_F_REQUEST, seq, body))
        while True:
            data = sock.recv(1 << 16)
            off = 0
            while off + NLMSGHDR.size <= len(data):
                length, mtype, _flags, mseq, _pid = NLMSGHDR.unpack_from(data, off)
                if length < NLMSGHDR.size:
                    raise OSError(0, "malformed netlink answer")
                payload = data[off + NLMSGHDR.size:off + length]
                off += _align(length)
                if mseq != seq:
                    continue
                if mtype == NLMSG_ERROR:
                    err = struct.unpack_from("=i", payload)[0]
                    if err:
                        raise OSError(-err, os.strerror(-err))
                    return b""
                if mtype == NLMSG_DONE:
                    return b""
                return payload


def set_link_u32(ifindex: int, values: Iterable[Tuple[int, int]]) -> None:
    """RTM_NEWLINK on an existing device with u32 attributes, in the order given
    (do_setlink applies them in its own fixed order).  A kernel that does not know
    an attribute ignores it silently: read it back with link_u32."""
    body = IFINFOMSG.pack(socket.AF_UNSPEC, 0, ifindex, 0, 0) + _u32_attrs(values)
    _request(RTM_NEWLINK, NLM_F_ACK, body)


def link_u32(ifindex: int, attrs: Iterable[int]) -> Dict[int, int]:
    """The u32 attributes among ``attrs`` that RTM_GETLINK reports for the device
    (an attribute the kernel does not have is absent)."""
    want = set(attrs)
    payload = _request(RTM_GETLINK, 0, IFINFOMSG.pack(socket.AF_UNSPEC, 0, ifindex, 0, 0))
    out: Dict[int, int] = {}
    off = IFINFOMSG.size
    while off + RTATTR.size <= len(payload):
        length, attr = RTATTR.unpack_from(payload, off)
        if length < RTATTR.size:
            break
        attr &= 0x3FFF                   # NLA_F_NESTED / NLA_F_NET_BYTEORDER
        if attr in want and length == RTATTR.size + 4:
            out[attr] = struct.unpack_from("=I", payload, off + RTATTR.size)[0]
        off += _align(length)
    return out
