"""Options every command group shares: options backed by a setting of :mod:`memlane.settings`, and the one
parser of k lists.

An option made with ``cls=SettingOption, setting="store"`` takes its value, when not given on the command
line, from the :class:`~memlane.settings.Settings` the CLI builds once per invocation (here,
``MEMLANE_STORE``): the environment is read in one place, with one type per variable, and ``memlane config
show`` can say where each value came from.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

import click
from pydantic import SecretStr

from memlane.core.bounds import (
    MAX_CONCURRENCY,
    MAX_OFFSET,
    MAX_PAGE,
    MAX_PERIOD_S,
    MAX_ROW_ID,
    MAX_VERSION,
    MIN_WAIT_S,
)
from memlane.core.model_checks import MAX_TTL_S
from memlane.core.retention import DEFAULT_SWEEP_INTERVAL_S
from memlane.core.retrieval.settings import MAX_K
from memlane.settings import DEFAULT_STORE, Settings, env_var, load

_META_KEY = "memlane.settings"
F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.FloatRange):
    """A finite number of seconds from ``min`` to ``max`` (click's FloatRange lets NaN through)."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return seconds


# The numeric options' types, bounded as the core bounds them (memlane.core.bounds): a value out of range
# is refused by click, naming the option (exit 2), before anything runs. Every numeric option of a command
# that reaches a store has both bounds (tests/redteam/test_rt_numbers.py checks).
K = click.IntRange(1, MAX_K)
LIMIT = click.IntRange(1, MAX_PAGE)
OFFSET = click.IntRange(0, MAX_OFFSET)
VERSION = click.IntRange(0, MAX_VERSION)
TTL = click.IntRange(0, MAX_TTL_S)
CONCURRENCY = click.IntRange(1, MAX_CONCURRENCY)
PORT = click.IntRange(0, 65_535)
ROW_ID = click.IntRange(0, MAX_ROW_ID)  # an id the store (or Citus) made: a 64-bit integer
WAIT = Seconds(MIN_WAIT_S, MAX_PERIOD_S)  # a lease, a poll interval
EVERY = Seconds(0, MAX_PERIOD_S)  # an interval, 0: never
TIMEOUT = Seconds(0.1, MAX_PERIOD_S)  # how long a server waits for a client or for a job
FOLDER = click.Path(file_okay=False, path_type=Path)  # a path that must not be a file


def cli_settings(ctx: click.Context | None = None) -> Settings:
    """The settings of this CLI invocation, read from the environment on first use."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:  # called outside a command (a test, a program): read the environment now
        return load()
    settings = ctx.meta.get(_META_KEY)
    if not isinstance(settings, Settings):
        settings = load()
        ctx.meta[_META_KEY] = settings
    return settings


def _as_text(value: Any) -> str:
    # Click converts an option's environment value from text with the option's own type and checks.
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    return str(value)


class SettingOption(click.Option):
    """A click option whose environment variable is read through :class:`~memlane.settings.Settings`."""

    def __init__(self, *args: Any, setting: str, **kwargs: Any) -> None:
        super().__init__(*args, envvar=env_var(setting), **kwargs)
        self.setting = setting

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        settings = cli_settings(ctx)
        if self.setting not in settings.model_fields_set:
            return None
        value = getattr(settings, self.setting)
        return None if value is None else _as_text(value)


def setting_option(*decls: str, setting: str, help: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """A click option backed by setting ``setting`` (a :class:`SettingOption`). Its help ends with
    ``[env VARIABLE]``, the variable's name made by :func:`~memlane.settings.env_var`, not written again in
    every option's help."""
    note = f"[env {env_var(setting)}]"
    text = f"{help.rstrip()} {note}" if help else note
    return click.option(*decls, cls=SettingOption, setting=setting, help=text, **kwargs)


def split_values(values: tuple[str, ...] | str, hint: str) -> tuple[str, ...]:
    """Values given repeated, comma- or space-separated (an environment variable holds them space-separated),
    in order, without repeats; a usage error if there is none."""
    items = [values] if isinstance(values, str) else list(values)
    out = tuple(dict.fromkeys(p.strip() for v in items for p in v.replace(",", " ").split() if p.strip()))
    if not out:
        raise click.BadParameter("needs at least one value", param_hint=hint)
    return out


def parse_ks(value: str, hint: str = "--k") -> tuple[int, ...]:
    """The one parser of k lists (``bench retrieval``, ``bench baselines``, ``bench sweep``): ``"1,5,10"``
    (commas and/or spaces) -> ``(1, 5, 10)``, in the order given, without repeats; a usage error naming
    ``hint`` for anything but positive whole numbers."""
    try:
        ks = tuple(int(v) for v in split_values(value, hint))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}", param_hint=hint) from None
    if min(ks) < 1:
        raise click.BadParameter(f"k values must be positive, got {value!r}", param_hint=hint)
    return ks


def gathered(build: Callable[..., Any], params: Mapping[str, str], name: str) -> Callable[[F], F]:
    """A decorator under a command's options: the values of the click parameters ``params`` (parameter ->
    keyword of ``build``) reach the command as one typed argument ``name`` (``build(**values)``), instead
    of one argument each repeated in every command that shares the options."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            value = build(**{keyword: kwargs.pop(param) for param, keyword in params.items()})
            return func(*args, **{name: value}, **kwargs)

        return cast(F, call)

    return decorate


def out_option(help_text: str) -> Callable[[F], F]:
    """``--out``: a bench command's run folder (``MEMLANE_BENCH_OUT``)."""
    return setting_option("--out", setting="bench_out", type=FOLDER, required=True, help=help_text)


quiet_option = setting_option("--quiet", setting="bench_quiet", is_flag=True, help="No progress bars.")
log_level_option = setting_option("--log-level", setting="log_level", default="info", show_default=True)


def llm_log_option(help_text: str) -> Callable[[F], F]:
    """``--llm-log``: the LLM call log file (``MEMLANE_LLM_LOG``)."""
    return setting_option(
        "--llm-log", setting="llm_log", default=None, type=click.Path(dir_okay=False, path_type=Path), help=help_text
    )


def timeout_option(*decls: str, setting: str, default: float, help: str) -> Callable[[F], F]:
    """A server's timeout in seconds (:data:`TIMEOUT`), its default shown."""
    return setting_option(*decls, setting=setting, type=TIMEOUT, default=default, show_default=True, help=help)


def retention_every_option(help_text: str) -> Callable[[F], F]:
    """``--retention-every``: seconds between the retention sweeps a long-running process makes."""
    return setting_option(
        "--retention-every",
        "retention_every_s",
        setting="retention_every",
        type=EVERY,
        default=DEFAULT_SWEEP_INTERVAL_S,
        show_default=True,
        help=help_text,
    )


def page_options(func: F) -> F:
    """``--limit``, ``--offset`` and ``--json`` of a command that lists one page of items."""
    func = click.option("--json", "as_json", is_flag=True, help='Print {"items", "total", "limit", "offset"}.')(func)
    func = click.option("--offset", type=OFFSET, default=0, show_default=True)(func)
    return click.option("--limit", type=LIMIT, default=100, show_default=True)(func)


def bench_cache_option(help_text: str | None = None) -> Callable[[F], F]:
    """``--cache-dir``: where the bench stores and the shared embedding cache live (``MEMLANE_BENCH_CACHE``)."""
    return click.option(
        "--cache-dir",
        type=FOLDER,
        default=None,
        cls=SettingOption,
        setting="bench_cache",
        help=help_text,
    )


def store_path_option(help_text: str) -> Callable[[F], F]:
    """``--store`` alone (``MEMLANE_STORE``), for the commands that need no embedder."""
    return click.option(
        "--store", cls=SettingOption, setting="store", default=DEFAULT_STORE, show_default=True, help=help_text
    )
