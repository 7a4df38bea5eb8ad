"""grotool: replay captures through a simulation of Linux 6.18 GRO.

The Python API (docs/api.md): ``grotool.Replay``, ``Packet``, ``Decision``,
``Statistics``, ``FlowStatistics``, ``Settings``, ``DpdkSettings``, ``GrotoolError``,
``InputError``.
"""

__version__ = "0.1.0"

from ._build import install_finder  # noqa: E402

install_finder()   # before any engine module is imported: picks the compiled or interpreted build

__all__ = ["Replay", "Packet", "Decision", "Statistics", "FlowStatistics", "Settings", "DpdkSettings",
           "GrotoolError", "InputError", "__version__"]


def __getattr__(name: str):
    # the API is imported on first use: the command line never needs it
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'grotool' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
