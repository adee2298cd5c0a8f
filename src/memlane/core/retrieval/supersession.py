"""Supersession: when the candidates hold two versions of one fact told at different times, the newer first.

People restate facts as they change ("I have three bikes" in March, "I just bought my fourth" in June), and
a question about the present ("how many bikes do I have?") finds both. Relevance alone orders them by
chance; an agent that reads the older one first answers with outdated information. Among a search's best
candidates (``supersede_depth``), a block *supersedes* an older one when:

* it was told later: its event time is at least :data:`MIN_GAP_S` after the older one's (and not after the
  time the question is asked, ``at``: a fact told later than the moment asked about supersedes nothing);
* by the same speaker: both blocks are of the same perspective (one person's statement does not replace
  another's);
* about the same subject: their vectors are close (the best cosine over each block's message vector and
  its extracted facts' vectors, the finer unit when extraction ran, at least ``supersede_similarity``)
  and they match the same words of the query (of the query terms either block holds, the share both
  hold, at least ``supersede_terms``);
* and both answer the query: the lower-ranked one scores at least ``supersede_ratio`` x the higher one.

The newer block then ranks just above the highest older block it supersedes (with ``supersede_sessions``,
above every block of that older block's session ranked above it: the older telling's context; a chain of
versions ends newest first), and every superseded hit names its newer versions (``Hit.superseded_by``). Nothing is
deleted or hidden: the older version stays among the hits, one place lower. A query about the past
("what did I say in March", "what was my previous ...", "used to", "originally", "before I ...") is left
as ranked, and so is a query that names a time ("two weeks ago", "last month": :func:`asks_about_past`).
docs/design/008-supersession.md says why this works and where it fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from memlane.core.embedding.protocol import EmbeddingCache, Vectors
from memlane.core.model import MemoryBlock, content_hash
from memlane.core.retrieval.fusion import Scored
from memlane.core.retrieval.settings import SearchSettings
from memlane.core.store.keyword import query_terms
from memlane.core.time_phrases import time_windows
from memlane.core.timefmt import to_epoch

MIN_GAP_S = 3600.0  # an hour: restating a fact within the hour is one telling, not two versions
_WORD = re.compile(r"\w+")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_PAST = re.compile(
    r"\b(?:used\s+to|did\s+\w+\s+use\s+to|originally|initially|at\s+first|previous(?:ly)?|formerly|back\s+then|back\s+in"
    r"|in\s+the\s+beginning|when\s+I\s+(?:first\s+)?started|first\s+time"
    rf"|before\s+(?:I|we|my|the|getting|buying|moving|switching|starting|that|then|\w+ing)\b"
    rf"|(?:in|during|on)\s+(?:early\s+|late\s+|mid[- ])?(?:{_MONTHS})\b)",
    re.IGNORECASE,
)


def asks_about_past(query: str, asked: datetime) -> bool:
    """Whether ``query`` asks what was true at an earlier time ("what was my previous goal?", "where did I
    originally keep it?", "what did I say in March?") or names a time ("two weeks ago", "last month", "in
    the past year": :func:`memlane.core.time_phrases.time_windows` read against ``asked``, the time the
    question is asked), when the version to read first is the one of that time, not the newest."""
    return _PAST.search(query) is not None or bool(time_windows(query, asked))


@dataclass(frozen=True, slots=True)
class Version:
    """What supersession reads of one candidate: when it was told (epoch seconds), by whom (its
    perspective), its words (lower-cased), the hashes of its message and extracted facts, and their vectors
    (unit length, in that order, those the cache holds; None until read: they are read only for the blocks
    of a pair that passed every other test)."""

    time: float
    speaker: str
    words: frozenset[str]
    hashes: tuple[str, ...]
    vectors: Vectors | None = None


def block_words(block: MemoryBlock) -> frozenset[str]:
    """The lower-cased words of a block's message and extracted facts."""
    text = " ".join((block.message, *block.contexts))
    return frozenset(_WORD.findall(text.lower()))


def version_of(block: MemoryBlock) -> Version:
    """A block's :class:`Version`, its vectors not read yet."""
    hashes = (block.content_hash, *(content_hash(c) for c in block.contexts))
    return Version(to_epoch(block.event_time), block.perspective, block_words(block), hashes)


VectorReader = Callable[[Sequence[str]], Mapping[str, Vectors]]


def cache_reader(cache: EmbeddingCache, model_id: str) -> VectorReader:
    """Vectors by content hash from the embedding cache the memory writes them to (the vectors the search
    keys were made from)."""
    return lambda hashes: cache.get_vectors(model_id, list(hashes))


def with_vectors(versions: Mapping[int, Version], read: VectorReader) -> dict[int, Version]:
    """``versions`` with their vectors read (in one call of ``read``)."""
    found = read(list(dict.fromkeys(h for v in versions.values() for h in v.hashes)))
    out: dict[int, Version] = {}
    for ref, v in versions.items():
        vecs = [found[h] for h in v.hashes if h in found]
        matrix = np.vstack(vecs).astype(np.float32) if vecs else np.zeros((0, 0), dtype=np.float32)
        out[ref] = replace(v, vectors=matrix)
    return out


def versions_of(cache: EmbeddingCache, model_id: str, blocks: Mapping[int, MemoryBlock]) -> dict[int, Version]:
    """Each block's :class:`Version` with its vectors read from the embedding cache."""
    return with_vectors({ref: version_of(b) for ref, b in blocks.items()}, cache_reader(cache, model_id))


def _similarities(versions: Mapping[int, Version]) -> Callable[[int, int], float]:
    """The best cosine between two versions' vectors (0 when either has none), from one product of all
    their vectors."""
    rows: dict[int, range] = {}
    mats: list[Vectors] = []
    start = 0
    dim = next((v.vectors.shape[1] for v in versions.values() if v.vectors is not None and v.vectors.size), 0)
    for ref, v in versions.items():
        if v.vectors is not None and v.vectors.size and v.vectors.shape[1] == dim:
            rows[ref] = range(start, start + len(v.vectors))
            mats.append(v.vectors)
            start += len(v.vectors)
    gram = np.vstack(mats) @ np.vstack(mats).T if mats else np.zeros((0, 0), dtype=np.float32)

    def similarity(a: int, b: int) -> float:
        ra, rb = rows.get(a), rows.get(b)
        if ra is None or rb is None:
            return 0.0
        return float(gram[ra.start : ra.stop, rb.start : rb.stop].max())

    return similarity


def _shared(a: frozenset[str], b: frozenset[str]) -> float:
    either = a | b
    return len(a & b) / len(either) if either else 0.0


def supersede(
    ranked: Scored,
    versions: Mapping[int, Version],
    query: str,
    settings: SearchSettings,
    *,
    asked: datetime,
    until: float | None = None,
    read: VectorReader | None = None,
    sessions: Mapping[int, str] | None = None,
) -> tuple[Scored, dict[int, tuple[int, ...]]]:
    """``ranked`` with each newer version of a fact moved just above the older versions it supersedes,
    and, for every superseded reference, its newer versions' references (newest first). Only the first
    ``settings.supersede_depth`` entries take part; entries without a :class:`Version` take no part.
    ``asked``: when the question is asked (its time phrases are read against it); ``until``: the time
    asked about (epoch seconds): a block told after it supersedes nothing. ``read``: where to read the
    vectors of versions that lack them, only for the pairs that passed every other test. ``sessions``:
    each reference's session, read with ``settings.supersede_sessions`` (the newer version then ranks above
    every block of the older one's session that ranked above it). See the module doc for the rule; the
    scores are left as they were (the order says who supersedes whom)."""
    depth = min(settings.supersede_depth, len(ranked))
    if not settings.supersede or depth < 2 or asks_about_past(query, asked):
        return ranked, {}
    top = ranked[:depth]
    terms = frozenset(query_terms(query))
    place = {ref: i for i, (ref, _, _) in enumerate(top)}
    score = {ref: s for ref, s, _ in top}
    matched = {ref: terms & v.words for ref in place if (v := versions.get(ref)) is not None}
    ratio = settings.supersede_ratio
    pairs: list[tuple[int, int]] = []  # (old, new) that pass every test but the vectors'
    for old in matched:
        vo = versions[old]
        for new in matched:
            vn = versions[new]
            if vn.time < vo.time + MIN_GAP_S or vn.speaker != vo.speaker:
                continue
            if until is not None and vn.time > until:
                continue
            high, low = (old, new) if place[old] < place[new] else (new, old)
            if score[high] <= 0 or score[low] < ratio * score[high]:
                continue
            if _shared(matched[old], matched[new]) < settings.supersede_terms:
                continue
            pairs.append((old, new))
    if not pairs:
        return ranked, {}
    involved = list(dict.fromkeys(ref for pair in pairs for ref in pair))
    lacking = {ref: versions[ref] for ref in involved if versions[ref].vectors is None}
    loaded = {**versions, **with_vectors(lacking, read)} if lacking and read is not None else versions
    similarity = _similarities({ref: loaded[ref] for ref in involved})
    newer: dict[int, list[int]] = {}
    for old, new in pairs:
        if similarity(old, new) >= settings.supersede_similarity:
            newer.setdefault(old, []).append(new)
    versions = loaded
    if not newer:
        return ranked, {}
    # Each block's place key: a newer version takes the place of the best older one it supersedes, just
    # above it; oldest first, so a chain of versions ends newest first.
    key: dict[int, tuple[float, int]] = {ref: (float(place[ref]), 0) for ref in place}
    older_of: dict[int, list[int]] = {}
    for old, news in newer.items():
        for new in news:
            older_of.setdefault(new, []).append(old)
    for ref in sorted(older_of, key=lambda r: versions[r].time):
        olds = older_of[ref]
        if settings.supersede_sessions and sessions:
            told = {sessions[o] for o in olds if o in sessions}
            olds = [*olds, *(x for x in place if x != ref and sessions.get(x) in told and place[x] < place[ref])]
        best = min(key[o] for o in olds)
        if best < key[ref]:
            key[ref] = (best[0], best[1] - 1)
    reordered = sorted(top, key=lambda h: (key[h[0]], place[h[0]]))
    by_time = {old: tuple(sorted(news, key=lambda r: -versions[r].time)) for old, news in newer.items()}
    return [*reordered, *ranked[depth:]], by_time
