"""The DPDK stack: DPDK 22.11's GRO library (lib/gro) modelled, and the real
librte_gro as its oracle.  See docs/dpdk.md.

    simulate(frames, DpdkSettings(...)) -> [DpdkPacket]     # the model (sans-IO)
    run_library(frames, DpdkSettings(...)) -> [DpdkPacket]  # the real library (grotool.dpdk.oracle)
    run_dpdk(input_path, output_path, json_path, settings, library=False)   # files (grotool.dpdk.run)

Frames are Ethernet frames (bytes); ``grotool.oracle.read_input`` reads a
capture file into them.  A DpdkPacket has ``data``, ``covers`` (input frame
indices in byte order), ``reason``, ``burst`` and ``held_apart``.
"""

__all__ = ["DpdkPacket", "DpdkSettings", "simulate", "run_library"]


def __getattr__(name: str):
    # the model is imported on first use: the command line builds its DPDK
    # options from grotool.dpdk.params without it
    if name in ("DpdkPacket", "DpdkSettings", "simulate"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'grotool.dpdk' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


def run_library(frames, settings):
    """The frames through the real librte_gro (built on first use; see grotool.dpdk.oracle)."""
    from .oracle import run_library as run

    return run(frames, settings)
