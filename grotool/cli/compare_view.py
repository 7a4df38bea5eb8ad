"""Rich rendering of a ``grotool compare`` result (grotool.compare.CompareResult)."""

from __future__ import annotations

from itertools import zip_longest
from typing import List, Optional

from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

STATUS_STYLE = {"identical": "green", "different": "bold red", "only_in_a": "bold yellow",
                "only_in_b": "bold yellow"}
STATUS_TEXT = {"identical": "identical", "different": "different", "only_in_a": "only in A",
               "only_in_b": "only in B"}
DIFF_STYLE = "bold red"


def render_compare(result, console: Console, *, max_flows: int = 20, max_details: int = 5) -> None:
    """Print the verdict, a per-flow summary table and the first differences with context."""
    doc = result.to_json()
    render_compare_doc(doc, console, max_flows=max_flows, max_details=max_details)


def render_compare_doc(doc: dict, console: Console, *, max_flows: int = 20, max_details: int = 5) -> None:
    a, b = doc["inputs"]["a"], doc["inputs"]["b"]
    counts = doc["counts"]
    verdict = Text("IDENTICAL", style="bold green") if doc["identical"] else Text("DIFFERENT", style="bold red")
    head = Text.assemble("A: ", (a["path"], "bold"), f" ({a['packets']} packets)   B: ", (b["path"], "bold"),
                         f" ({b['packets']} packets)   ", verdict)
    console.print(head)
    compared = doc["compared"]
    console.print(Text(
        "compared per flow: TCP (" + ", ".join(compared["tcp"]) + "), UDP (" + ", ".join(compared["udp"])
        + "), other packets by their bytes from the network header; global order "
        + ("required" if compared["require_order"] else "not required"),
        style="dim"))

    flows = doc["flows"]
    ranked = sorted(range(len(flows)), key=lambda k: (flows[k]["status"] == "identical", k))
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    table.add_column("flow", overflow="fold")
    table.add_column("kind")
    table.add_column("A pkts", justify="right")
    table.add_column("B pkts", justify="right")
    table.add_column("status")
    table.add_column("first difference", overflow="fold", ratio=1)
    for k in ranked[:max_flows]:
        f = flows[k]
        first = f["first_difference"]
        # data is never markup: an IPv6 address in brackets would vanish
        table.add_row(Text(f["label"]), f["kind"], str(f["packets_a"]), str(f["packets_b"]),
                      Text(STATUS_TEXT[f["status"]], style=STATUS_STYLE[f["status"]]),
                      Text(first["summary"]) if first else "")
    hidden = len(ranked) - max_flows
    if hidden > 0:
        rest = [flows[k]["status"] for k in ranked[max_flows:]]
        table.caption = (f"{hidden} more flows not shown ({rest.count('identical')} identical, "
                         f"{hidden - rest.count('identical')} different); --json for all")
    console.print(table)

    shown = 0
    for k in ranked:
        f = flows[k]
        if f["status"] == "identical" or f["first_difference"] is None:
            continue
        if shown >= max_details:
            remaining = counts["flows"] - counts["flows_identical"] - shown
            console.print(f"... {remaining} more differing flows (--json for all)", style="dim")
            break
        console.print(_flow_panel(f))
        shown += 1

    order = doc["order"]
    if order["first_difference"] is not None:
        if counts["flows_identical"] == counts["flows"]:
            console.print(_order_panel(order))
        elif order["required"]:
            console.print(f"global order: first differs at packet #{order['first_difference']['position'] + 1} "
                          "(the flows differ, see above)", highlight=False)

    for note in doc["notes"]:
        console.print(Text(f"note: {note}", style="dim"), highlight=False)
    console.print(
        f"{counts['flows']} flows: {counts['flows_identical']} identical, {counts['flows_different']} different, "
        f"{counts['flows_only_in_a']} only in A, {counts['flows_only_in_b']} only in B; "
        f"global order {'identical' if order['identical'] else 'differs'}", highlight=False)


def _flow_panel(f: dict) -> Panel:
    first = f["first_difference"]
    ctx = first["context"]
    kind = f["kind"]
    table = Table(show_edge=False, pad_edge=False, header_style="bold", box=None)
    cols = _columns(kind, ctx["a"] + ctx["b"])
    for side in ("A", "B"):
        for name, justify in cols:
            table.add_column(f"{side} {name}" if name == "frame" else name, justify=justify)
        if side == "A":
            table.add_column("│", justify="center", style="dim")
    for ra, rb in _aligned(ctx["a"], ctx["b"]):
        cells: List = _cells(kind, ra, cols) + ["│"] + _cells(kind, rb, cols)
        table.add_row(*cells)
    title = f"{escape(f['label'])}: {STATUS_TEXT[f['status']]}"     # a panel title is read as markup
    sub = []
    if kind == "tcp" and ctx.get("seq_base") is not None:
        sub.append(f"seq relative to {ctx['seq_base']}")
    if f["differing_regions"] > 1:
        sub.append(f"{f['differing_regions']} differing regions in this flow; the first is shown")
    body = Group(Text(first["summary"], style="bold"), table)
    return Panel(body, title=title, title_align="left", subtitle=escape("; ".join(sub)) or None,
                 subtitle_align="left", border_style="red", expand=False)


def _split(rows: List[dict]):
    """(rows before the difference, rows in it, rows after it)."""
    first = next((k for k, r in enumerate(rows) if r["in_difference"]), len(rows))
    last = max((k for k, r in enumerate(rows) if r["in_difference"]), default=first - 1)
    return rows[:first], rows[first:last + 1], rows[last + 1:]


def _aligned(rows_a: List[dict], rows_b: List[dict]):
    """Row pairs with the differing packets of both sides starting on the same line."""
    before_a, in_a, after_a = _split(rows_a)
    before_b, in_b, after_b = _split(rows_b)
    n = max(len(before_a), len(before_b))
    before_a = [None] * (n - len(before_a)) + before_a
    before_b = [None] * (n - len(before_b)) + before_b
    m = max(len(in_a), len(in_b))
    in_a += [None] * (m - len(in_a))
    in_b += [None] * (m - len(in_b))
    return list(zip(before_a, before_b)) + list(zip(in_a, in_b)) + list(zip_longest(after_a, after_b))


def _columns(kind: str, rows: List[dict]):
    cols = [("frame", "right")]
    if kind == "tcp":
        cols += [("rel seq", "right"), ("len", "right")]
    elif kind == "udp":
        cols += [("#", "right"), ("len", "right")]
    else:
        cols += [("#", "right"), ("len", "right"), ("wire", "right"), ("bytes", "left")]
    if any(r.get("segs") is not None for r in rows):
        cols.append(("segs", "right"))
    if kind == "tcp":
        cols.append(("flags", "left"))
    return cols


def _cells(kind: str, row: Optional[dict], cols) -> List:
    if row is None:
        return [""] * len(cols)
    style = DIFF_STYLE if row["in_difference"] else None
    out = []
    for name, _ in cols:
        if name == "frame":
            value = str(row["frame"])
        elif name == "rel seq":
            value = str(row["rel_seq"])
        elif name == "#":
            value = str(row["ordinal"] + 1)
        elif name == "len":
            value = str(row["len"])
        elif name == "wire":
            value = str(row["wirelen"])
        elif name == "bytes":
            value = row["head"][:24] + ("…" if len(row["head"]) > 24 else "")
        elif name == "segs":
            value = "" if row.get("segs") is None else str(row["segs"])
        elif name == "flags":
            value = row["flags"]
        else:
            value = ""
        out.append(Text(value, style=style or ""))
    if row["in_difference"]:
        out[0] = Text("▶ " + str(row["frame"]), style=DIFF_STYLE)
    return out


def _order_panel(order: dict) -> Panel:
    first = order["first_difference"]
    table = Table(show_edge=False, pad_edge=False, header_style="bold", box=None)
    for name, justify in (("#", "right"), ("A frame", "right"), ("flow", "left"), ("packet", "left"),
                          ("│", "center"), ("B frame", "right"), ("flow", "left"), ("packet", "left")):
        table.add_column(name, justify=justify)
    ctx = first["context"]
    rows_a = {r["position"]: r for r in ctx["a"]}
    rows_b = {r["position"]: r for r in ctx["b"]}
    for pos in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(pos), rows_b.get(pos)
        style = DIFF_STYLE if pos == first["position"] else None

        def cells(r):
            if r is None:
                return ["", "", ""]
            return [Text(str(r["frame"]), style=style or ""), Text(r["flow"], style=style or ""),
                    Text(r["entry"], style=style or "")]

        table.add_row(Text(str(pos + 1), style=style or ""), *cells(ra), "│", *cells(rb))
    title = "global order: " + ("differs (required)" if order["required"] else "differs (not required)")
    return Panel(Group(Text(first["summary"], style="bold"), table), title=title, title_align="left",
                 border_style="red" if order["required"] else "yellow", expand=False)
