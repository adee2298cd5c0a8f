"""``memlane config show``: the effective settings and where each came from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from memlane.interfaces.cli.app import llm_options, store_options
from memlane.interfaces.cli.options import SettingOption, cli_settings
from memlane.settings import entries


@click.group("config")
def config_group() -> None:
    """memlane's settings (the MEMLANE_* environment variables and the options over them)."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of {name, env, value, source, secret}.")
@store_options
@llm_options
@click.pass_context
def show_cmd(ctx: click.Context, /, as_json: bool, **_given: Any) -> None:
    """Print every setting: its value (API keys masked), its environment variable, and where the value came
    from: default, env MEMLANE_..., or option --... for the options given here (--store, --embedder, --llm,
    --llm-model, --llm-base-url, --llm-log).

    \b
    Example:
      memlane config show
      MEMLANE_LLM_MODEL=gpt-4o-mini memlane config show --store team.db --json
    """
    options: dict[str, tuple[str, Any]] = {}
    for param in ctx.command.params:
        if not isinstance(param, SettingOption) or param.name is None:
            continue
        if ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE:
            value = ctx.params[param.name]
            options[param.setting] = (param.opts[0], str(value) if isinstance(value, Path) else value)
    rows = entries(cli_settings(ctx), options)
    if as_json:
        click.echo(
            json.dumps(
                [{"name": e.name, "env": e.env, "value": e.value, "source": e.source, "secret": e.secret} for e in rows]
            )
        )
        return
    width = max(len(e.env) for e in rows)
    for e in rows:
        value = "(not set)" if e.value is None else repr(e.value) if isinstance(e.value, str) else str(e.value)
        click.echo(f"{e.env:<{width}}  {value:<28}  {e.source}")


def register(group: click.Group) -> None:
    group.add_command(config_group)
