"""Search settings and named presets: every mechanism of a search is a typed field of
:class:`SearchSettings`, so benchmarks can sweep it; presets are named settings, and ``hybrid`` (the default
mode) is the best preset on the benchmarks' dev splits (docs/design/003-retrieval.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Literal

from memlane.core.errors import ValidationError
from memlane.core.model import SearchMode
from memlane.core.ranking.bm25 import BM25_B, BM25_K1

RRF_K = 60
MAX_K = 1000
_MAY_BE_0 = frozenset({"rrf_k", "words_k"})
_GAINS = ("words_weight", "time_weight")
# What supersession compares of two blocks' sentences: nothing, the numbers they state, numbers and names, or
# the values of the kind the question asks for.
SUPERSEDE_VALUES = ("off", "numbers", "all", "kind")


class Fusion(StrEnum):
    """How a hybrid search turns its retrievers' candidates into one score."""

    RRF = "rrf"  # weighted reciprocal rank fusion: ranks only
    SCORE = "score"  # weighted sum of each retriever's score margins (see memlane.core.retrieval.fusion.score_fusion)


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """How a search ranks a user's blocks.

    * ``candidates``: how many blocks each retriever hands to fusion (at least k are always used);
    * ``fact_keys``: the extracted summary and facts of a block act as search keys besides its message;
    * ``fusion``: ``rrf`` (weighted reciprocal rank fusion) or ``score`` (see :func:`memlane.core.retrieval.fuse`);
    * ``rrf_k``, ``vector_weight``, ``keyword_weight``: weighted RRF, score = sum of weight / (rrf_k + rank);
      with score fusion, score = sum of weight x (score - the retriever's floor) / its best score;
    * ``session_weight``, ``session_top``: each block gains ``session_weight`` times the sum of the
      ``session_top`` best fused scores among its session's candidates (itself included);
    * ``neighbour_weight``, ``neighbour_span``: each block gains ``neighbour_weight`` times the best fused
      score among candidates of the same session at most ``neighbour_span`` exchanges away;
    * ``bm25_k1``, ``bm25_b``: the keyword retriever's term-frequency saturation and length normalisation.
      ``b`` = 0.5 (FTS5 and most BM25s use 0.75) was chosen on both dev splits: exchanges with long
      replies are penalised less for their length.
    * ``words_weight``, ``words_k``: the user's sessions are ranked by BM25 over what the people in them
      said (the user's turns, not the assistant's replies:
      :func:`memlane.core.ranking.session_words.people_words`), and each candidate of a session ranked
      ``r`` gains ``words_weight`` x the best fused score x ``(words_k + 1) / (words_k + r)``; candidates
      of sessions matching no query word gain nothing.
    * ``time_weight``, ``time_tolerance``: the query's time phrases ("two weeks ago", "last month", "in the
      past three months": :func:`memlane.core.time_phrases.time_windows`, read against the time the question
      is asked, with ``time_tolerance``) name windows of time, and each candidate whose event time falls in
      one gains ``time_weight`` x the best fused score. A query without a time phrase gains nothing.
    * ``supersede``, ``supersede_depth``, ``supersede_similarity``, ``supersede_terms``, ``supersede_ratio``:
      among the first ``supersede_depth`` ranked blocks, a block that restates an older one (same speaker,
      told later, vectors at least ``supersede_similarity`` close, sharing at least ``supersede_terms`` of
      the query words either holds, scoring at least ``supersede_ratio`` x the higher of the two) ranks just
      above it, and the older hit names it in ``Hit.superseded_by``; queries about the past are left as
      ranked (:mod:`memlane.core.retrieval.supersession`). ``supersede=False`` turns it off; with
      ``supersede_sessions`` the newer block also ranks above the rest of the older one's session above it.
      ``supersede_current``: only a question that asks for a current value (a count, a state, a place, not
      an event or a date) moves anything, and ``supersede_present`` reads present-tense "who" and "which"
      questions and spans of time up to now ("in the last three months") as asking about the present;
      ``supersede_values``: what the two blocks must state differently: ``kind`` (the default), a value of
      the kind the question asks for (a count, a duration, a place, a name...) about its subject; ``all``,
      numbers or names of the sentences that match the query best; ``numbers``, numbers only; ``off``,
      nothing. ``supersede_once``: one newer version moves per older block, and none when the newer telling
      is read first already. ``supersede_current=False`` with ``supersede_values="off"``,
      ``supersede_once=False`` and ``supersede_present=False`` is the rule before them (the
      ``hybrid-supersede-similar`` preset).
    """

    mode: SearchMode = SearchMode.HYBRID
    candidates: int = 50
    fusion: Fusion = Fusion.RRF
    rrf_k: int = RRF_K
    fact_keys: bool = True
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    session_weight: float = 0.0
    session_top: int = 3
    neighbour_weight: float = 0.0
    neighbour_span: int = 1
    bm25_k1: float = BM25_K1
    bm25_b: float = 0.5
    words_weight: float = 0.0
    words_k: int = RRF_K
    time_weight: float = 0.0
    time_tolerance: float = 0.5
    # Chosen by cross-validation over every question of LongMemEval-S and LoCoMo, the overall top of every
    # ranking guarded (docs/design/008-supersession.md).
    supersede: bool = True
    supersede_depth: int = 10
    supersede_similarity: float = 0.0
    supersede_terms: float = 0.0
    supersede_ratio: float = 0.5
    supersede_sessions: bool = True
    supersede_current: bool = True
    supersede_values: str = "kind"
    supersede_once: bool = True
    supersede_present: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.fusion, Fusion):
            try:
                object.__setattr__(self, "fusion", Fusion(self.fusion))
            except ValueError:
                known = ", ".join(f.value for f in Fusion)
                raise ValidationError(f"must be one of {known}, not {self.fusion!r}", where="fusion") from None
        if self.supersede_values not in SUPERSEDE_VALUES:
            known = ", ".join(SUPERSEDE_VALUES)
            raise ValidationError(f"must be one of {known}, not {self.supersede_values!r}", where="supersede_values")
        for name in ("supersede", "supersede_sessions", "supersede_current", "supersede_once", "supersede_present"):
            if not isinstance(getattr(self, name), bool):
                raise ValidationError(f"must be true or false, not {getattr(self, name)!r}", where=name)
        for name in ("candidates", "rrf_k", "session_top", "neighbour_span", "words_k", "supersede_depth"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name in _MAY_BE_0 else 1):
                raise ValidationError(
                    f"must be a non-negative integer (positive except rrf_k and words_k), not {value!r}", where=name
                )
        for name in ("vector_weight", "keyword_weight", "session_weight", "neighbour_weight", *_GAINS):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 100:
                raise ValidationError(f"must be a number from 0 to 100, not {value!r}", where=name)
        if self.supersede_depth > MAX_K:
            raise ValidationError(f"must be at most {MAX_K}, not {self.supersede_depth!r}", where="supersede_depth")
        limits = (("bm25_k1", 10.0), ("bm25_b", 1.0), ("time_tolerance", 2.0))
        shares = (("supersede_similarity", 1.0), ("supersede_terms", 1.0), ("supersede_ratio", 1.0))
        for name, top in (*limits, *shares):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= top:
                raise ValidationError(f"must be a number from 0 to {top:g}, not {value!r}", where=name)

    def key_kinds(self) -> frozenset[str] | None:
        """The search-key kinds to use; None means all."""
        return None if self.fact_keys else frozenset({"message"})

    @property
    def uses_context(self) -> bool:
        """Whether rescoring needs the candidates' sessions and exchange positions."""
        return self.session_weight > 0 or self.neighbour_weight > 0 or self.uses_words or self.uses_time

    @property
    def uses_words(self) -> bool:
        """Whether rescoring needs the candidates' session ranks by their people's words."""
        return self.words_weight > 0

    @property
    def uses_time(self) -> bool:
        """Whether rescoring reads the query's time phrases and the candidates' event times."""
        return self.time_weight > 0

    def to_json(self) -> dict[str, object]:
        """Every field, for logs and reports."""
        out: dict[str, object] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["mode"] = self.mode.value
        out["fusion"] = self.fusion.value
        return out


# Score fusion with mild session and neighbour context, chosen on the dev splits of LoCoMo, LongMemEval-S and
# its 500-session haystacks together (docs/design/003-retrieval.md). Fusing the retrievers' score margins
# instead of their ranks scored above the rank-fusion default at 156 of 160 grid points.
_NO_WORDS = SearchSettings(
    fusion=Fusion.SCORE,
    vector_weight=0.55,
    keyword_weight=0.45,
    session_weight=0.2,
    session_top=3,
    neighbour_weight=0.3,
    neighbour_span=1,
)
# The same, plus the session-words ranking (weight 0.5, k 60), chosen on the same dev splits.
_NO_TIME = replace(_NO_WORDS, words_weight=0.5, words_k=60)
# The default: the same, plus the query's time phrases (weight 0.5, tolerance 0.5), chosen on the same splits.
_DEFAULT = replace(_NO_TIME, time_weight=0.5, time_tolerance=0.5)
# The default's supersession before it asked what the question wants and what the blocks say: a similar
# block told later moved up whatever the question (docs/design/008-supersession.md), kept for comparison.
_SIMILAR = replace(
    _DEFAULT,
    supersede_depth=10,
    supersede_similarity=0.3,
    supersede_terms=0.5,
    supersede_ratio=0.5,
    supersede_sessions=True,
    supersede_current=False,
    supersede_values="off",
    supersede_once=False,
    supersede_present=False,
)
# The default until score fusion: weighted RRF (k 10, a sharper RRF that leans on BM25 a little) with mild
# session and neighbour context, tuned on the dev splits of LoCoMo and LongMemEval-S.
_RANK = SearchSettings(
    rrf_k=10,
    vector_weight=0.75,
    keyword_weight=1.0,
    session_weight=0.2,
    session_top=3,
    neighbour_weight=0.2,
    neighbour_span=1,
)
# Plain RRF of vector and keyword (k 60, equal weights, no context, FTS5's BM25): the default until the joint
# grid, kept as it was.
_PLAIN = SearchSettings(bm25_b=BM25_B)
# Heavier context, tuned on the LoCoMo dev split alone: better on LoCoMo, worse on LongMemEval-S (dev and
# test), so opt-in.
_HEAVY = SearchSettings(
    rrf_k=5,
    vector_weight=0.5,
    keyword_weight=1.0,
    session_weight=0.4,
    session_top=3,
    neighbour_weight=0.4,
    neighbour_span=1,
)

PRESETS: dict[str, SearchSettings] = {
    "vector": SearchSettings(mode=SearchMode.VECTOR),
    "keyword": SearchSettings(mode=SearchMode.KEYWORD),
    "hybrid": _DEFAULT,
    "hybrid-rrf": _PLAIN,
    "hybrid-rank": _RANK,
    "hybrid-no-time": _NO_TIME,
    "hybrid-no-supersede": replace(_DEFAULT, supersede=False),
    "hybrid-supersede-similar": _SIMILAR,
    "hybrid-no-words": _NO_WORDS,
    "hybrid-fusion": replace(_NO_WORDS, session_weight=0.0, neighbour_weight=0.0),
    "hybrid-session": replace(_NO_WORDS, neighbour_weight=0.0),
    "hybrid-context": _HEAVY,
    "vector-messages": SearchSettings(mode=SearchMode.VECTOR, fact_keys=False),
    "keyword-messages": SearchSettings(mode=SearchMode.KEYWORD, fact_keys=False),
    "hybrid-messages": replace(_DEFAULT, fact_keys=False),
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


ScoreKind = Literal["cosine", "bm25", "rrf", "fusion"]
SCORE_KINDS: dict[str, str] = {
    "cosine": "cosine similarity of the query and the block's best-matching key, from -1 to 1",
    "bm25": "BM25 score of the block's best-matching key, 0 and up (unbounded)",
    "rrf": "weighted reciprocal rank fusion, the sum of weight / (rrf_k + rank) over the retrievers (small numbers)",
    "fusion": "score fusion: the sum over the retrievers of weight x the block's margin above the retriever's "
    "weakest candidate (each 0 to 1), plus the context gains (session, neighbours, session words, time); "
    "0 and up, usually below 3",
}


def score_kind(settings: SearchSettings) -> ScoreKind:
    """What a search's scores are (:data:`SCORE_KINDS`): a lone retriever without context keeps its own
    scores (see :func:`memlane.core.retrieval.fusion.fuse`); fused scores only order the hits of one search."""
    if settings.mode is not SearchMode.HYBRID and not settings.uses_context:
        return "cosine" if settings.mode is SearchMode.VECTOR else "bm25"
    return "rrf" if settings.fusion is Fusion.RRF else "fusion"


def check_k(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, not {k!r}", where="k")
    return k


def with_candidates(settings: SearchSettings, k: int) -> SearchSettings:
    """Each retriever must bring at least k candidates for fusion to be able to fill k slots."""
    return settings if settings.candidates >= k else replace(settings, candidates=k)
