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
* about the same subject with a different value: of each block's own sentences (its speaker's lines, and
  its extracted facts), those that match the query best share a query word, and the values they carry
  (numbers and counts in words; with ``supersede_values="all"`` names and places too: :func:`values_of`)
  differ, the newer one saying at least one the older one does not (:func:`restates`);
* their vectors are close (the best cosine over each block's message vector and its extracted facts'
  vectors, at least ``supersede_similarity``) and they match the same words of the query (of the query
  terms either block holds, the share both hold, at least ``supersede_terms``);
* and both answer the query: the lower-ranked one scores at least ``supersede_ratio`` x the higher one.

The newer block then ranks just above the highest older block it supersedes (with ``supersede_sessions``,
above every block of that older block's session ranked above it: the older telling's context; a chain of
versions ends newest first), and every superseded hit names its newer versions (``Hit.superseded_by``). Nothing is
deleted or hidden: the older version stays among the hits, one place lower. A query about the past
("what did I say in March", "what was my previous ...", "used to", "originally", "before I ...") is left
as ranked, and so is a query that names a time ("two weeks ago", "last month": :func:`asks_about_past`).
With ``supersede_current`` and ``supersede_values`` off the rule is the one before them (similar blocks
told later move up, whatever the question asks). docs/design/008-supersession.md says why this works and
where it fails.
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
from memlane.core.store.keyword import STOPWORDS, query_terms
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
    r"^\s*when\b|\b(?:when\s+(?:did|was|were|is|are|will|do|does|has|had)|what\s+(?:date|year|month)|ago|why|who|whom"
    r"|how\s+did|first|would|could|might|likely"
    r"|according\s+to|in\s+what\s+order|which\s+(?:\w+\s+)?(?:came|happened|was\s+first)"
    r"|how\s+many\s+(?:days|weeks|months|years)\s+(?:ago|passed|between|before|after|did|had|elapsed|until))\b",
    re.IGNORECASE,
)


def asks_current_value(query: str) -> bool:
    """Whether ``query`` asks for something that can change and has one current value ("how many bikes
    do I have?", "where do I keep my sneakers now?", "what is my personal best?") rather than for an
    event or a relation in time ("when did Caroline go to the support group?", "what did Melanie paint?",
    "how many days passed between ...?"): only then can a newer statement replace an older one."""
    if _EVENT.search(query):
        return False
    return NOW_WORDS.search(query) is not None or _STATE.search(query) is not None


def applies(query: str, settings: SearchSettings, asked: datetime) -> bool:
    """Whether supersession can move anything for ``query`` under ``settings``: it is on, the query does not
    ask about the past (:func:`asks_about_past`) and, with ``supersede_current``, it asks for a current value
    (:func:`asks_current_value`)."""
    if not settings.supersede or settings.supersede_depth < 2 or asks_about_past(query, asked):
        return False
    return not settings.supersede_current or asks_current_value(query)


def asks_about_past(query: str, asked: datetime) -> bool:
    """Whether ``query`` asks what was true at an earlier time ("what was my previous goal?", "where did I
    originally keep it?", "what did I say in March?") or names a time ("two weeks ago", "last month", "in
    the past year": :func:`memlane.core.time_phrases.time_windows` read against ``asked``, the time the
    question is asked), when the version to read first is the one of that time, not the newest."""
    return _PAST.search(query) is not None or bool(time_windows(query, asked))


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence a block's speaker said (or one extracted fact): its words (lower-cased), its text, and
    the names of the people talking in its block (which are not values)."""

    words: frozenset[str]
    text: str
    people: frozenset[str] = frozenset()

    @property
    def values(self) -> frozenset[str]:
        """The values it states (:func:`values_of`; read only for the sentences that match a query)."""
        return values_of(self.text) - self.people


@dataclass(frozen=True, slots=True)
class Version:
    """What supersession reads of one candidate: when it was told (epoch seconds), by whom (its
    perspective), its words (lower-cased), the hashes of its message and extracted facts, their vectors
    (unit length, in that order, those the cache holds; None until read: they are read only for the blocks
    of a pair that passed every other test), and its speaker's sentences and extracted facts (None until
    read from ``block``: only for the blocks of a pair that passed the time, speaker and score tests)."""

    time: float
    speaker: str
    words: frozenset[str]
    hashes: tuple[str, ...]
    vectors: Vectors | None = None
    sentences: tuple[Sentence, ...] | None = None
    block: MemoryBlock | None = None


def block_words(block: MemoryBlock) -> frozenset[str]:
    """The lower-cased words of a block's message and extracted facts."""
    text = " ".join((block.message, *block.contexts))
    return frozenset(_WORD.findall(text.lower()))


_NUMBER_WORDS = {
    w: str(i)
    for i, group in enumerate(
        (
            ("zero", "none"),
            ("one", "once", "single", "first"),
            ("two", "twice", "pair", "couple", "second", "both"),
            ("three", "thrice", "third"),
            ("four", "fourth"),
            ("five", "fifth"),
            ("six", "sixth"),
            ("seven", "seventh"),
            ("eight", "eighth"),
            ("nine", "ninth"),
            ("ten", "tenth"),
            ("eleven", "eleventh"),
            ("twelve", "twelfth", "dozen"),
        )
    )
    for w in group
} | {"fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "half": "0.5"}
_VALUE = re.compile(r"\$?\d+(?:[.,:/]\d+)*|[A-Za-z]+(?:'[a-z]+)?")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LINE = re.compile(r"^([A-Za-z][\w'.-]*(?: [\w'.-]+){0,2}):\s*(.*)$")  # "Caroline: ...", "user: ..."
_HUMAN = "user"  # the side of an exchange whose statements a single-perspective block holds
# Capitalised words that are not names: the speaker, sentence openers, weekdays and months said in passing
# are kept (a day or a month can be the value asked for).
_NOT_NAMES = frozenset({"i", "i'm", "i've", "i'll", "i'd"})


def values_of(sentence: str) -> frozenset[str]:
    """The values a sentence states: numbers (digits, times, amounts; counts, ordinals and "twice" in words,
    as digits) and names (capitalised words past the sentence's first word, lower-cased)."""
    out: set[str] = set()
    for i, token in enumerate(_VALUE.findall(sentence)):
        low = token.lower()
        if token[0].isdigit() or token[0] == "$":
            out.add(token.lstrip("$").replace(",", ""))
        elif low in _NUMBER_WORDS:
            out.add(_NUMBER_WORDS[low])
        elif i > 0 and token[0].isupper() and low not in _NOT_NAMES and low not in STOPWORDS:
            out.add(low)
    return frozenset(out)


def speaker_lines(block: MemoryBlock) -> tuple[list[str], frozenset[str]]:
    """What the block's own speaker said: the message's lines headed by its perspective ("Caroline: ...";
    in a single-perspective block, whose perspective names no line, the user's: "user: ...") and those
    lines' continuations (the whole message when no line is headed that way), and the words of every
    line's head (the people talking: their names address someone, they state nothing)."""
    lines = [(line, _LINE.match(line)) for line in block.message.splitlines()]
    names = {head.group(1).strip().lower() for _, head in lines if head is not None}
    speaker = block.perspective.lower() if block.perspective.lower() in names else _HUMAN
    own: list[str] = []
    mine = False
    for line, head in lines:
        if head is not None:
            mine = head.group(1).strip().lower() == speaker
            line = head.group(2)
        if mine:
            own.append(line)
    people = frozenset(w for name in names for w in _WORD.findall(name))
    return (own if speaker in names else [block.message]), people


def sentences_of(block: MemoryBlock) -> tuple[Sentence, ...]:
    """The sentences of a block's speaker and its extracted facts, each with its words."""
    lines, people = speaker_lines(block)
    texts = [t for line in lines for t in _SENTENCE_END.split(line) if t.strip()]
    texts += [c for c in block.contexts if c.strip()]
    return tuple(Sentence(frozenset(_WORD.findall(t.lower())), t, people) for t in texts)


def version_of(block: MemoryBlock, *, words: bool = True) -> Version:
    """A block's :class:`Version`, its vectors and sentences not read yet; without ``words`` its words are
    not read either (left empty: only ``supersede_terms`` reads them, and 0 reads nothing)."""
    hashes = (block.content_hash, *(content_hash(c) for c in block.contexts))
    said = block_words(block) if words else frozenset()
    return Version(to_epoch(block.event_time), block.perspective, said, hashes, block=block)


def with_sentences(version: Version) -> Version:
    """``version`` with its sentences read from its block (as it is when they are read, or there is no
    block to read them from)."""
    if version.sentences is not None or version.block is None:
        return version
    return replace(version, sentences=sentences_of(version.block))


def matching(version: Version, terms: frozenset[str]) -> list[Sentence]:
    """A version's sentences that hold the most query terms (none when no sentence holds one)."""
    sentences = with_sentences(version).sentences or ()
    best = max((len(s.words & terms) for s in sentences), default=0)
    return [s for s in sentences if best and len(s.words & terms) == best]


def restates(old: Version, new: Version, terms: frozenset[str], *, numbers_only: bool = False) -> bool:
    """Whether ``new`` says something about the same subject as ``old`` with a different value: of each
    version's sentences that match the query best (:func:`matching`), the two sides share a query term, and
    the newer side states a value (:func:`values_of`) the older side does not, while the older states one
    too (two statements of a value, not a value and a remark). What the query names is its subject, not
    a value. ``numbers_only``: only numbers count as values (names are read as subjects)."""
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
    if not applies(query, settings, asked) or depth < 2:
        return ranked, {}
    top = ranked[:depth]
    terms = frozenset(query_terms(query))
    place = {ref: i for i, (ref, _, _) in enumerate(top)}
    score = {ref: s for ref, s, _ in top}
    matched = {ref: terms & v.words for ref in place if (v := versions.get(ref)) is not None}
    ratio = settings.supersede_ratio
    read_once: dict[int, Version] = {}

    def said(ref: int) -> Version:  # sentences are read only for the pairs that get that far, once
        if ref not in read_once:
            read_once[ref] = with_sentences(versions[ref])
        return read_once[ref]

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
            numbers = settings.supersede_values == "numbers"
            if settings.supersede_values != "off" and not restates(said(old), said(new), terms, numbers_only=numbers):
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
