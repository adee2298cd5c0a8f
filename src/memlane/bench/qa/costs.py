"""Tokens and cost per stage (answer, judge, ...), from the usage of every call.

Tokens are summed over *all* calls, cached ones included (a cached call repeats the tokens of the call it
was served from): the figure is what the method costs per run, whatever this run happened to find in the
cache; ``cached_calls`` says how much of it was free this time. Cost is in the currency of ``prices`` (per
million tokens) and is ``None`` when a model of the stage has no price or a call's token counts are
unknown: an unknown cost is not shown as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from memlane.bench.qa.records import CallUsage


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """Price of a model per million input (prompt) and output (completion) tokens."""

    input_per_mtok: float
    output_per_mtok: float


@dataclass(frozen=True, slots=True)
class StageCost:
    """Calls, tokens and cost of one stage. ``unreported`` counts calls without token counts."""

    stage: str
    models: tuple[str, ...]
    calls: int
    cached_calls: int
    tokens_in: int
    tokens_out: int
    unreported: int
    cost: float | None

    def to_json(self) -> dict[str, object]:
        """A JSON object with the fields above."""
        out = asdict(self)
        out["models"] = list(self.models)
        return out


def stage_costs(
    calls: Iterable[tuple[str, CallUsage]], prices: Mapping[str, ModelPrice] | None = None
) -> list[StageCost]:
    """One :class:`StageCost` per stage, in order of first appearance. ``calls`` are ``(stage, usage)``."""
    by_stage: dict[str, list[CallUsage]] = {}
    for stage, usage in calls:
        by_stage.setdefault(stage, []).append(usage)
    return [_stage(stage, usages, prices or {}) for stage, usages in by_stage.items()]


def _stage(stage: str, usages: list[CallUsage], prices: Mapping[str, ModelPrice]) -> StageCost:
    cost: float | None = 0.0
    unreported = 0
    for u in usages:
        price = prices.get(u.model)
        if u.tokens_in is None or u.tokens_out is None:
            unreported += 1
            cost = None
        elif price is None:
            cost = None
        elif cost is not None:
            cost += (u.tokens_in * price.input_per_mtok + u.tokens_out * price.output_per_mtok) / 1_000_000
    return StageCost(
        stage=stage,
        models=tuple(sorted({u.model for u in usages})),
        calls=len(usages),
        cached_calls=sum(1 for u in usages if u.cached),
        tokens_in=sum(u.tokens_in or 0 for u in usages),
        tokens_out=sum(u.tokens_out or 0 for u in usages),
        unreported=unreported,
        cost=cost,
    )


def total_cost(stages: Iterable[StageCost]) -> float | None:
    """Sum of the stage costs; ``None`` if any is unknown."""
    total = 0.0
    for s in stages:
        if s.cost is None:
            return None
        total += s.cost
    return total
