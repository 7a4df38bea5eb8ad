"""grotool: replay captures through a simulation of Linux 6.18 GRO."""

__version__ = "0.1.0"
