"""Supersession: when the candidates hold two versions of one fact told at different times, the newer first.

People restate facts as they change ("I have three bikes" in March, "I just bought my fourth" in June), and
a question about the present ("how many bikes do I have?") finds both. Relevance alone orders them by
chance; an agent that reads the older one first answers with outdated information. Among a search's best
candidates (``supersede_depth``), a block *supersedes* an older one when:

* the question asks for a value that can change and has one current value (a count, a state, a place, a
  preference: "how many bikes do I have", "where do I live now"), not for an event or a relation in time
  ("when did ...", "what did X do at ...": :func:`asks_current_value`; ``supersede_current``);
* it was told later: its event time is at least :data:`MIN_GAP_S` after the older one's (and not after the
  time the question is asked, ``at``: a fact told later than the moment asked about supersedes nothing);
* by the same speaker: both blocks are of the same perspective (one person's statement does not replace
  another's);
* about the same subject with a different value: with ``supersede_values="kind"`` (the default), of each
  block's own sentences (its speaker's lines, and its extracted facts) that are statements, not questions,
  those that give a value of the kind the question asks for (:func:`asked_kind`: a count for "how many", a
  duration for "how long", a place for "where", a name for "who" or "which"...) about the query's subject
  and hold the most of its words (:func:`statement`); the two share a subject word and the newer gives a
  value the older does not (:func:`replaces`). With ``"all"`` or ``"numbers"``, the sentences that match the
  query best, and any of their numbers (and names: :func:`values_of`) (:func:`restates`);
* their vectors are close (the best cosine over each block's message vector and its extracted facts'
  vectors, at least ``supersede_similarity``) and they match the same words of the query (of the query
  terms either block holds, the share both hold, at least ``supersede_terms``);
* and both answer the query: the lower-ranked one scores at least ``supersede_ratio`` x the higher one.

The newer block then ranks just above the highest older block it supersedes (with ``supersede_sessions``,
above every block of that older block's session ranked above it: the older telling's context; a chain of
versions ends newest first; with ``supersede_once``, only the best-ranked newer version of an older block
moves, and none when a block of its session already ranks above the older one), and every superseded hit
names its newer versions above it (``Hit.superseded_by``). Nothing is
deleted or hidden: the older version stays among the hits, one place lower. A query about the past
("what did I say in March", "what was my previous ...", "used to", "originally", "before I ...") is left
as ranked, and so is a query that names a time ("two weeks ago", "last month": :func:`asks_about_past`);
``supersede_present`` reads a span up to now ("in the last three months") and a present adverb beside a
past word ("my previous colleague, currently ...") as the present, and present-tense "who" and "which"
questions as asking for a current value.
With ``supersede_current``, ``supersede_values``, ``supersede_once`` and ``supersede_present`` off the rule is
the one before them (similar blocks
told later move up, whatever the question asks). docs/design/008-supersession.md says why this works and
where it fails. What a block states, and the kind of value a question asks for, are read in
:mod:`memlane.core.retrieval.statements`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from memlane.core.embedding.protocol import EmbeddingCache, Vectors
from memlane.core.model import MemoryBlock
from memlane.core.retrieval.fusion import Scored
from memlane.core.retrieval.settings import SearchSettings
from memlane.core.retrieval.statements import (
    ANY,
    Version,
    asked_kind,
    matching,
    replaces,
    spoken,
    statement,
    statement_in,
    subject_of,
    version_of,
    with_sentences,
)
from memlane.core.store.candidates.keyword import query_terms
from memlane.core.time_phrases import time_windows

MIN_GAP_S = 3600.0  # an hour: restating a fact within the hour is one telling, not two versions
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_PAST = re.compile(
    r"\b(?:used\s+to|did\s+\w+\s+use\s+to|originally|initially|at\s+first|previous(?:ly)?|formerly|back\s+then|back\s+in"
    r"|in\s+the\s+beginning|when\s+I\s+(?:first\s+)?started|first\s+time"
    rf"|before\s+(?:I|we|my|the|getting|buying|moving|switching|starting|that|then|\w+ing)\b"
    rf"|(?:in|during|on)\s+(?:early\s+|late\s+|mid[- ])?(?:{_MONTHS})\b)",
    re.IGNORECASE,
)


# A question asks for a current value when it names the present ("currently", "now", "so far", "most
# recent") or asks for a count, an amount, a frequency or a duration up to now, a place something is, or a
# state of the asker's ("what is my ...", "do I have ..."); and not for an event, a date or a relation in
# time ("when", "what date", "why", "how did", "who", "the first", "how many days between ...") nor a guess
# ("would", "likely"). The words are English; docs/design/008-supersession.md lists what was tried.
NOW_WORDS = re.compile(
    r"\b(?:current(?:ly)?|now|nowadays|these\s+days|at\s+the\s+moment|still|so\s+far|to\s+date|anymore"
    r"|(?:most\s+|mostly\s+)?recent(?:ly)?|latest|up\s+to\s+now)\b",
    re.IGNORECASE,
)
_STATE = re.compile(
    r"\b(?:how\s+(?:many|much|often|frequently)|how\s+long\s+(?:have|has|do|does)"
    r"|where\s+(?:do|does|am|is|are)\b|what(?:'s|\s+is|\s+are|\s+was|\s+were)\s+(?:my|our)\b|^\s*(?:is|are)\s+(?:my|our)\b"
    r"|(?:do|does|am|is|are)\s+(?:I|we)\s+(?:have|own|keep|use|go|still)\b"
    r"|what\s+(?:\w+\s+){1,4}(?:do|am|are)\s+(?:I|we)\b)",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"^\s*when\b|\b(?:when\s+(?:did|was|were|is|are|will|do|does|has|had)|what\s+(?:date|year|month)|ago|why"
    r"|how\s+did|first|would|could|might|likely"
    r"|according\s+to|in\s+what\s+order|which\s+(?:\w+\s+)?(?:came|happened|was\s+first)"
    r"|how\s+many\s+(?:days|weeks|months|years)\s+(?:ago|passed|between|before|after|did|had|elapsed|until))\b",
    re.IGNORECASE,
)


_WHO = re.compile(r"\bwho(?:m)?\b", re.IGNORECASE)  # a relation ("who did I go with?"), unless read widely
# The wider reading (``supersede_present``): a question in the present tense about who or which ("who gives
# me cello lessons?", "which city does my sister live in?") asks for a current value, and a distance in
# time that has passed ("how many months have passed since ...") or an order ("the order of the trips I
# took, from earliest to latest") does not.
_PRESENT_WHO = re.compile(
    r"^\s*(?:who\s+(?:is|are|do|does|(?!was\b|has\b)\w+s)|which(?:\s+\w+){1,3}?\s+(?:is|are|am|do|does))\b",
    re.IGNORECASE,
)
_PASSED = re.compile(
    r"\bhow\s+many\s+(?:\w+\s+)?(?:days|weeks|months|years)\s+(?:have|has|had)\s+(?:passed|gone\s+by|elapsed)\b"
    r"|\b(?:the\s+order\s+of|from\s+(?:earliest|first)\s+to\s+(?:latest|last))\b",
    re.IGNORECASE,
)
# A present adverb of the question's verb ("currently working at", "how often do I play now?") says the
# present is asked about, even when a past word qualifies one of its nouns ("my previous company") or asks
# for the earlier value beside it ("previously? ... now?"). "Current" as an adjective ("before I got the
# current status") does not.
_PAST_WORD = re.compile(r"previous|formerly|originally|initially", re.IGNORECASE)  # what a present adverb outweighs
_NOW_ADVERB = re.compile(r"\b(?:currently|now|nowadays|these\s+days|at\s+the\s+moment|anymore)\b", re.IGNORECASE)


# Asked widely, a question about how a value changed ("did I switch to more water or less?") wants the newest
# value, and a comparison with before ("more often than I did previously") is not a question about the past.
_CHANGED = re.compile(
    r"\bdid\s+(?:I|we)\s+(?:\w+\s+)?(?:switch|change|increase|decrease|raise|lower|reduce|upgrade|downgrade)\b",
    re.IGNORECASE,
)
_COMPARED = re.compile(r"\bthan\s+(?:I|we)\s+(?:\w+\s+){0,2}?(?:before|previously|earlier|at\s+first)\b", re.IGNORECASE)


def asks_current_value(query: str, *, wide: bool = False) -> bool:
    """Whether ``query`` asks for something that can change and has one current value ("how many bikes
    do I have?", "where do I keep my sneakers now?", "what is my personal best?") rather than for an
    event or a relation in time ("when did Caroline go to the support group?", "what did Melanie paint?",
    "how many days passed between ...?"): only then can a newer statement replace an older one. ``wide``:
    present-tense who and which questions ask for a current value too, and "how many months have passed
    since ..." does not."""
    if _EVENT.search(query) or (wide and _PASSED.search(query)):
        return False
    if wide and (_PRESENT_WHO.search(query) or _CHANGED.search(query)):
        return True
    if _WHO.search(query):
        return False
    return NOW_WORDS.search(query) is not None or _STATE.search(query) is not None


def applies(query: str, settings: SearchSettings, asked: datetime) -> bool:
    """Whether supersession can move anything for ``query`` under ``settings``: it is on, the query does not
    ask about the past (:func:`asks_about_past`) and, with ``supersede_current``, it asks for a current value
    (:func:`asks_current_value`); ``supersede_present`` reads both widely."""
    if not settings.supersede or settings.supersede_depth < 2:
        return False
    wide = settings.supersede_present
    if asks_about_past(query, asked, wide=wide):
        return False
    return not settings.supersede_current or asks_current_value(query, wide=wide)


def asks_about_past(query: str, asked: datetime, *, wide: bool = False) -> bool:
    """Whether ``query`` asks what was true at an earlier time ("what was my previous goal?", "where did I
    originally keep it?", "what did I say in March?") or names a time ("two weeks ago", "last month", "in
    the past year": :func:`memlane.core.time_phrases.time_windows` read against ``asked``, the time the
    question is asked), when the version to read first is the one of that time, not the newest. ``wide``:
    a stretch of time that runs up to now ("in the last three months", "so far this year") is the present,
    and a present adverb ("currently", "now") outweighs a past word ("what company is my previous
    colleague currently working at?")."""
    windows = time_windows(query, asked)
    if not wide:
        return _PAST.search(query) is not None or bool(windows)
    if any(not w.until_now for w in windows):
        return True
    now = _NOW_ADVERB.search(query) is not None
    query = _COMPARED.sub(" ", query)
    return any(not (now and _PAST_WORD.match(m[0])) for m in _PAST.finditer(query))


def restates(
    old: Version,
    new: Version,
    terms: frozenset[str],
    *,
    values: str = "all",
    kind: str = ANY,
) -> bool:
    """Whether ``new`` says something about the same subject as ``old`` with a different value.

    ``values`` ``"all"`` or ``"numbers"``: of each version's sentences that match the query best
    (:func:`matching`), the two sides share a query term, and the newer side states a value
    (:func:`values_of`; with ``"numbers"``, numbers only) the older side does not, while the older states
    one too (two statements of a value, not a value and a remark). What the query names is its subject,
    not a value.

    ``values="kind"``: what each states about the query's subject (:func:`statement`: the statements that
    give a value of ``kind``, :func:`asked_kind`, holding the most subject words) share a subject word, and
    the newer gives a value the older does not."""
    if values == "kind":
        subject = subject_of(terms)
        return replaces(statement(old, subject, kind), statement(new, subject, kind))
    numbers_only = values == "numbers"
    a, b = matching(old, terms), matching(new, terms)
    if not a or not b:
        return False
    if not frozenset().union(*(s.words for s in a)) & frozenset().union(*(s.words for s in b)) & terms:
        return False
    va = frozenset().union(*(s.values for s in a)) - terms
    vb = frozenset().union(*(s.values for s in b)) - terms
    if numbers_only:
        va, vb = (frozenset(v for v in values if v[:1].isdigit()) for values in (va, vb))
    return bool(va) and bool(vb - va)


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
    checked: bool = False,
) -> tuple[Scored, dict[int, tuple[int, ...]]]:
    """``ranked`` with each newer version of a fact moved just above the older versions it supersedes,
    and, for every superseded reference, its newer versions' references (newest first). Only the first
    ``settings.supersede_depth`` entries take part; entries without a :class:`Version` take no part.
    ``asked``: when the question is asked (its time phrases are read against it); ``until``: the time
    asked about (epoch seconds): a block told after it supersedes nothing. ``read``: where to read the
    vectors of versions that lack them, only for the pairs that passed every other test. ``sessions``:
    each reference's session, read with ``settings.supersede_sessions`` (the newer version then ranks above
    every block of the older one's session that ranked above it). ``checked``: the caller has found that
    supersession :func:`applies` to the query (it is not read again). See the module doc for the rule; the
    scores are left as they were (the order says who supersedes whom)."""
    depth = min(settings.supersede_depth, len(ranked))
    if depth < 2 or not (checked or applies(query, settings, asked)):
        return ranked, {}
    top = ranked[:depth]
    place = {ref: i for i, (ref, _, _) in enumerate(top)}
    score = {ref: s for ref, s, _ in top}
    # The tests on time, speaker and score first, on what is at hand: a search whose candidates hold no two
    # tellings by one speaker, an hour apart and close in score, ends here, before any sentence is read.
    ratio = settings.supersede_ratio
    tellings = [
        (ref, v.time, v.speaker, place[ref], score[ref]) for ref in place if (v := versions.get(ref)) is not None
    ]
    pairs: list[tuple[int, int]] = []  # (old, new) that pass every test but the vectors'
    for old, old_time, old_speaker, old_place, old_score in tellings:
        later = old_time + MIN_GAP_S
        for new, new_time, new_speaker, new_place, new_score in tellings:
            if new_time < later or new_speaker != old_speaker or (until is not None and new_time > until):
                continue
            high, low = (old_score, new_score) if old_place < new_place else (new_score, old_score)
            if high <= 0 or low < ratio * high:
                continue
            pairs.append((old, new))
    if not pairs:
        return ranked, {}
    terms = frozenset(query_terms(query))
    if settings.supersede_terms > 0:  # at 0 every pair passes (a share is never below 0)
        matched = {ref: terms & versions[ref].words for ref in dict.fromkeys(r for pair in pairs for r in pair)}
        pairs = [(o, n) for o, n in pairs if _shared(matched[o], matched[n]) >= settings.supersede_terms]
    values = settings.supersede_values
    kind, subject = (asked_kind(query), subject_of(terms)) if values == "kind" else (ANY, frozenset())
    # Sentences are read only for the blocks of the pairs that get this far, once each.
    compared = dict.fromkeys(ref for pair in pairs for ref in pair)
    if values == "kind":
        stated = {ref: statement_in(spoken(v := versions[ref]), v.speaker, subject, kind) for ref in compared}
        pairs = [(old, new) for old, new in pairs if replaces(stated[old], stated[new])]
    elif values != "off":
        said = {ref: with_sentences(versions[ref]) for ref in compared}
        numbers = "numbers" if values == "numbers" else "all"
        pairs = [(old, new) for old, new in pairs if restates(said[old], said[new], terms, values=numbers)]
    if not pairs:
        return ranked, {}
    newer: dict[int, list[int]] = {}
    if settings.supersede_similarity > 0:  # the vectors are read only for a similarity test, and only then
        involved = list(dict.fromkeys(ref for pair in pairs for ref in pair))
        lacking = {ref: versions[ref] for ref in involved if versions[ref].vectors is None}
        loaded = {**versions, **with_vectors(lacking, read)} if lacking and read is not None else versions
        similarity = _similarities({ref: loaded[ref] for ref in involved})
        pairs = [(old, new) for old, new in pairs if similarity(old, new) >= settings.supersede_similarity]
    for old, new in pairs:
        newer.setdefault(old, []).append(new)
    if not newer:
        return ranked, {}
    # The sessions a newer version passes the rest of (with ``supersede_sessions``); none without.
    of_session: Mapping[int, str] = sessions if settings.supersede_sessions and sessions else {}

    def passed(olds: Sequence[int], new: int) -> list[int]:
        """What a newer version moves above: the older blocks, and with ``supersede_sessions`` every block of
        their sessions that ranks above it."""
        told = {of_session[o] for o in olds if o in of_session}
        return [*olds, *(x for x in place if x != new and of_session.get(x) in told and place[x] < place[new])]

    moving: dict[int, list[int]] = newer
    if settings.supersede_once:
        # One newer version per older block moves, the best-ranked, and none when one already ranks above
        # what it would pass (with ``supersede_sessions``: when a block of its session does, the newer
        # telling is already read first).
        moving = {}
        for old, news in newer.items():
            best_new = min(news, key=place.__getitem__)
            told = of_session.get(best_new)
            first = min(place[x] for x in place if x == best_new or (told is not None and of_session.get(x) == told))
            if first > min(place[x] for x in passed([old], best_new)):
                moving[old] = [best_new]
    reordered, after = top, place  # what nothing moving leaves (the newer telling often ranks first already)
    if moving:
        # Each block's place key: a newer version takes the place of the best older one it supersedes, just
        # above it; oldest first, so a chain of versions ends newest first.
        key: dict[int, tuple[float, int]] = {ref: (float(place[ref]), 0) for ref in place}
        older_of: dict[int, list[int]] = {}
        for old, news in moving.items():
            for new in news:
                older_of.setdefault(new, []).append(old)
        for ref in sorted(older_of, key=lambda r: versions[r].time):
            best = min(key[o] for o in passed(older_of[ref], ref))
            if best < key[ref]:
                key[ref] = (best[0], best[1] - 1)
        reordered = sorted(top, key=lambda h: (key[h[0]], place[h[0]]))
        after = {ref: i for i, (ref, _, _) in enumerate(reordered)}
    # Every newer version that ranks above the older one it restates, newest first (with every version
    # moved, that is every one).
    by_time = {
        old: tuple(sorted((n for n in news if after[n] < after[old]), key=lambda r: -versions[r].time))
        for old, news in newer.items()
    }
    return [*reordered, *ranked[depth:]], {old: news for old, news in by_time.items() if news}
