"""`grotool plot`: the picture of a replay."""

from __future__ import annotations

import os

import click

from ..engine.config import Settings
from . import user_errors
from .options import replay_settings_options, settings_from_options


@click.command("plot")
@click.argument("input_path", metavar="INPUT")
@click.argument("output_path", metavar="OUTPUT")
@replay_settings_options
@click.option("--title", default=None, help="Figure title (default: the capture's name and device model).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no summary line.")
@user_errors
def plot(input_path, output_path, title, quiet, **options):
    """Replay INPUT and draw OUTPUT (png, svg or pdf): packet sizes per flow,
    segments per delivered packet, flush reasons over time.

    Needs the optional extra: pip install 'grotool[plot]' (exit 4 without it)."""
    from .extras import replay_extras
    from ..replay import replay as run_replay

    from . import _check_outputs

    settings: Settings = settings_from_options(options)
    _check_outputs([input_path], **{"the plot": output_path})   # before the replay: exit 5
    with replay_extras(input_path, settings, output_path, quiet, description="plot") as extras:
        if title:
            extras.title = title
        result = run_replay(input_path, None, settings, observers=extras.observers, progress=extras.progress)
    if not quiet:
        totals = result.document["totals"]
        click.echo(f"{os.path.basename(output_path)}: {totals['packets_in']} frames in, "
                   f"{totals['packets_out']} packets out, {totals['super_packets']} super-packets", err=True)
