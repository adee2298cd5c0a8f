"""Search settings, named presets and reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memlane.core.errors import ValidationError
from memlane.core.model import SearchMode

RRF_K = 60
MAX_K = 1000


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How a search ranks a user's blocks.

    ``candidates`` is how many blocks each retriever hands to fusion; ``fact_keys`` lets the extracted
    summary and facts of a block act as search keys besides its message.
    """

    mode: SearchMode = SearchMode.HYBRID
    candidates: int = 50
    rrf_k: int = RRF_K
    fact_keys: bool = True

    def key_kinds(self) -> frozenset[str] | None:
        """The search-key kinds to use; None means all."""
        return None if self.fact_keys else frozenset({"message"})


PRESETS: dict[str, SearchSettings] = {
    "vector": SearchSettings(mode=SearchMode.VECTOR),
    "keyword": SearchSettings(mode=SearchMode.KEYWORD),
    "hybrid": SearchSettings(mode=SearchMode.HYBRID),
    "vector-messages": SearchSettings(mode=SearchMode.VECTOR, fact_keys=False),
    "keyword-messages": SearchSettings(mode=SearchMode.KEYWORD, fact_keys=False),
    "hybrid-messages": SearchSettings(mode=SearchMode.HYBRID, fact_keys=False),
}


def resolve_settings(mode: str | SearchMode | SearchSettings) -> SearchSettings:
    """A preset by name (``vector``, ``keyword``, ``hybrid``, ...) or settings given as they are."""
    if isinstance(mode, SearchSettings):
        return mode
    try:
        return PRESETS[str(mode.value if isinstance(mode, SearchMode) else mode)]
    except KeyError:
        raise ValidationError(
            f"unknown search mode {mode!r}; expected one of {', '.join(PRESETS)}", where="mode"
        ) from None


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {k!r}", where="k")
    return k


def with_candidates(settings: SearchSettings, k: int) -> SearchSettings:
    """Each retriever must bring at least k candidates for fusion to be able to fill k slots."""
    return settings if settings.candidates >= k else replace(settings, candidates=k)


def rrf(rankings: dict[str, Sequence[int]], rrf_k: int = RRF_K) -> list[tuple[int, float, dict[str, int]]]:
    """Reciprocal rank fusion: score = sum over retrievers of 1 / (rrf_k + rank), rank 1-based.

    Returns (reference, score, ranks by retriever), best first; ties keep the first retriever's order.
    """
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for name, refs in rankings.items():
        for rank, ref in enumerate(refs, start=1):
            scores[ref] = scores.get(ref, 0.0) + 1.0 / (rrf_k + rank)
            ranks.setdefault(ref, {})[name] = rank
    order = sorted(scores, key=lambda r: -scores[r])
    return [(r, scores[r], ranks[r]) for r in order]
