"""Opening outputs safely; used by every writer (pcap, JSON, JSON Lines).

What a path is decides how it is written:

- a regular file, or a path that does not exist yet: a temporary file in the
  same directory, fsynced and renamed over the path at the end, so a reader
  never sees half a file and a failed run leaves the old file untouched;
- a symbolic link: the same, applied to the file it points to (the link stays);
- anything else (character device such as /dev/null, FIFO, socket, terminal)
  and descriptor paths (``-``, /dev/stdout, /dev/fd/N, /proc/self/fd/N, what
  ``>(cmd)`` expands to): written in place, never replaced.

A temporary file is written by a thread of its own (the copy into the page
cache overlaps the replay; at most WRITE_BEHIND_QUEUE gathered writes wait),
which also starts the disk writeback every WRITEBACK_BYTES, so the final fsync
is short.  Devices, FIFOs and pipes are written before ``writev`` returns.

A path whose name ends in ``.gz`` (``out.pcap.gz``, ``out.pcapng.gz``,
``doc.json.gz``) is written gzip-compressed, in either case; ``-`` never is.

Temporary files are registered while they exist, so that a signal handler can
remove them (``remove_temporaries``), and removed on every error.  Creating and
registering one, and every hand-off to or stop of a write-behind thread, runs
``uninterrupted`` (grotool.interrupts): a signal there is raised after it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import threading
from typing import Iterable, List, Optional, Set

from ..errors import OutputError
from ..interrupts import uninterrupted

# Temporary files of outputs not yet committed or aborted, for signal cleanup.
_LIVE_TEMPORARIES: Set[str] = set()

# an output whose name ends so is written gzip-compressed (x.pcap.gz, x.json.gz)
GZIP_SUFFIX = ".gz"
GZIP_LEVEL = 6
TEMP_PREFIX = ".grotool-"
TEMP_SUFFIX = ".tmp"

# compiled by re on first use (re's cache): a replay without output files never
# matches it, and compiling it at import was 0.85 M instructions of every start-up
_DESCRIPTOR_PATH = r"^/(?:dev/fd|proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd)/(\d+)$"
_STD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_IOV_PIECES = 1024                         # IOV_MAX on Linux: buffers per os.writev
# A temporary file's written bytes are sent to the disk every this many bytes,
# so the fsync of commit() waits for the last stretch only, not the whole file.
WRITEBACK_BYTES = 8 << 20
# Gathered writes (up to 1.5 megabytes each) waiting for the write-behind thread:
# the caller blocks beyond this, so memory stays bounded whatever the disk does.
WRITE_BEHIND_QUEUE = 1


def remove_temporaries() -> None:
    """Remove every temporary file of an unfinished output (signal handlers call this)."""
    for path in list(_LIVE_TEMPORARIES):
        try:
            os.unlink(path)
        except OSError:
            pass
        _LIVE_TEMPORARIES.discard(path)


def _descriptor_of(path: str) -> Optional[int]:
    """The file descriptor a path names (/dev/stdout, /dev/fd/3, ...), following the
    final component's symbolic links; None for an ordinary path."""
    current = os.path.abspath(path)
    for _ in range(40):                    # the kernel's own symlink limit
        if current in _STD_STREAMS:
            return _STD_STREAMS[current]
        m = re.match(_DESCRIPTOR_PATH, current)
        if m:
            return int(m.group(1))
        if not os.path.islink(current):
            return None
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(current), target))
    return None


def _fail(path: str, what: str, problem: str) -> OutputError:
    return OutputError(f"{path}: cannot write {what}: {problem}")


def check_output_path(path: Optional[str], what: str = "output") -> None:
    """Raise OutputError (one line) when ``path`` certainly cannot be written:
    called for every output before the first input frame is read."""
    if path is None or path == "-" or _descriptor_of(path) is not None:
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise _fail(path, what, exc.strerror) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise _fail(path, what, "it is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if not os.access(path, os.W_OK):
            raise _fail(path, what, "permission denied")
        return                             # device, FIFO, ...: written in place
    target = os.path.realpath(path)
    directory = os.path.dirname(target) or "."
    if not os.path.exists(directory):
        raise _fail(path, what, f"directory {directory} does not exist")
    if not os.path.isdir(directory):
        raise _fail(path, what, f"{directory} is not a directory")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise _fail(path, what, f"directory {directory} is not writable")
    if st is not None and not os.access(target, os.W_OK):
        raise _fail(path, what, "permission denied")


def _write_all(fd: int, pieces: List, size: Optional[int] = None) -> int:
    """os.writev every buffer of ``pieces`` (consumed), retrying short writes;
    the number of bytes written.  ``size``, when the caller knows it, is the
    sum of their lengths (saves adding them up again)."""
    total = 0
    while pieces:
        whole = len(pieces) <= _IOV_PIECES
        batch = pieces if whole else pieces[:_IOV_PIECES]
        # size counts all of pieces: it is this batch's only for a first batch that takes them all
        expected = size if whole and size is not None and not total else sum(map(len, batch))
        written = os.writev(fd, batch)
        total += written
        if written == expected:
            del pieces[:len(batch)]            # the usual case: all of it went out
            continue
        # a short write: drop what went out, retry the rest
        done = 0
        while done < len(batch) and written >= len(batch[done]):
            written -= len(batch[done])
            done += 1
        del pieces[:done]
        if written:
            pieces[0] = memoryview(pieces[0])[written:]
    return total


class _WriteBehind:
    """A thread writing one temporary file's gathered pieces in order, so the
    copy into the page cache runs beside the replay instead of inside it (the
    system call releases the GIL).  It also starts the disk writeback as it
    goes.  An error stops its writing; the owner learns of it from
    ``failure`` and ``stop()``."""

    def __init__(self, fd: int):
        self.fd = fd
        self.failure: Optional[BaseException] = None
        self._written = 0                      # bytes written to the file
        self._sent_to_disk = 0                 # of those, how many writeback was started for
        self._discard = False
        import queue                           # here: a replay without an output file never needs it

        self._jobs = queue.Queue(WRITE_BEHIND_QUEUE)
        self._thread = threading.Thread(target=self._run, name="grotool-write-behind", daemon=True)
        self._thread.start()

    def put(self, pieces: List, size: Optional[int] = None) -> None:
        self._jobs.put((pieces, size))

    def stop(self, discard: bool = False) -> Optional[BaseException]:
        """Write what is queued (or drop it, with ``discard``), end the thread;
        the exception that stopped its writing, if any."""
        self._discard = discard
        self._jobs.put(None)
        self._thread.join()
        return self.failure

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if self.failure is not None or self._discard:
                continue                       # drained, never written
            try:
                self._written += _write_all(self.fd, *job)
            except BaseException as exc:       # the owner raises it; this thread keeps draining
                self.failure = exc
                continue
            if self._written - self._sent_to_disk >= WRITEBACK_BYTES:
                self._start_writeback()

    def _start_writeback(self) -> None:
        """Start writing the new bytes to the disk, without waiting.  On Linux,
        POSIX_FADV_DONTNEED on dirty pages starts their writeback and leaves
        them cached (generic_fadvise drops clean pages only), so the disk works
        while the replay computes and commit()'s fsync finds little left.  Only
        an optimisation: a failure is ignored."""
        start, self._sent_to_disk = self._sent_to_disk, self._written
        try:
            os.posix_fadvise(self.fd, start, self._written - start, os.POSIX_FADV_DONTNEED)
        except (OSError, AttributeError):
            pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class SafeOutput:
    """One output opened safely (see the module docstring).  Write bytes with
    ``write``/``writev``; ``commit()`` makes a file output appear at its path,
    ``abort()`` (or an exception inside ``with``) removes the temporary and leaves
    whatever was at the path untouched.  Every failure is an OutputError."""

    def __init__(self, path: str, what: str = "output"):
        self.path = path
        self.what = what
        self.fd: Optional[int] = None
        self.temporary: Optional[str] = None      # set while a temporary file exists
        self._target: Optional[str] = None        # what the temporary replaces
        self._mode = 0o666 & ~_umask()
        self._behind: Optional[_WriteBehind] = None   # writes a temporary file's bytes
        self._gzip = None                          # a path named *.gz: the compressor of its bytes
        if path != "-" and path.lower().endswith(GZIP_SUFFIX):
            import zlib

            self._gzip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)   # gzip framing
        if path == "-":
            sys.stdout.flush()
            self.fd = self._dup(1)
            return
        check_output_path(path, what)
        descriptor = _descriptor_of(path)
        if descriptor is not None:
            try:
                self.fd = os.dup(descriptor)
                return
            except OSError:
                pass                               # not open in this process: open the path itself
        try:
            st = os.stat(path)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _fail(path, what, exc.strerror) from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise _fail(path, what, exc.strerror) from None
            return
        self._target = os.path.realpath(path)
        if st is not None:
            self._mode = stat.S_IMODE(st.st_mode)          # replacing a file keeps its permissions
        directory = os.path.dirname(self._target) or "."
        import tempfile              # only when a file is written: it brings shutil, random, bz2 and lzma

        with uninterrupted:                        # no temporary left unregistered
            try:
                self.fd, self.temporary = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
            except OSError as exc:
                raise _fail(path, what, exc.strerror) from None
            _LIVE_TEMPORARIES.add(self.temporary)

    def _dup(self, fd: int) -> int:
        try:
            return os.dup(fd)
        except OSError as exc:
            raise _fail(self.path, self.what, exc.strerror) from None

    @property
    def replaces_file(self) -> bool:
        """True when the output is written to a temporary file and renamed at the end."""
        return self._target is not None

    def _error(self, exc: OSError) -> OutputError:
        self.abort()
        if exc.errno == errno.ENOSPC:
            return _fail(self.path, self.what, "no space left on device (nothing written)")
        return _fail(self.path, self.what, exc.strerror or str(exc))

    def write(self, data) -> None:
        # a temporary file's thread writes later: a copy, so the caller may reuse its buffer
        self.writev([bytes(data) if self.temporary is not None else memoryview(data)])

    def writev(self, pieces: List, size: Optional[int] = None) -> None:
        """Write every buffer of ``pieces`` (the list is taken over, the caller
        must not change it; ``size``, if given, is the sum of their lengths).
        A temporary file is written by a thread of its own while the caller
        goes on computing; a device, FIFO or pipe is written before this
        returns (a blocked reader blocks the writer, as it should).  A path
        named *.gz gets the bytes gzip-compressed."""
        if self._gzip is not None:
            compressed = b"".join([self._gzip.compress(piece) for piece in pieces])
            if not compressed:
                return
            pieces, size = [compressed], len(compressed)
        self._write_out(pieces, size)

    def _write_out(self, pieces: List, size: Optional[int] = None) -> None:
        if self.temporary is None:
            try:
                _write_all(self.fd, pieces, size)
            except BrokenPipeError:
                self.abort()
                raise
            except OSError as exc:
                raise self._error(exc) from None
            return
        with uninterrupted:                        # the thread's queue and start survive no exception
            if self._behind is None:
                self._behind = _WriteBehind(self.fd)
            if self._behind.failure is not None:
                self._finish_writes()              # raises what stopped it
            self._behind.put(pieces, size)

    def _finish_writes(self) -> None:
        """Wait for the write-behind thread; what stopped its writing is raised
        here (an OSError as the one-line output error)."""
        if self._behind is None:
            return
        with uninterrupted:
            behind, self._behind = self._behind, None
            failure = behind.stop()
        if isinstance(failure, OSError):
            raise self._error(failure) from None
        if failure is not None:
            self.abort()
            raise failure

    def commit(self) -> None:
        if self.fd is None:
            return
        if self._gzip is not None:
            compressor, self._gzip = self._gzip, None
            self._write_out([compressor.flush()])  # the last deflate block and the gzip trailer
        self._finish_writes()
        fd, self.fd = self.fd, None
        if self.temporary is None:
            try:
                os.close(fd)
            except OSError as exc:
                raise _fail(self.path, self.what, exc.strerror) from None
            return
        try:
            os.fchmod(fd, self._mode)
            os.fsync(fd)
            os.close(fd)
            fd = None
            os.replace(self.temporary, self._target)
        except OSError as exc:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
            raise self._error(exc) from None
        _LIVE_TEMPORARIES.discard(self.temporary)
        self.temporary = None

    def abort(self) -> None:
        with uninterrupted:                        # stops the thread before its descriptor is closed
            if self._behind is not None:
                behind, self._behind = self._behind, None
                behind.stop(discard=True)
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None
            if self.temporary is not None:
                try:
                    os.unlink(self.temporary)
                except OSError:
                    pass
                _LIVE_TEMPORARIES.discard(self.temporary)
                self.temporary = None

    def __enter__(self) -> "SafeOutput":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def open_output(path: str, what: str = "output") -> SafeOutput:
    """The one way grotool opens an output (see the module docstring): a writer
    calls ``write``/``writev`` on the result, then ``commit()`` or ``abort()``."""
    return SafeOutput(path, what)


def _identity(path: str) -> Optional[tuple]:
    """(device, inode) of the file a path names, following symbolic links; None
    when there is none (yet) or it cannot be looked at."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None                        # a device or FIFO is written in place, never replaced
    return st.st_dev, st.st_ino


def check_not_input(path: Optional[str], what: str, inputs: Iterable[Optional[str]]) -> None:
    """Refuse (OutputError, exit 5) an output that is one of the inputs: the same
    file by device and inode, so a symbolic or hard link to an input counts.
    Replacing it would destroy the capture before (or while) it is read."""
    if not path or path == "-":
        return
    out = _identity(path)
    if out is None:
        return
    for source in inputs:
        if not source or source == "-":
            continue
        if _identity(source) == out:
            which = f"the input {source}" if os.path.abspath(path) == os.path.abspath(source) else \
                f"the same file as the input {source}"
            raise OutputError(f"{path}: cannot write {what}: it is {which}; refusing to overwrite it")


def check_outputs(paths: Iterable[Optional[str]], whats: Iterable[str],
                  inputs: Iterable[Optional[str]] = ()) -> None:
    """check_output_path for several outputs; also refuses two outputs on one
    path, and an output that is one of ``inputs`` (check_not_input)."""
    seen = {}
    inputs = list(inputs)
    for path, what in zip(paths, whats):
        if not path:
            continue
        check_output_path(path, what)
        check_not_input(path, what, inputs)
        if path == "-":
            key = "-"
        elif _descriptor_of(path) is not None or (os.path.exists(path) and not os.path.isfile(path)):
            continue                       # /dev/null twice is fine
        else:
            key = os.path.realpath(path)
        if key in seen:
            raise OutputError(f"{path}: {seen[key]} and {what} cannot both be written there")
        seen[key] = what
