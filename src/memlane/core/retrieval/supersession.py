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
where it fails.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from memlane.core.embedding.protocol import EmbeddingCache, Vectors
from memlane.core.model import MemoryBlock, content_hash
from memlane.core.retrieval.fusion import Scored
from memlane.core.retrieval.settings import SearchSettings
from memlane.core.store.candidates.keyword import STOPWORDS, query_terms
from memlane.core.time_phrases import time_windows
from memlane.core.timefmt import to_epoch

SENTENCES_CACHED = 2048  # blocks whose sentences are kept between searches (sentences_of)
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
    r"^\s*when\b|\b(?:when\s+(?:did|was|were|is|are|will|do|does|has|had)|what\s+(?:date|year|month)|ago|why"
    r"|how\s+did|first|would|could|might|likely"
    r"|according\s+to|in\s+what\s+order|which\s+(?:\w+\s+)?(?:came|happened|was\s+first)"
    r"|how\s+many\s+(?:days|weeks|months|years)\s+(?:ago|passed|between|before|after|did|had|elapsed|until))\b",
    re.IGNORECASE,
)


_QUESTION = re.compile(
    r"\W*(?:can|could|would|will|do|does|did|is|are|was|were|am|have|has|had|should|shall|may|might|what|what's|how"
    r"|which|who|whom|whose|where|when|why|any|anything)\b",
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


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence a block's speaker said (or one extracted fact): its words (lower-cased), its text, and
    the names of the people talking in its block (which are not values)."""

    words: frozenset[str]
    text: str
    people: frozenset[str] = frozenset()
    tokens: tuple[str, ...] = ()  # its words and numbers in order
    token_stems: tuple[str, ...] = ()  # the same without plural and possessive endings (stem)
    _stated: tuple[tuple[int, str, bool], ...] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, text: str, people: frozenset[str] = frozenset()) -> Sentence:
        """A sentence read once: its words, tokens and their stems."""
        tokens = tuple(_TOKEN.findall(text))
        return cls(frozenset(_WORD.findall(text.lower())), text, people, tokens, tuple(stem(t) for t in tokens))

    @property
    def values(self) -> frozenset[str]:
        """The values it states (:func:`values_of`; read only for the sentences that match a query)."""
        return values_of(self.text) - self.people

    @property
    def stated(self) -> tuple[tuple[int, str, bool], ...]:
        """The tokens that state a value whatever the question (:func:`_value`; not a person talking, nor an
        ordinal in words): each one's place, its value and whether that is a number. Read when first asked
        for and kept: a sentence is read again at every search that meets its block (:func:`sentences_of`)."""
        if self._stated is None:
            stems = self.token_stems
            found = tuple(
                (i, v[0], v[1])
                for i, token in enumerate(self.tokens)
                if (v := _value(i, token)) is not None and v[0] not in self.people and stems[i] not in _ORDINALS
            )
            object.__setattr__(self, "_stated", found)  # a cache of what the fields say, not a change of them
            return found
        return self._stated

    @property
    def asks(self) -> bool:
        """Whether it is a question ("Can you recommend ...?", "Which one is better?"), which states nothing;
        a statement with a question after it ("I have had Luna for 9 months - any tips?") is not one."""
        return self.text.rstrip().endswith("?") and _QUESTION.match(self.text) is not None


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
# The same, any script's letters, and a number with its letters ("5th", "80D", "200mm", "1960s") one token.
_TOKEN = re.compile(r"\$?\d+(?:[.,:/]\d+)*(?:[^\W\d_]+\b)?|[^\W\d_]+(?:'[^\W\d_]+)?")
_ORDINAL_END = re.compile(r"(\d+)(?:st|nd|rd|th)$")
_DECADE = re.compile(r"\d{2,4}s$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LINE = re.compile(r"^([A-Za-z][\w'.-]*(?: [\w'.-]+){0,2}):\s*(.*)$")  # "Caroline: ...", "user: ..."
_HUMAN = "user"  # the side of an exchange whose statements a single-perspective block holds
# Capitalised words that are not names: the speaker, sentence openers, weekdays and months said in passing
# are kept (a day or a month can be the value asked for).
_NOT_NAMES = frozenset({"i", "i'm", "i've", "i'll", "i'd"})


def _value(i: int, token: str) -> tuple[str, bool] | None:
    """The value a sentence's ``i``-th token states, and whether it is a number; None when it states none."""
    low = token.lower()
    if token[0].isdigit() or token[0] == "$":
        number = low.lstrip("$").replace(",", "")
        if _DECADE.match(number):  # "the 1960s" is a time, not a number
            return None
        ordinal = _ORDINAL_END.match(number)
        return (ordinal[1] if ordinal else number), True
    if low in _NUMBER_WORDS:
        return _NUMBER_WORDS[low], True
    if i > 0 and token[0].isupper() and low not in _NOT_NAMES and low not in STOPWORDS:
        return low, False
    return None


def values_of(sentence: str) -> frozenset[str]:
    """The values a sentence states: numbers (digits, times, amounts; counts, ordinals and "twice" in words,
    as digits) and names (capitalised words past the sentence's first word, lower-cased)."""
    return frozenset(v[0] for i, token in enumerate(_VALUE.findall(sentence)) if (v := _value(i, token)))


def speaker_lines(block: MemoryBlock) -> tuple[list[str], frozenset[str]]:
    """What the block's own speaker said: the message's lines headed by its perspective ("Caroline: ...";
    in a single-perspective block, whose perspective names no line, the user's: "user: ...") and those
    lines' continuations (the whole message when no line is headed that way), and the words of every
    line's head (the people talking: their names address someone, they state nothing)."""
    return _speaker_lines(block.message, block.perspective)


def _speaker_lines(message: str, perspective: str) -> tuple[list[str], frozenset[str]]:
    lines = [(line, _LINE.match(line)) for line in message.splitlines()]
    names = {head.group(1).strip().lower() for _, head in lines if head is not None}
    speaker = perspective.lower() if perspective.lower() in names else _HUMAN
    own: list[str] = []
    mine = False
    for line, head in lines:
        if head is not None:
            mine = head.group(1).strip().lower() == speaker
            line = head.group(2)
        if mine:
            own.append(line)
    people = frozenset(w for name in names for w in _WORD.findall(name))
    return (own if speaker in names else [message]), people


def sentences_of(block: MemoryBlock) -> tuple[Sentence, ...]:
    """The sentences of a block's speaker and its extracted facts, each with its words."""
    return _sentences(block.message, block.perspective, tuple(block.contexts))


# A block's sentences are the same at every search that reads them: kept for the blocks read last (a search
# reads at most ``supersede_depth`` blocks' sentences; a few thousand blocks' sentences are a few megabytes).
@functools.lru_cache(maxsize=SENTENCES_CACHED)
def _sentences(message: str, perspective: str, contexts: tuple[str, ...]) -> tuple[Sentence, ...]:
    lines, people = _speaker_lines(message, perspective)
    texts = [t for line in lines for t in _SENTENCE_END.split(line) if t.strip()]
    texts += [c for c in contexts if c.strip()]
    return tuple(Sentence.of(t, people) for t in texts)


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


def _said(version: Version) -> tuple[Sentence, ...]:
    """What :func:`with_sentences` would give a version's sentences, without making another version."""
    if version.sentences is not None:
        return version.sentences
    return () if version.block is None else sentences_of(version.block)


def matching(version: Version, terms: frozenset[str]) -> list[Sentence]:
    """A version's sentences that hold the most query terms (none when no sentence holds one)."""
    sentences = with_sentences(version).sentences or ()
    best = max((len(s.words & terms) for s in sentences), default=0)
    return [s for s in sentences if best and len(s.words & terms) == best]


# What kind of value a question asks for (``supersede_values="kind"``), in the order they are tried: a
# duration ("how long"), a frequency ("how often"), a time of day ("what time"), a count ("how many"), an
# amount ("how much", "what is the total"), a place ("where"), a name ("who", "which", "what day", "what
# brand"), or any value.
DURATION, FREQUENCY, CLOCK, COUNT, AMOUNT = "duration", "frequency", "clock", "count", "amount"
PLACE, NAME, ANY = "place", "name", "any"
_KINDS = (
    (DURATION, re.compile(r"\bhow\s+long\b", re.IGNORECASE)),
    (FREQUENCY, re.compile(r"\bhow\s+(?:often|frequently)\b|\bhow\s+many\s+times\s+(?:a|per|each)\b", re.IGNORECASE)),
    (CLOCK, re.compile(r"\bwhat\s+time\b", re.IGNORECASE)),
    (COUNT, re.compile(r"\bhow\s+many\b", re.IGNORECASE)),
    (
        AMOUNT,
        re.compile(
            r"\bhow\s+(?:much|old|far)\b|\bwhat\s+(?:is\s+|was\s+|are\s+)?(?:the\s+|my\s+|our\s+)?(?:\w+\s+)?"
            r"(?:percentage|number|amount|total|score|price|cost|count|age|distance|weight|record|ratio|rate|budget)\b",
            re.IGNORECASE,
        ),
    ),
    (PLACE, re.compile(r"\bwhere\b", re.IGNORECASE)),
    (
        NAME,
        re.compile(
            r"\b(?:who|whom|whose|which)\b|\bwhat\s+(?:\w+\s+)?(?:day|brand|type|kind|name|company|city|country"
            r"|colou?r|model|breed|team|school|store|shop|restaurant|place|gym)s?\b",
            re.IGNORECASE,
        ),
    ),
)
_NUMERIC = frozenset({DURATION, FREQUENCY, CLOCK, COUNT, AMOUNT})
# How often, in words ("weekly", "every other week", "every Sunday"): a value of a question about how often.
_EVERY = r"day|week|month|year|weekend|morning|evening|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_FREQUENCY = re.compile(
    rf"\bevery\s+(other\s+)?({_EVERY})\b|\b(daily|weekly|monthly|yearly|biweekly|fortnightly|nightly)\b", re.IGNORECASE
)
_PER = {"daily": "day", "weekly": "week", "monthly": "month", "yearly": "year", "nightly": "night"}
_PER |= {"biweekly": "other week", "fortnightly": "other week"}
# Units a number can measure (stemmed): a number followed by one measures it, so it counts nothing else ("500
# words" is not a number of short stories, "three months" not one of cameras).
_TIME_UNITS = frozenset(["second", "minute", "hour", "day", "week", "month", "year", "decade"])
_UNITS = _TIME_UNITS | frozenset((
    "word", "page", "mile", "km", "kilometer", "kilometre", "meter", "metre", "foot", "feet", "inch", "pound",
    "lb", "kg", "kilogram", "gram", "ounce", "oz", "dollar", "buck", "cent", "euro", "percent", "degree",
    "calorie", "step", "gallon", "liter", "litre",
))  # fmt: skip
_TIMES = frozenset({"time", "x"})  # "three times a week"
_CLOCK = re.compile(r"\d{1,2}:\d{2}(?:am|pm)?$")
_DAY_HALVES = frozenset({"am", "pm", "o'clock"})
_DATE_WORDS = frozenset({"in", "since", "from", "until", "by", "of"})  # "in 2021" names a year, not a number
_ONCE = frozenset({"once", "twice", "thrice"})
# Where something is: a name, or the noun after a preposition of place ("moved back to the suburbs", "I keep
# them in the closet"), past the words that only point at it.
_AT = frozenset({"to", "in", "at", "into", "inside", "under", "near"})
_POINTERS = frozenset({"the", "a", "an", "my", "our", "his", "her", "their", "your", "its", "this", "that"})
# Ordinals in words are more often not a count ("at first", "a second opinion", "my first tournament") than
# one; in digits ("my 5th project") they are read as one.
_ORDINALS = frozenset((
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
    "twelfth",
))  # fmt: skip
# The words of a question that ask rather than name its subject ("how many", "what type", "currently").
_ASKING = frozenset((
    "many", "much", "long", "often", "frequently", "old", "far", "time", "times", "total", "number", "amount",
    "type", "kind", "sort", "current", "currently", "now", "recent", "recently", "most", "latest", "still",
    "usually", "typically", "typical", "day", "week", "what",
))  # fmt: skip


def asked_kind(query: str) -> str:
    """The kind of value ``query`` asks for: :data:`DURATION`, :data:`FREQUENCY`, :data:`CLOCK`, :data:`COUNT`,
    :data:`AMOUNT`, :data:`PLACE`, :data:`NAME`, or :data:`ANY`."""
    return next((kind for kind, asks in _KINDS if asks.search(query)), ANY)


def stem(word: str) -> str:
    """A word without its possessive or plural ending, so a subject matches its singular ("projects",
    "project's", "project")."""
    word = word.lower().removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def subject_of(terms: frozenset[str]) -> frozenset[str]:
    """The query terms that name its subject (stemmed), without the words that ask ("how many", "what
    type", "currently"); all of them when every one asks."""
    stems = frozenset(stem(t) for t in terms)
    return (stems - _ASKING) or stems


def _fits(kind: str, stems: Sequence[str], i: int, subject: frozenset[str]) -> bool:
    """Whether the number at token ``i`` (of a sentence whose tokens stem to ``stems``) is a value of ``kind``:
    a duration is followed by a unit of time, a frequency is a number of times ("three times a week", "twice"),
    a time of day is one ("7:30", "7 am"), and a count is not followed by a unit other than the subject's;
    none of them is a year ("in 2021")."""
    after = stems[i + 1] if i + 1 < len(stems) else ""
    if i and stems[i - 1] in _DATE_WORDS and len(stems[i]) == 4 and stems[i][:2] in ("19", "20"):
        return False
    if kind == DURATION:
        return after in _TIME_UNITS or (i + 2 < len(stems) and stems[i + 2] in _TIME_UNITS)
    if kind == FREQUENCY:
        return stems[i] in _ONCE or after in _TIMES
    if kind == CLOCK:
        return bool(_CLOCK.match(stems[i])) or after in _DAY_HALVES
    if kind == COUNT:
        return after not in _UNITS or after in subject
    return True


def _places(sentence: Sentence, subject: frozenset[str]) -> set[str]:
    """The nouns after a preposition of place (:data:`_AT`) in ``sentence``, past the pointing words, that are
    not the subject's and not names (which :func:`kind_values` reads as names)."""
    out: set[str] = set()
    tokens, stems = sentence.tokens, sentence.token_stems
    for i, low in enumerate(stems):
        if low not in _AT:
            continue
        j = i + 1
        while j < len(tokens) and stems[j] in _POINTERS:
            j += 1
        if j < len(tokens) and tokens[j].islower() and stems[j] not in subject and stems[j] not in STOPWORDS:
            out.add(stems[j])
    return out


def kind_values(sentence: Sentence, subject: frozenset[str], kind: str) -> frozenset[str]:
    """The values of ``kind`` (:func:`asked_kind`) that ``sentence`` states about ``subject``: numbers that fit
    the kind (:func:`_fits`; and how often, in words, for a frequency) for the numeric kinds, names for
    :data:`NAME`, both for :data:`ANY`.
    The subject's own words, the people talking and ordinals in words are not values."""
    stems = sentence.token_stems
    out: set[str] = set()
    for i, value, number in sentence.stated:
        if stems[i] in subject:
            continue
        if number and kind in _NUMERIC and not _fits(kind, stems, i, subject):
            continue
        if (kind in _NUMERIC and not number) or (kind in (NAME, PLACE) and number):
            continue
        out.add(value)
    if kind == PLACE:
        out.update(_places(sentence, subject))
    if kind in (FREQUENCY, ANY):
        for m in _FREQUENCY.finditer(sentence.text):
            every = (m[1] or "").lower() + (m[2] or _PER.get((m[3] or "").lower(), "")).lower()
            out.add(f"every {every}")
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Statement:
    """What a block states about a query's subject: the subject words its sentences hold and the values
    they give (:func:`statement`)."""

    subject: frozenset[str]
    values: frozenset[str]


def statement(version: Version, subject: frozenset[str], kind: str) -> Statement | None:
    """What ``version`` states about ``subject``: of its sentences that are statements (not questions) and
    give a value of ``kind`` about the subject (:func:`kind_values`), those that hold the most subject
    words; None when no sentence does."""
    return _statement(_said(version), version.speaker, subject, kind)


def _statement(sentences: Sequence[Sentence], speaker: str, subject: frozenset[str], kind: str) -> Statement | None:
    best: list[tuple[frozenset[str], frozenset[str]]] = []
    top = 0
    for s in sentences:
        held = subject.intersection(s.token_stems)
        if not held or len(held) < top or s.asks:
            continue
        values = kind_values(s, subject, kind)
        if values:
            if len(held) > top:
                best, top = [], len(held)
            best.append((held, values))
    if not best:  # most candidates hold no value of the subject: the people test below is not reached
        return None
    # A question about one of the people talking ("how many dogs does Andrew have?") is answered by what
    # that person says, not by what the others say to them.
    if subject & _stems(sentences[0].people) and not subject & _speaker_stems(speaker):
        return None
    return Statement(frozenset().union(*(h for h, _ in best)), frozenset().union(*(v for _, v in best)))


# The same few people and speakers are read at every search: their stems are kept.
@functools.lru_cache(maxsize=1024)
def _stems(words: frozenset[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in words)


@functools.lru_cache(maxsize=1024)
def _speaker_stems(speaker: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(speaker.lower()))


def replaces(was: Statement | None, now: Statement | None) -> bool:
    """Whether the statement ``now`` gives another value of the subject of ``was``: they share a subject
    word, and ``now`` gives a value ``was`` does not."""
    if was is None or now is None:
        return False
    return bool(was.subject & now.subject) and bool(now.values - was.values)


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
        stated = {ref: _statement(_said(v := versions[ref]), v.speaker, subject, kind) for ref in compared}
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
