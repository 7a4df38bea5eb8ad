"""`grotool kernels`: the kernel history table (engine/kernels.py) and, for one
--kernel, which rows hold."""

from __future__ import annotations

import json
import sys

import click

from ..engine.kernels import CHECKED, ROWS, SERIES, cached_profile, known_versions


def _stable(row) -> str:
    return ", ".join(row.stable) or "-"


def _checked(row) -> str:
    return ", ".join(CHECKED.get(row.id, ())) or "-"


def markdown_table() -> str:
    """The table of docs/kernels.md (a test keeps the two equal)."""
    lines = ["| row | newer behaviour | older kernels | newer kernels | mainline | stable backports | commit | "
             "modelled | checked against |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in ROWS:
        cells = [row.id, row.title, row.older, row.newer, row.since, _stable(row), row.commit, row.modelled,
                 _checked(row)]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def profiles_markdown() -> str:
    lines = ["| --kernel | release modelled |", "|---|---|"]
    for name, release in sorted(SERIES.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))):
        lines.append(f"| `{name}` | {release} |")
    lines.append("| `5.10.0` ... `6.18.0` | that mainline release |")
    return "\n".join(lines) + "\n"


@click.command()
@click.option("--kernel", "version", metavar="VERSION", default=None,
              help="Mark the rows that hold for this kernel (a --kernel value of replay).")
@click.option("--json", "as_json", is_flag=True, help="As JSON (schema grotool.kernels/1).")
@click.option("--markdown", is_flag=True, help="As the Markdown table of docs/kernels.md.")
def kernels(version, as_json, markdown):
    """The GRO behaviours that differ between Linux 5.10 and 6.18, one row each:
    what older and newer kernels do, the first mainline release, the stable
    backports, the commit, whether grotool models it and which real kernels it
    was checked against.  With --kernel, which rows hold for that release."""
    profile = None
    if version is not None:
        try:
            profile = cached_profile(version)
        except ValueError as exc:
            click.echo(f"grotool: error: --kernel: {exc}", err=True)
            sys.exit(2)
    if markdown:
        click.echo(markdown_table(), nl=False)
        return
    if as_json:
        doc = {"schema": "grotool.kernels/1", "profiles": dict(SERIES), "known": list(known_versions()),
               "rows": [{"id": r.id, "title": r.title, "older": r.older, "newer": r.newer, "mainline": r.since,
                         "stable": list(r.stable), "commit": r.commit, "modelled": r.modelled,
                         "checked": list(CHECKED.get(r.id, ()))} for r in ROWS]}
        if profile is not None:
            doc["kernel"] = {"name": profile.name, "release": profile.release,
                             "rows": [r.id for r in ROWS if profile.holds(r.id)]}
        click.echo(json.dumps(doc, indent=2))
        return
    from rich.table import Table
    from rich.text import Text

    from . import make_console

    title = "GRO across kernel releases"
    if profile is not None:
        title += f": {profile.description} (rows that hold: yes)"
    table = Table(title=title, header_style="bold", show_lines=False)
    table.add_column("row")
    if profile is not None:
        table.add_column(profile.name)
    table.add_column("newer behaviour", overflow="fold")
    table.add_column("since")
    table.add_column("stable", overflow="fold")
    table.add_column("modelled", overflow="fold")
    table.add_column("checked", overflow="fold")
    for row in ROWS:
        cells = [Text(row.id)]
        if profile is not None:
            cells.append(Text("yes" if profile.holds(row.id) else "no"))
        modelled = "yes" if row.modelled == "engine" else row.modelled.replace("not modelled: ", "no: ")
        cells += [Text(row.title), Text(row.since), Text(_stable(row)), Text(modelled), Text(_checked(row))]
        table.add_row(*cells)
    make_console().print(table)
