"""Replay add-ons the command line wires in: the --plot picture and the progress bar."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, List, Optional

from .progress import ProgressBar, input_size, progress_wanted, reader_position


class ReplayExtras:
    def __init__(self):
        self.observers: List[Callable] = []
        self.progress: Optional[Callable] = None
        self.title: Optional[str] = None


@contextmanager
def replay_extras(input_path: str, settings, plot_path: Optional[str], quiet: bool, description: str = "replay"):
    """Observers and progress callback for one replay; draws the plot when the
    replay succeeded.  A missing matplotlib fails before the replay starts."""
    extras = ReplayExtras()
    collector = None
    if plot_path:
        from ..report.plot import PlotCollector, check_plot_path, require_matplotlib

        require_matplotlib()
        check_plot_path(plot_path)             # a bad path or format: exit 5 before the replay
        collector = PlotCollector()
        extras.observers.append(collector)
    bar = ProgressBar(progress_wanted(quiet), input_size(input_path), description)
    if bar.enabled:
        extras.progress = lambda frames, reader: bar.update(frames, reader_position(reader))
    try:
        yield extras
    finally:
        bar.close()
    if collector is not None:
        from ..report.plot import render

        render(collector, plot_path,
               extras.title or f"{os.path.basename(input_path)}: GRO ({settings.device} model)")
