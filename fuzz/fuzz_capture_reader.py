"""Coverage-guided fuzz target (atheris / libFuzzer) for the capture reader.

Every input is written to a file on tmpfs and read with CaptureReader, as
`grotool replay` reads a capture; the records go through the GRO engine too
(at most MAX_RECORDS), so a frame the reader lets through cannot crash it.
The only exception allowed is InputError (the documented one-line error,
exit 3).  Anything else is a finding: libFuzzer stops and saves the input.

Run for a bounded time (libFuzzer options pass through):

    python fuzz/fuzz_capture_reader.py -max_total_time=60 -rss_limit_mb=2048 [CORPUS_DIR ...]

With no corpus directory a few seed captures are used (fuzz/seeds.py), in
memory: nothing is written anywhere but crash artifacts.
"""

from __future__ import annotations

import os
import sys

import atheris

# the grotool next to this directory, not an installed one
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

with atheris.instrument_imports(include=["grotool"]):
    from grotool.engine import Engine, Settings
    from grotool.errors import InputError
    from grotool.io.capture import CaptureReader

MAX_RECORDS = 64
# Findings reported but not fixed yet (they are outside the fuzzing code):
# each is tolerated so the run can look for new ones, unless GROTOOL_FUZZ_STRICT=1.
# Reproducers are in fuzz/findings/ (see fuzz/README.md).
# (exception type, innermost function) of findings not fixed yet, tolerated so that
# a long run can look past them; the reproducers of fixed ones stay in
# fuzz/findings/ (a test runs each strictly).  All four found so far are fixed.
KNOWN_FINDINGS: tuple = ()


def _known(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_name if tb is not None else None
    return any(isinstance(exc, kind) and (name is None or name == where) for kind, name in KNOWN_FINDINGS)


STRICT = os.environ.get("GROTOOL_FUZZ_STRICT") == "1"
known_hits = 0
# A cap on the address space turns a runaway allocation into MemoryError, which
# is what the process would see on a machine without that much memory.
ADDRESS_SPACE_LIMIT = 1 << 30
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds import capture_seeds, memory_file, seed_inputs  # noqa: E402

# the input is handed to CaptureReader as a path, as replay gets it: an
# in-memory file rewritten for every input
_PATH = memory_file()
_FD = int(_PATH.rsplit("/", 1)[1])
_SETTINGS = Settings(device="veth")


def test_one_input(data: bytes) -> None:
    os.ftruncate(_FD, 0)
    os.pwrite(_FD, data, 0)
    try:
        with CaptureReader(_PATH) as reader:
            linktype = reader.linktype if reader.linktype is not None else 1
            engine = Engine(linktype, _SETTINGS)
            for n, (ts, frame, wirelen) in enumerate(reader):
                engine.feed(ts, frame, wirelen)
                if n >= MAX_RECORDS:
                    break
            engine.finish()
    except InputError:
        pass
    except Exception as exc:
        if STRICT or not _known(exc):
            raise
        global known_hits
        known_hits += 1


def main() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(seed_inputs(capture_seeds()))
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
