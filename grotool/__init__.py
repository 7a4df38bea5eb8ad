"""grotool: replay captures through a simulation of Linux 6.18 GRO.

The Python API (docs/api.md): ``grotool.Replay``, ``Packet``, ``Statistics``,
``FlowStatistics``, ``Settings``, ``GrotoolError``, ``InputError``.
"""

__version__ = "0.1.0"

from ._build import install_finder  # noqa: E402

install_finder()   # before any engine module is imported: picks the compiled or interpreted build

from .api import FlowStatistics, GrotoolError, InputError, Packet, Replay, Settings, Statistics  # noqa: E402

__all__ = ["Replay", "Packet", "Statistics", "FlowStatistics", "Settings", "GrotoolError", "InputError",
           "__version__"]
