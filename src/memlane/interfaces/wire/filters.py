"""Search filters from the plain values an interface reads (HTTP bodies, MCP arguments, CLI options) into the
core's :class:`~memlane.core.model.Filters`; a bad value is a ValidationError naming its field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime

from memlane.core.errors import ValidationError
from memlane.core.model import BlockKind, Filters
from memlane.core.model_checks import check_filters
from memlane.core.timefmt import coerce_time

ANNOTATION_FILTER = ("pre", "post")


def make_filters(
    *,
    sessions: Sequence[str] | None = None,
    block_ids: Sequence[str] | None = None,
    annotations: Mapping[str, str] | None = None,
    annotation_filter: str = "pre",
    kinds: Sequence[str] | None = None,
    ingested_after: datetime | str | float | None = None,
    ingested_before: datetime | str | float | None = None,
    prompt_id: str | None = None,
    prompt_version: int | None = None,
    names: Mapping[str, str] | None = None,
) -> Filters | None:
    """The filters the values give, or None when they give none (the unfiltered search, byte for byte).

    ``annotation_filter`` is ``pre`` (annotations checked before the top-k cut) or ``post`` (on the top k).
    ``names`` maps a parameter to the name the caller knows it by (``{"sessions": "--session"}``), for the
    errors."""
    where = dict(names or {})

    def at(field: str) -> str:
        return where.get(field, field)

    if annotation_filter not in ANNOTATION_FILTER:
        raise ValidationError(f"must be pre or post, not {annotation_filter!r}", where=at("annotation_filter"))
    parsed_kinds = None
    if kinds is not None:
        allowed = {k.value for k in BlockKind}
        bad = [k for k in kinds if k not in allowed]
        if bad:
            raise ValidationError(f"unknown kind {bad[0]!r}: one of {', '.join(sorted(allowed))}", where=at("kinds"))
        parsed_kinds = frozenset(BlockKind(k) for k in kinds)
    if prompt_version is not None and prompt_id is None:
        raise ValidationError("a prompt version needs its prompt id", where=at("prompt_version"))
    filters = Filters(
        sessions=None if sessions is None else tuple(sessions),
        block_ids=None if block_ids is None else tuple(block_ids),
        annotations=dict(annotations or {}),
        annotations_after_cut=annotation_filter == "post",
        kinds=parsed_kinds,
        ingested_after=coerce_time(ingested_after, where=at("ingested_after")),
        ingested_before=coerce_time(ingested_before, where=at("ingested_before")),
        prompt_id=prompt_id,
        prompt_version=prompt_version,
    )
    try:
        return check_filters(filters)
    except ValidationError as exc:
        # The core names its fields filters.<field>; the caller knows them by the names it sent.
        named = (exc.where or "").removeprefix("filters.")
        lead = re.match(r"[A-Za-z_]+", named)
        field = lead.group(0) if lead else ""
        text = str(exc)
        message = text[len(exc.where) + 2 :] if exc.where and text.startswith(f"{exc.where}: ") else text
        raise ValidationError(message, where=at(field) + named[len(field) :]) from None
