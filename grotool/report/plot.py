"""Pictures of a replay: super-packet sizes per flow, segments per delivered
packet, flush reasons over time.

matplotlib is an optional extra (``pip install 'grotool[plot]'``) and is
imported only when a picture is drawn; ``PlotCollector`` itself needs nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional

from ..errors import EnvironmentProblem, OutputError
from .flows import FlowNamer, flow_label

TOP_FLOWS = 10
INSTALL_HINT = "pip install 'grotool[plot]'"


def require_matplotlib():
    """The matplotlib module set up for files (Agg); EnvironmentProblem (exit 4) when missing."""
    try:
        import matplotlib
    except ImportError:
        raise EnvironmentProblem(f"plotting needs matplotlib, which is not installed ({INSTALL_HINT})") from None
    matplotlib.use("Agg")
    return matplotlib


class PlotCollector:
    """Feed it every Delivery (it is a plain callable); keeps a few numbers per packet."""

    def __init__(self, linktype: int = 1):
        self._namer = FlowNamer(linktype)
        self.flow_names: List[str] = []
        self._flow_index: Dict[object, int] = {}
        self.ts: List[int] = []
        self.flow: List[int] = []
        self.size: List[int] = []
        self.segs: List[int] = []
        self.reason: List[str] = []

    def start(self, linktype: int) -> None:
        """Called by grotool.replay.replay before the first delivery."""
        self._namer = FlowNamer(linktype)

    def __call__(self, d) -> None:
        flow = self._namer(d.key, d.data)
        index = self._flow_index.get(flow)
        if index is None:
            index = self._flow_index[flow] = len(self.flow_names)
            self.flow_names.append(flow_label(flow))
        self.ts.append(d.ts)
        self.flow.append(index)
        self.size.append(d.frame_len)
        self.segs.append(d.segs)
        self.reason.append(d.reason)

    @property
    def packets(self) -> int:
        return len(self.ts)


def render(data: PlotCollector, path: str, title: str = "") -> None:
    """Draw the three panels into ``path`` (format from its extension: png, svg, pdf)."""
    require_matplotlib()
    import matplotlib.pyplot as plt

    fig, (ax_size, ax_segs, ax_reason) = plt.subplots(
        3, 1, figsize=(12, 13), gridspec_kw={"height_ratios": [1.2, 0.8, 1.1]})
    fig.suptitle(title or "grotool replay", fontsize=14, fontweight="bold")
    if not data.packets:
        for ax in (ax_size, ax_segs, ax_reason):
            ax.text(0.5, 0.5, "no packets", ha="center", va="center", transform=ax.transAxes)
        _save(fig, plt, path)
        return
    _size_panel(ax_size, data)
    _segs_panel(ax_segs, data)
    _reason_panel(ax_reason, data)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    _save(fig, plt, path)


def plot_format(path: str) -> str:
    """The picture format a path asks for: its extension (png without one)."""
    import os

    return os.path.splitext(path)[1].lstrip(".").lower() or "png"


def check_plot_path(path: str, what: str = "the plot") -> None:
    """Before the replay: OutputError (exit 5) when ``path`` cannot be written
    or names a format matplotlib cannot draw, or is one of ``inputs``."""
    from ..io.safe_output import check_output_path

    check_output_path(path, what)
    if path == "-":
        return
    require_matplotlib()
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    fmt = plot_format(path)
    if fmt not in formats:
        raise OutputError(f"{path}: cannot write {what}: format {fmt!r} is not one matplotlib draws "
                          f"({', '.join(sorted(formats))})")


def _save(fig, plt, path: str) -> None:
    """Draw into memory, then write through SafeOutput (a file atomically,
    a device or pipe in place); a failure is an OutputError (exit 5)."""
    import io

    from ..io.safe_output import open_output

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, dpi=110, format="png" if path == "-" else plot_format(path))
    except (OSError, ValueError) as exc:
        raise OutputError(f"{path}: cannot write the plot: {getattr(exc, 'strerror', None) or exc}") from None
    finally:
        plt.close(fig)
    with open_output(path, "the plot") as out:
        out.write(buffer.getvalue())


def _short(label: str, width: int = 48) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def _size_panel(ax, data: PlotCollector) -> None:
    by_flow: Dict[int, List[int]] = {}
    for f, size, segs in zip(data.flow, data.size, data.segs):
        by_flow.setdefault(f, []).append(size)
    supers = Counter(f for f, segs in zip(data.flow, data.segs) if segs > 1)
    # the flows with the most packets, busiest at the top
    flows = sorted(by_flow, key=lambda f: (-len(by_flow[f]), data.flow_names[f]))[:TOP_FLOWS][::-1]
    sizes = [by_flow[f] for f in flows]
    ax.boxplot(sizes, vert=False, widths=0.6, showfliers=False,
               medianprops={"color": "tab:red", "linewidth": 1.5})
    for row, values in enumerate(sizes, start=1):
        jitter = [row + ((k * 37) % 21 - 10) / 60 for k in range(len(values))]
        ax.scatter(values, jitter, s=9, alpha=0.45, color="tab:blue", linewidths=0)
    ax.set_yticks(range(1, len(flows) + 1))
    ax.set_yticklabels([f"{_short(data.flow_names[f])}  ({len(by_flow[f])} pkts, {supers[f]} super)"
                        for f in flows], fontsize=8)
    ax.set_xlabel("delivered packet size (bytes, link header included)")
    more = len(by_flow) - len(flows)
    ax.set_title("Packet sizes per flow" + (f" (busiest {len(flows)} of {len(by_flow)} flows)" if more else ""),
                 loc="left")
    ax.grid(axis="x", alpha=0.3)


def _segs_panel(ax, data: PlotCollector) -> None:
    counts = Counter(data.segs)
    xs = sorted(counts)
    bars = ax.bar(xs, [counts[x] for x in xs], color=["tab:gray" if x == 1 else "tab:green" for x in xs],
                  width=0.8)
    for bar, x in zip(bars, xs):
        ax.annotate(str(counts[x]), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=7)
    total_in = sum(data.segs)
    ax.set_xlabel("segments per delivered packet (1 = not merged)")
    ax.set_ylabel("packets")
    ax.set_title(f"Segments per packet: {total_in} frames in, {data.packets} packets out, "
                 f"ratio {total_in / data.packets:.2f}", loc="left")
    if len(xs) <= 30:
        ax.set_xticks(xs)
    ax.grid(axis="y", alpha=0.3)


def _reason_panel(ax, data: PlotCollector) -> None:
    t0 = min(data.ts)
    span = max(data.ts) - t0
    scale, unit = (1e-6, "ms") if span < 10e9 else (1e-9, "s")
    counts = Counter(data.reason)
    reasons = [r for r, _ in counts.most_common()][::-1]       # most frequent at the top
    row = {r: k for k, r in enumerate(reasons)}
    cmap = _colormap(len(reasons))
    for r in reasons:
        xs = [(t - t0) * scale for t, rr in zip(data.ts, data.reason) if rr == r]
        sz = [8 + 4 * min(s, 44) for s, rr in zip(data.segs, data.reason) if rr == r]
        ax.scatter(xs, [row[r]] * len(xs), s=sz, alpha=0.55, color=cmap(row[r]), linewidths=0)
    ax.set_yticks(range(len(reasons)))
    ax.set_yticklabels([f"{r} ({counts[r]})" for r in reasons], fontsize=8)
    ax.set_ylim(-0.7, len(reasons) - 0.3)
    ax.set_xlabel(f"time since the first packet ({unit}); dot size grows with segments")
    ax.set_title("Why each packet was delivered, over time", loc="left")
    ax.grid(axis="x", alpha=0.3)


def _colormap(n: int):
    import matplotlib

    cmap = matplotlib.colormaps["tab20" if n > 10 else "tab10"]
    return lambda k: cmap(k % cmap.N)


def plot_capture(input_path: str, output_path: str, settings, title: Optional[str] = None,
                 progress=None):
    """Replay ``input_path`` and draw its picture; returns the ReplayResult."""
    import os

    from ..replay import replay

    require_matplotlib()
    collector = PlotCollector()
    result = replay(input_path, None, settings, observers=[collector], progress=progress)
    render(collector, output_path, title or f"{os.path.basename(input_path)}: GRO ({settings.device} model)")
    return result
