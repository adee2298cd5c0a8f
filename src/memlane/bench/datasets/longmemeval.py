"""LongMemEval loader (S, M, oracle; ``.json`` or ``.json.xz``), streaming: one question at a time.

The M file is 2.7 GB, so every variant goes through the same ijson path and only one question object is
in memory at a time. Each question is its own namespace (its haystack).

Quirks handled (documented in the data set's README unless said otherwise):

* integer gold answers (32) are cast to ``str``;
* abstention questions: ``'_abs'`` in ``question_id`` (the official scripts' test) -> ``is_abstention``;
* within-day timestamp disorder in S (210 questions): sessions are re-ordered by their full timestamp
  (stable, so equal timestamps keep file order); turn ids do not depend on that order;
* ``has_answer`` is absent on turns of non-evidence sessions in S/M -> ``Turn.has_answer = None``;
* a session id repeated inside one haystack (13 S questions, identical content at two dates; not in the
  README) is kept once, at its earliest date; a repeat with different content is an error, since its turn
  ids would collide.
"""

from __future__ import annotations

import lzma
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import IO

import ijson

from memlane.bench.datasets.model import Dataset, Haystack, Sample, Session, Turn, dataset_from_haystacks
from memlane.bench.datasets.source import (
    as_answer,
    as_list,
    as_str,
    content_sha256,
    open_source,
    require,
    where,
)
from memlane.core.errors import ValidationError
from memlane.core.timefmt import parse_time

QUESTION_TYPES: tuple[str, ...] = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "multi-session",
    "knowledge-update",
    "temporal-reasoning",
)
"""The question types, in the order of the data set's README (the order report rows follow)."""
_ROLES = frozenset({"user", "assistant"})


class _HeadCheckedReader:
    """Reads through ``raw`` after checking that the document starts with ``[``.

    ijson silently yields nothing for a top-level object, which would look like an empty data set.
    """

    def __init__(self, raw: IO[bytes], path: Path) -> None:
        self._raw = raw
        head = raw.read(4096)
        stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if not stripped.startswith(b"["):
            raise ValidationError("expected a JSON array of question objects", where=str(path))
        self._head = head

    def read(self, n: int = -1) -> bytes:
        # ijson probes with read(0) to learn whether the stream yields bytes or text.
        if n == 0:
            return b""
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._raw.read(n)


def longmemeval_turn_id(session_id: str, index0: int) -> str:
    """Official turn id: ``<session_id>_<i>`` with ``i`` 1-based, counting both roles."""
    return f"{session_id}_{index0 + 1}"


def longmemeval_session_of(turn_id: str) -> str:
    """``"<session_id>_<i>"`` -> ``"<session_id>"`` (drops the last ``_`` component, as the official code)."""
    return turn_id.rsplit("_", 1)[0]


def _parse_turns(path: Path, item: str, sid: str, j: int, raw: object) -> tuple[Turn, ...]:
    turns: list[Turn] = []
    for k, t in enumerate(as_list(raw, where(path, item, f"haystack_sessions[{j}]"))):
        loc = where(path, item, f"haystack_sessions[{j}][{k}]")
        role = as_str(require(t, "role", loc), f"{loc}.role")
        if role not in _ROLES:
            raise ValidationError(f"role must be 'user' or 'assistant', got {role!r}", where=f"{loc}.role")
        assert isinstance(t, dict)  # checked by require()
        has_answer = t.get("has_answer")
        if has_answer is not None and not isinstance(has_answer, bool):
            raise ValidationError(f"not a boolean: {has_answer!r}", where=f"{loc}.has_answer")
        turns.append(
            Turn(
                turn_id=longmemeval_turn_id(sid, k),
                role=role,
                content=as_str(require(t, "content", loc), f"{loc}.content"),
                has_answer=has_answer,
            )
        )
    return tuple(turns)


def _parse_haystack(path: Path, item: str, raw: object) -> tuple[list[Session], list[str]]:
    loc = where(path, item)
    ids = as_list(require(raw, "haystack_session_ids", loc), where(path, item, "haystack_session_ids"))
    dates = as_list(require(raw, "haystack_dates", loc), where(path, item, "haystack_dates"))
    bodies = as_list(require(raw, "haystack_sessions", loc), where(path, item, "haystack_sessions"))
    if not len(ids) == len(dates) == len(bodies):
        raise ValidationError(
            f"haystack_session_ids ({len(ids)}), haystack_dates ({len(dates)}) and haystack_sessions "
            f"({len(bodies)}) differ in length",
            where=where(path, item, "haystack_session_ids"),
        )
    if not ids:
        raise ValidationError("empty haystack", where=where(path, item, "haystack_session_ids"))
    parsed: list[tuple[datetime, int, Session]] = []
    for j, (sid_raw, date_raw, body) in enumerate(zip(ids, dates, bodies, strict=True)):
        sid = as_str(sid_raw, where(path, item, f"haystack_session_ids[{j}]"))
        date_loc = where(path, item, f"haystack_dates[{j}]")
        started = parse_time(as_str(date_raw, date_loc), where=date_loc)
        parsed.append((started, j, Session(sid, started, _parse_turns(path, item, sid, j, body))))
    notes: list[str] = []
    ordered = sorted(parsed, key=lambda entry: (entry[0], entry[1]))
    if [j for _, j, _ in ordered] != list(range(len(parsed))):
        notes.append("haystack re-ordered by full session timestamp")
    kept: dict[str, Session] = {}
    for _, _, s in ordered:
        first = kept.get(s.session_id)
        if first is None:
            kept[s.session_id] = s
        elif first.turns == s.turns:
            notes.append(f"repeated session {s.session_id!r} dropped (kept at its earliest date)")
        else:
            raise ValidationError(
                f"session id {s.session_id!r} appears twice with different content",
                where=where(path, item, "haystack_session_ids"),
            )
    return list(kept.values()), notes


def _parse_question(path: Path, idx: int, raw: object) -> Haystack:
    qid_loc = where(path, f"item {idx}", "question_id")
    qid = as_str(require(raw, "question_id", where(path, f"item {idx}")), qid_loc)
    item = f"question_id={qid}"
    qtype = as_str(require(raw, "question_type", where(path, item)), where(path, item, "question_type"))
    if qtype not in QUESTION_TYPES:
        raise ValidationError(f"unknown question_type {qtype!r}", where=where(path, item, "question_type"))
    date_loc = where(path, item, "question_date")
    date_text = as_str(require(raw, "question_date", where(path, item)), date_loc)
    question_date = parse_time(date_text, where=date_loc)
    sessions, notes = _parse_haystack(path, item, raw)
    ev_loc = where(path, item, "answer_session_ids")
    listed = as_list(require(raw, "answer_session_ids", where(path, item)), ev_loc)
    evidence_sessions = tuple(as_str(e, f"{ev_loc}[{j}]") for j, e in enumerate(listed))
    present = {s.session_id for s in sessions}
    for e in evidence_sessions:
        if e not in present:
            raise ValidationError(
                f"evidence session {e!r} is not in the haystack",
                where=where(path, item, "answer_session_ids"),
            )
    evidence_turns = [t for s in sessions for t in s.turns if t.has_answer]
    sample = Sample(
        sample_id=qid,
        namespace=qid,
        question=as_str(require(raw, "question", where(path, item)), where(path, item, "question")),
        answer=as_answer(require(raw, "answer", where(path, item)), where(path, item, "answer")),
        category=qtype,
        question_date=question_date,
        evidence_session_ids=evidence_sessions,
        evidence_turn_ids=tuple(t.turn_id for t in evidence_turns),
        user_evidence_turn_ids=tuple(t.turn_id for t in evidence_turns if t.role == "user"),
        is_abstention="_abs" in qid,
    )
    return Haystack(
        namespace=qid, sessions=tuple(sessions), samples=(sample,), notes=tuple(f"{qid}: {n}" for n in notes)
    )


def iter_longmemeval(path: Path) -> Iterator[Haystack]:
    """Stream a LongMemEval file (``.json`` or ``.json.xz``) as one :class:`Haystack` per question.

    Raises ValidationError naming the file, the question id and the field for schema errors, and the
    file and the last good question for malformed JSON or a corrupt archive.
    """
    path = Path(path)
    seen: set[str] = set()
    last = "before the first question"
    with open_source(path) as raw:
        try:
            for idx, obj in enumerate(ijson.items(_HeadCheckedReader(raw, path), "item", use_float=True)):
                haystack = _parse_question(path, idx, obj)
                if haystack.namespace in seen:
                    raise ValidationError(
                        f"duplicate question_id {haystack.namespace!r}",
                        where=where(path, f"item {idx}", "question_id"),
                    )
                seen.add(haystack.namespace)
                last = f"after question_id={haystack.namespace}"
                yield haystack
        except (ijson.JSONError, EOFError, lzma.LZMAError) as exc:
            raise ValidationError(f"unreadable JSON ({last}): {exc}", where=str(path)) from None


def load_longmemeval(path: Path, *, name: str | None = None) -> Dataset:
    """Load a LongMemEval file into a :class:`Dataset` (sha256 of the JSON content, decompressed).

    ``name`` defaults to the file name without its ``.json``/``.json.xz`` suffix.
    """
    path = Path(path)
    label = name or path.name.removesuffix(".xz").removesuffix(".json")
    return dataset_from_haystacks(label, content_sha256(path), iter_longmemeval(path))
