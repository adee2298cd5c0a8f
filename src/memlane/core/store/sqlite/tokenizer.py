"""Keyword tokens exactly as SQLite's FTS5 tokenizer ``porter unicode61 remove_diacritics 2`` makes them.

FTS5 is the definition: the store tokenized with it before schema 3, and its stems are what the term index
holds. Running every text through FTS5 (a contentless in-memory table read back through ``fts5vocab``)
costs about 1.3 us per token, most of the term index's write cost. So a text whose every non-ASCII
character is one unicode61 treats as a separator (punctuation, spaces, symbols, controls: categories P*,
Z*, S*, Cc, Cf) is split in Python instead: for such text unicode61's tokens are exactly the runs of ASCII
letters and digits, lower-cased. Each distinct word is stemmed once by FTS5 itself and remembered, since
the Porter stemmer looks at one word at a time. Any other text (letters with accents, other scripts,
combining marks) goes through FTS5 whole. ``tests/core/store/candidates/test_keyword_index.py`` checks both
paths against FTS5 on mixed text.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Sequence

from memlane.core.errors import StoreError

TOKENIZER = "porter unicode61 remove_diacritics 2"
_BATCH = 1000
_WORD = re.compile(r"[a-z0-9]+")
_SEPARATOR_CATEGORIES = ("P", "Z", "S", "Cc", "Cf")
_STEMS_MAX = 500_000

_stems: dict[str, str] = {}  # word -> its FTS5 token; words are ASCII, so this is the same for every store
_separator: dict[str, bool] = {}


def _ensure(conn: sqlite3.Connection) -> None:
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.memlane_tok USING fts5(text, content='', tokenize='{TOKENIZER}')"
    )
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.memlane_tok_v USING fts5vocab(temp, memlane_tok, 'instance')")


def _fts5(conn: sqlite3.Connection, texts: Sequence[str]) -> list[Counter[str]]:
    """The slow path: FTS5 tokenizes ``texts`` itself."""
    _ensure(conn)
    out: list[Counter[str]] = [Counter() for _ in texts]
    for start in range(0, len(texts), _BATCH):
        conn.executemany(
            "INSERT INTO temp.memlane_tok(rowid, text) VALUES (?, ?)",
            [(start + i, t) for i, t in enumerate(texts[start : start + _BATCH])],
        )
        try:
            for doc, term, count in conn.execute(
                "SELECT doc, term, count(*) FROM temp.memlane_tok_v GROUP BY doc, term"
            ):
                out[int(doc)][str(term)] = int(count)
        finally:
            conn.execute("INSERT INTO temp.memlane_tok(memlane_tok) VALUES ('delete-all')")
    return out


def _splittable(text: str) -> bool:
    """Whether unicode61 sees only ASCII letters and digits as token characters in ``text``."""
    if text.isascii():
        return True
    for ch in text:
        if ord(ch) < 128:
            continue
        ok = _separator.get(ch)
        if ok is None:
            category = unicodedata.category(ch)
            ok = _separator[ch] = category.startswith(_SEPARATOR_CATEGORIES)
        if not ok:
            return False
    return True


def _stem(conn: sqlite3.Connection, words: set[str]) -> dict[str, str]:
    """The FTS5 token of each ASCII word, from the shared memo or from FTS5 (and then memorised)."""
    known = {w: t for w in words if (t := _stems.get(w)) is not None}
    new = sorted(words - known.keys())
    if new:
        if len(_stems) + len(new) > _STEMS_MAX:
            _stems.clear()
        for word, token in zip(new, _tokens_of_words(conn, new), strict=True):
            known[word] = _stems[word] = token
    return known


def _tokens_of_words(conn: sqlite3.Connection, words: Sequence[str]) -> list[str]:
    """FTS5's token for each ASCII alphanumeric word: one document of all of them, read back by position
    (a word is exactly one token), which costs a tenth of a document per word."""
    _ensure(conn)
    out: list[str | None] = [None] * len(words)
    for start in range(0, len(words), _BATCH):
        conn.execute(
            "INSERT INTO temp.memlane_tok(rowid, text) VALUES (0, ?)", (" ".join(words[start : start + _BATCH]),)
        )
        try:
            for offset, term in conn.execute("SELECT offset, term FROM temp.memlane_tok_v"):
                out[start + int(offset)] = str(term)
        finally:
            conn.execute("INSERT INTO temp.memlane_tok(memlane_tok) VALUES ('delete-all')")
    missing = [w for w, t in zip(words, out, strict=True) if t is None]
    if missing:  # cannot happen for ASCII alphanumeric words; say so rather than index them wrongly
        raise StoreError(f"the FTS5 tokenizer gave no token for {missing[:3]}")
    return [t for t in out if t is not None]


def tokenize(conn: sqlite3.Connection, texts: Sequence[str]) -> list[Counter[str]]:
    """Each text's tokens with their counts, as the FTS5 tokenizer makes them (lower-cased, stemmed)."""
    out: list[Counter[str] | None] = [None] * len(texts)
    split: dict[int, Counter[str]] = {}
    slow: list[int] = []
    for i, text in enumerate(texts):
        if _splittable(text):
            split[i] = Counter(_WORD.findall(text.lower()))
        else:
            slow.append(i)
    stems = _stem(conn, set().union(*split.values()))
    for i, words in split.items():
        bag: Counter[str] = Counter()
        for word, n in words.items():
            bag[stems[word]] += n
        out[i] = bag
    for i, bag in zip(slow, _fts5(conn, [texts[i] for i in slow]), strict=True):
        out[i] = bag
    return [bag if bag is not None else Counter() for bag in out]
