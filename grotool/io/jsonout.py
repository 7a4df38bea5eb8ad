"""JSON documents to a path or '-', opened through SafeOutput (atomic for files,
in place for devices, FIFOs and descriptors)."""

from __future__ import annotations

import json

from .safe_output import SafeOutput


def write_json(doc, target: str, indent: int = 2, what: str = "JSON") -> None:
    text = json.dumps(doc, indent=indent) + "\n"
    with SafeOutput(target, what) as out:
        out.write(text.encode())


class JsonLinesWriter:
    """One JSON object per line, buffered, through SafeOutput."""

    FLUSH_BYTES = 1 << 20

    def __init__(self, target: str, what: str = "JSON lines"):
        self._out = SafeOutput(target, what)
        self._lines: list = []
        self._bytes = 0

    def write_line(self, text: str) -> None:
        self._lines.append(text)
        self._bytes += len(text) + 1
        if self._bytes >= self.FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self._lines:
            data = ("\n".join(self._lines) + "\n").encode()
            self._lines = []
            self._bytes = 0
            self._out.write(data)

    def close(self) -> None:
        self._flush()
        self._out.commit()

    def abort(self) -> None:
        self._lines = []
        self._out.abort()
