"""Stretches of the main thread that a signal must not cut in two.

The CLI's handlers (SIGINT, SIGTERM, SIGHUP) raise Interrupted wherever the
main thread is.  Some code does not survive an exception between two of its
steps: queue.Queue and threading.Condition lose a wake-up or keep their lock
when it lands inside them (the write-behind thread then waits for ever, and so
does the join that stops it), and a temporary file created but not yet
registered is never removed.  Such code runs inside ``with uninterrupted:``;
a signal arriving there is remembered and raised as Interrupted when the
outermost stretch ends.  Only the main thread counts: handlers run nowhere
else.  The stretches must not wait for long (the signal waits with them).
"""

from __future__ import annotations

import threading
from typing import Optional

from .errors import Interrupted


class _Uninterrupted:
    __slots__ = ("depth", "pending")

    def __init__(self):
        self.depth = 0                         # nesting in the main thread
        self.pending: Optional[int] = None     # a signal that arrived inside

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.depth += 1

    def __exit__(self, *exc) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self.depth -= 1
        if not self.depth:
            self.raise_pending()

    def raise_pending(self) -> None:
        if self.pending is not None:
            signum, self.pending = self.pending, None
            raise Interrupted(signum)


uninterrupted = _Uninterrupted()


def interrupt(signum: int) -> None:
    """The signal handlers' action: raise Interrupted now, or at the end of
    the ``uninterrupted`` stretch the main thread is in."""
    uninterrupted.pending = signum
    if not uninterrupted.depth:
        uninterrupted.raise_pending()
