"""`grotool reasons`: the flush-reason vocabulary (also docs/reasons.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from . import make_console

if TYPE_CHECKING:
    from rich.table import Table


@click.command("reasons")
@click.option("--json", "as_json", is_flag=True, help="As JSON.")
@click.option("--markdown", is_flag=True, help="As the Markdown table of docs/reasons.md.")
def reasons(as_json, markdown):
    """List the flush-reason vocabulary."""
    from ..engine.reasons import EFFECTS, REASONS

    if markdown:
        click.echo("| reason | effect | kernel function | meaning |\n|---|---|---|---|")
        for name, (eff, fn, desc) in REASONS.items():
            click.echo(f"| `{name}` | {eff} | {fn} | {desc} |")
        click.echo("\nEffect codes: what happens to the packets involved.\n\n| effect | meaning |\n|---|---|")
        for code, meaning in EFFECTS.items():
            click.echo(f"| {code} | {meaning} |")
        return
    if as_json:
        import json

        click.echo(json.dumps({k: {"effect": e, "effect_meaning": EFFECTS[e], "kernel": f, "meaning": d}
                               for k, (e, f, d) in REASONS.items()}, indent=2))
        return
    console = make_console()
    console.print(reasons_table())
    console.print(effects_text())


def effects_text():
    """The effect codes of the reasons table, explained (plain lines under it)."""
    from rich.text import Text

    from ..engine.reasons import EFFECTS

    lines = ["Effect codes:"] + [f"  {code:<3} {meaning}" for code, meaning in EFFECTS.items()]
    return Text("\n".join(lines))


def reasons_table() -> Table:
    """The vocabulary as a table that fits 80 columns: reason names are identifiers
    to copy, never cut or wrapped; the other columns fold."""
    from rich.table import Table
    from rich.text import Text

    from ..engine.reasons import REASONS

    table = Table(header_style="bold")
    table.add_column("reason", no_wrap=True, min_width=max(len(n) for n in REASONS))
    table.add_column("effect", no_wrap=True)
    table.add_column("kernel function", overflow="fold", min_width=12)
    table.add_column("meaning", overflow="fold", min_width=16)
    for name, (eff, fn, desc) in REASONS.items():
        table.add_row(Text(name), eff, Text(fn), Text(desc))
    return table
