"""JSON documents to a path (atomically: temporary file, then rename) or '-'."""

from __future__ import annotations

import json
import os
import sys

from ..errors import GrotoolError


def write_json(doc, target: str, indent: int = 2) -> None:
    text = json.dumps(doc, indent=indent) + "\n"
    if target == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = f"{target}.grotool-tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise GrotoolError(f"{target}: cannot write JSON: {exc.strerror}") from None
