#!/usr/bin/env python3
"""The I/O floor of a replay: what any tool producing grotool's output must at
least do.  Read the whole input, walking every record header (no frame is
looked at), write the given output bytes to a new file in large pieces, fsync.

    python bench/floor.py INPUT.pcap OUTPUT_TO_COPY.pcap DESTINATION
"""

import os
import struct
import sys

CHUNK = 1 << 20


def walk_records(path: str) -> int:
    """Number of records of a pcap (either byte order, any timestamp precision)."""
    records = 0
    with open(path, "rb", buffering=0) as f:
        header = f.read(24)
        order = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        record = struct.Struct(order + "IIII")
        unpack_from = record.unpack_from
        buf = b""
        at = 0
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                break
            buf = buf[at:] + chunk
            at = 0
            end = len(buf)
            while at + 16 <= end:
                caplen = unpack_from(buf, at)[2]
                if at + 16 + caplen > end:
                    break
                at += 16 + caplen
                records += 1
    return records


def copy_synced(source: str, destination: str) -> None:
    with open(source, "rb", buffering=0) as src:
        fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while True:
                chunk = src.read(CHUNK)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


if __name__ == "__main__":
    n = walk_records(sys.argv[1])
    copy_synced(sys.argv[2], sys.argv[3])
    print(n)
