"""Replay's settings options, shared by the commands that replay (plot, check).

The options are taken from the `replay` command itself, so help texts,
defaults and checks stay in one place.
"""

from __future__ import annotations

from dataclasses import fields

import click

from ..engine.config import GRO_LEGACY_MAX_SIZE, Settings, ipv4_max_size_for

SETTINGS_FIELDS = frozenset(f.name for f in fields(Settings))


def _replay_setting_params():
    from . import replay

    return [p for p in replay.params if isinstance(p, click.Option) and p.name in SETTINGS_FIELDS]


def replay_settings_options(fn):
    """Add replay's settings options (--device, --budget, --csum, ...) to a command."""
    params = getattr(fn, "__click_params__", [])
    # click applies decorators bottom-up and reverses the list: add in reverse
    for param in reversed(_replay_setting_params()):
        params.append(param)
    fn.__click_params__ = params
    return fn


def settings_from_options(options: dict) -> Settings:
    """Settings from a command's keyword arguments; consumes the settings keys."""
    values = {name: options.pop(name) for name in list(options) if name in SETTINGS_FIELDS}
    if "hz" in values:
        values["hz"] = int(values["hz"])
    if values.get("layout") is None:
        values.pop("layout", None)                 # not given: no layout model
    if "gro_max_size" in values or "gro_ipv4_max_size" in values:
        values["gro_ipv4_max_size"] = ipv4_max_size_for(values.get("gro_max_size", GRO_LEGACY_MAX_SIZE),
                                                        values.get("gro_ipv4_max_size"))
    return Settings(**values)


def explicit_settings(ctx: click.Context) -> list:
    """Names of the settings options given on the command line (not defaults)."""
    from click.core import ParameterSource

    return [name for name in SETTINGS_FIELDS
            if ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)]
