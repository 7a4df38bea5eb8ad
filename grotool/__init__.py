"""grotool: replay captures through a simulation of Linux 6.18 GRO.

The Python API (docs/api.md): ``grotool.Replay``, ``Packet``, ``Decision``,
``Statistics``, ``FlowStatistics``, ``Settings``, ``GrotoolError``, ``InputError``.
"""

__version__ = "0.1.0"

from ._build import install_finder  # noqa: E402

install_finder()   # before any engine module is imported: picks the compiled or interpreted build

from .api import (Decision, FlowStatistics, GrotoolError, InputError, Packet, Replay, Settings,  # noqa: E402
                  Statistics)

__all__ = ["Replay", "Packet", "Decision", "Statistics", "FlowStatistics", "Settings", "GrotoolError", "InputError",
           "__version__"]
