"""The search filters as options, shared by ``memlane search`` and ``memlane list``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from memlane.core.model import Filters
from memlane.interfaces.cli.pairs import parse_pairs, parse_prompt
from memlane.interfaces.wire.filters import make_filters

F = TypeVar("F", bound=Callable[..., Any])
# What each filter is called on the command line, for the errors.
OPTION_NAMES = {
    "sessions": "--session",
    "block_ids": "--block-id",
    "kinds": "--kind",
    "ingested_after": "--ingested-after",
    "ingested_before": "--ingested-before",
    "prompt_id": "--prompt",
    "prompt_version": "--prompt",
}


def filter_options(*, sessions: bool = True) -> Callable[[F], F]:
    """``--session`` (repeated; with ``sessions``), ``--block-id``, ``--annotation KEY=VALUE``, ``--post-filter``,
    ``--kind``, ``--ingested-after``, ``--ingested-before``, ``--prompt ID[@VERSION]``: the command gets them
    as one argument ``filters`` (:class:`Filters`, or None when none is given)."""

    def decorate(func: F) -> F:
        options = [
            click.option(
                "--prompt", "filter_prompt", default=None, metavar="ID[@VERSION]", help="Only blocks it extracted."
            ),
            click.option("--ingested-before", default=None, help="Only blocks written before this time."),
            click.option("--ingested-after", default=None, help="Only blocks written at or after this time."),
            click.option(
                "--kind", "kinds", multiple=True, type=click.Choice(["exchange", "fact"]), help="Only this kind."
            ),
            click.option(
                "--post-filter",
                is_flag=True,
                help="Check --annotation on the top k after the cut (fewer may remain), not before it.",
            ),
            click.option(
                "--annotation",
                "filter_annotations",
                multiple=True,
                metavar="KEY=VALUE",
                help="Only blocks with this annotation, exactly (repeat: every pair).",
            ),
            click.option("--block-id", "block_ids", multiple=True, help="Only this block (repeat for more)."),
        ]
        if sessions:
            options.append(
                click.option("--session", "filter_sessions", multiple=True, help="Only this session (repeat for more).")
            )
        wrapped: Any = _gather(func)
        for option in options:
            wrapped = option(wrapped)
        return wrapped  # type: ignore[no-any-return]

    return decorate


def _gather(func: F) -> F:
    @functools.wraps(func)  # keeps the options already on func (click keeps them in its __dict__)
    def inner(**kw: Any) -> Any:
        kw["filters"] = build_filters(
            sessions=kw.pop("filter_sessions", ()),
            block_ids=kw.pop("block_ids"),
            annotations=kw.pop("filter_annotations"),
            post=kw.pop("post_filter"),
            kinds=kw.pop("kinds"),
            ingested_after=kw.pop("ingested_after"),
            ingested_before=kw.pop("ingested_before"),
            prompt=kw.pop("filter_prompt"),
        )
        return func(**kw)

    return inner  # type: ignore[return-value]


def build_filters(
    *,
    sessions: tuple[str, ...],
    block_ids: tuple[str, ...],
    annotations: tuple[str, ...],
    post: bool,
    kinds: tuple[str, ...],
    ingested_after: str | None,
    ingested_before: str | None,
    prompt: str | None,
) -> Filters | None:
    pairs = parse_pairs(annotations, "--annotation")
    prompt_pair = parse_prompt(prompt)
    return make_filters(
        sessions=sessions or None,
        block_ids=block_ids or None,
        annotations=pairs,
        annotation_filter="post" if post else "pre",
        kinds=kinds or None,
        ingested_after=ingested_after,
        ingested_before=ingested_before,
        prompt_id=None if prompt_pair is None else prompt_pair[0],
        prompt_version=None if prompt_pair is None else prompt_pair[1],
        names=OPTION_NAMES,
    )
