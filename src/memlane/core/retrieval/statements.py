"""What a block states, read without an LLM: the sentences its own speaker said (and its extracted facts),
the values they give, and the kind of value a question asks for. Supersession
(:mod:`memlane.core.retrieval.supersession`) compares two blocks' statements with these.

* :func:`sentences_of`: a block's sentences, its speaker's lines and its facts, each with its words; questions
  are marked, so that only statements count;
* :func:`values_of`: the numbers and names a sentence gives;
* :func:`asked_kind`: the kind of value a question asks for (a count for "how many", a duration for "how
  long", a place for "where", a name for "who" or "which", ...), and :func:`kind_values`: the values of that
  kind a sentence gives about a subject;
* :func:`statement`: of a block's sentences, the one that gives a value of the asked kind about the query's
  subject and holds the most of its words; :func:`replaces`: whether a newer statement replaces an older one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memlane.core.embedding.protocol import Vectors
from memlane.core.model import MemoryBlock, content_hash
from memlane.core.store.candidates.keyword import STOPWORDS
from memlane.core.timefmt import to_epoch

_WORD = re.compile(r"\w+")


_QUESTION = re.compile(
    r"\W*(?:can|could|would|will|do|does|did|is|are|was|were|am|have|has|had|should|shall|may|might|what|what's|how"
    r"|which|who|whom|whose|where|when|why|any|anything)\b",
    re.IGNORECASE,
)


SENTENCES_CACHED = 2048  # blocks whose sentences are kept between searches (sentences_of)


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


def spoken(version: Version) -> tuple[Sentence, ...]:
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
    return statement_in(spoken(version), version.speaker, subject, kind)


def statement_in(sentences: Sequence[Sentence], speaker: str, subject: frozenset[str], kind: str) -> Statement | None:
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
