"""grotool: replay captures through a simulation of Linux 6.18 GRO.

The Python API (docs/api.md): ``grotool.Replay``, ``Packet``, ``Statistics``,
``FlowStatistics``, ``Settings``, ``GrotoolError``, ``InputError``.
"""

__version__ = "0.1.0"

from .api import FlowStatistics, GrotoolError, InputError, Packet, Replay, Settings, Statistics  # noqa: E402

__all__ = ["Replay", "Packet", "Statistics", "FlowStatistics", "Settings", "GrotoolError", "InputError",
           "__version__"]
