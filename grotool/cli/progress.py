"""A rich progress bar for long runs (replay, plot, check, sweep) on a terminal.

Shown only when both standard output and standard error are terminals, not
with -q, and only once a run has lasted about a second: short runs and
scripts see nothing extra.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional

from ..interrupts import uninterrupted

SHOW_AFTER_SECONDS = 1.0


def progress_wanted(quiet: bool) -> bool:
    if quiet:
        return False
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def input_size(path: str) -> Optional[int]:
    """Bytes of a regular input file (for the ETA), None for stdin or a pipe."""
    if path == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    import stat

    return st.st_size if stat.S_ISREG(st.st_mode) and st.st_size else None


def reader_position(reader) -> Optional[int]:
    """Bytes of the input file consumed so far (compressed bytes for gzip)."""
    raw = getattr(reader, "_owned", None)
    if raw is None:
        return None
    try:
        return raw.tell()
    except (OSError, ValueError):
        return None


class ProgressBar:
    """``update(frames, position)``; ``close()``.  Draws nothing until
    SHOW_AFTER_SECONDS have passed, and nothing at all when disabled."""

    def __init__(self, enabled: bool, total_bytes: Optional[int], description: str = "replay"):
        self.enabled = enabled
        self.total = total_bytes
        self.description = description
        self._started = time.monotonic()
        self._progress = None
        self._task = None
        self._base_frames = 0
        self._base_bytes = 0

    def next_input(self, frames_done: int, bytes_done: int, description: Optional[str] = None) -> None:
        """check: a new capture starts; counts so far carry over."""
        self._base_frames = frames_done
        self._base_bytes = bytes_done
        if description:
            self.description = description
            if self._progress is not None:
                self._progress.update(self._task, description=description)

    def update(self, frames: int, position: Optional[int]) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._started
        if self._progress is None:
            if elapsed < SHOW_AFTER_SECONDS:
                return
            self._start()
        total_frames = self._base_frames + frames
        self._progress.update(self._task, completed=self._base_bytes + (position or 0),
                              frames=total_frames, rate=f"{total_frames / elapsed:>9,.0f} frames/s")

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        columns = [TextColumn("[bold]{task.description}"), BarColumn(),
                   TextColumn("{task.fields[frames]:>10,} frames"), TextColumn("{task.fields[rate]}"),
                   DownloadColumn(), TimeRemainingColumn() if self.total else TimeElapsedColumn()]
        with uninterrupted:                    # starts rich's refresh thread
            self._progress = Progress(*columns, console=Console(stderr=True), transient=True, refresh_per_second=8)
            self._progress.start()
        self._task = self._progress.add_task(self.description, total=self.total, frames=0, rate="")

    def close(self) -> None:
        with uninterrupted:                    # stops and joins that thread
            if self._progress is not None:
                self._progress.stop()
                self._progress = None


class RunsBar:
    """Completed runs out of a total (sweep: captures x settings; check
    --jobs/--scheduler: captures, with ``unit="captures"``), fed by an
    executor's ``progress(done, total)`` callback in this process.  Shown, as
    ProgressBar, only when enabled and once the run has lasted
    SHOW_AFTER_SECONDS: a timer draws it then even before the first run
    completes (one run can take a long time)."""

    def __init__(self, enabled: bool, total: int, description: str = "sweep", unit: str = "runs"):
        import threading

        self.enabled = enabled and total > 0
        self.total = total
        self.description = description
        self.unit = unit
        self.done = 0
        self._lock = threading.Lock()
        self._progress = None
        self._task = None
        self._closed = False
        self._timer = None
        if self.enabled:
            if SHOW_AFTER_SECONDS <= 0:
                self._show()             # at once: no timer to race a run that ends quickly
            else:
                self._timer = threading.Timer(SHOW_AFTER_SECONDS, self._show)
                self._timer.daemon = True
                self._timer.start()

    def update(self, done: int, total: int) -> None:
        with self._lock:
            self.done = done
            if self._progress is not None:
                self._progress.update(self._task, completed=done, total=total)

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        with self._lock:
            if self._closed or self._progress is not None:
                return
            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn(self.unit), TimeElapsedColumn(), TimeRemainingColumn(),
                                      console=Console(stderr=True), transient=True, refresh_per_second=4)
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.total, completed=self.done)

    def close(self) -> None:
        with uninterrupted:                    # the timer's and rich's threads
            if self._timer is not None:
                self._timer.cancel()
            with self._lock:
                self._closed = True
                if self._progress is not None:
                    self._progress.stop()
                    self._progress = None
