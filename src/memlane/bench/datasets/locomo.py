"""LoCoMo loader (``locomo10.json``): one namespace per conversation.

Quirks handled (see the data set's README):

* integer gold answers are cast to ``str``;
* category-5 (adversarial) items mostly lack ``answer``: the gold is then ``adversarial_answer``;
  category 5 is flagged ``is_abstention``;
* malformed evidence entries (``"D8:6; D9:17"``, space-separated lists, ``"D:11:26"``, ``"D"``,
  zero-padded ``"D30:05"``) are split and repaired where the intent is clear, dropped otherwise; ids naming
  a turn that does not exist are dropped from the turn evidence but still name their session; every change
  is recorded in the haystack notes; empty evidence lists stay empty (metrics decide how to score them);
* ``session_<N>_date_time`` keys without a ``session_<N>`` list are ignored (conv-26), a session without a
  date gets ``started_at=None``; sessions are ordered by ``N`` numerically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

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

CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
# What mem0 and its forks print for the same integers (mem0ai/mem0 issue #2609); wrong for 1, 3 and 4,
# kept so that our per-category tables can be lined up against theirs.
MEM0_CATEGORY_NAMES: dict[int, str] = {
    1: "single-hop",
    2: "temporal",
    3: "multi-hop",
    4: "open-domain",
    5: "adversarial",
}

_SESSION_KEY = re.compile(r"session_(\d+)")
_DATE_KEY = re.compile(r"session_(\d+)_date_time")
_DIA_ID = re.compile(r"D(\d+):(\d+)")
# Lenient form for evidence: tolerates "D:11:26" and zero padding ("D30:05").
_LOOSE_DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def locomo_session_of(dia_id: str) -> str:
    """Session id of a LoCoMo turn: ``"D3:5"`` -> ``"session_3"``. Raises ValidationError otherwise."""
    m = _DIA_ID.fullmatch(dia_id)
    if not m:
        raise ValidationError(f"not a LoCoMo dia_id: {dia_id!r}")
    return f"session_{int(m[1])}"


def clean_evidence(raw: list[str], known_turn_ids: set[str]) -> tuple[list[str], list[str], list[str]]:
    """Split and repair raw LoCoMo evidence strings.

    Returns ``(turn_ids, session_ids, notes)``: existing dia_ids (order kept, de-duplicated), the sessions
    of every well-formed id whose session exists, and one note per repaired or dropped piece.
    """
    known_sessions = {locomo_session_of(t) for t in known_turn_ids}
    turns: list[str] = []
    sessions: list[str] = []
    notes: list[str] = []
    for entry in raw:
        for piece in re.split(r"[;,\s]+", entry.strip()):
            if not piece:
                continue
            m = _LOOSE_DIA_ID.fullmatch(piece)
            if not m:
                notes.append(f"dropped unparseable evidence {piece!r} (entry {entry!r})")
                continue
            dia_id = f"D{int(m[1])}:{int(m[2])}"
            if dia_id != piece or piece != entry:
                notes.append(f"evidence entry {entry!r} read as {dia_id!r}")
            session = f"session_{int(m[1])}"
            if session not in known_sessions:
                notes.append(f"dropped evidence {dia_id!r}: the conversation has no {session}")
                continue
            if session not in sessions:
                sessions.append(session)
            if dia_id not in known_turn_ids:
                notes.append(f"evidence {dia_id!r} names no turn of the conversation: kept as session only")
                continue
            if dia_id not in turns:
                turns.append(dia_id)
    return turns, sessions, notes


def _parse_sessions(path: Path, sid: str, conv: object) -> tuple[list[Session], list[str]]:
    if not isinstance(conv, dict):
        raise ValidationError("expected a JSON object", where=where(path, f"sample_id={sid}", "conversation"))
    numbers = sorted(int(m[1]) for k in conv if (m := _SESSION_KEY.fullmatch(k)))
    dated = {int(m[1]) for k in conv if (m := _DATE_KEY.fullmatch(k))}
    notes: list[str] = []
    orphan_dates = sorted(dated - set(numbers))
    if orphan_dates:
        notes.append(
            f"{sid}: {len(orphan_dates)} session date keys without a session ignored "
            f"(session_{orphan_dates[0]}..session_{orphan_dates[-1]})"
        )
    sessions: list[Session] = []
    seen: set[str] = set()
    for n in numbers:
        key = f"session_{n}"
        started = None
        if n in dated:
            loc = where(path, f"sample_id={sid}", f"conversation.{key}_date_time")
            started = parse_time(as_str(conv[f"{key}_date_time"], loc), where=loc)
        else:
            notes.append(f"{sid}: {key} has no date")
        turns: list[Turn] = []
        for j, raw in enumerate(as_list(conv[key], where(path, f"sample_id={sid}", f"conversation.{key}"))):
            loc = where(path, f"sample_id={sid}", f"conversation.{key}[{j}]")
            dia_id = as_str(require(raw, "dia_id", loc), f"{loc}.dia_id")
            m = _DIA_ID.fullmatch(dia_id)
            if not m or int(m[1]) != n:
                raise ValidationError(f"dia_id {dia_id!r} does not belong to {key}", where=f"{loc}.dia_id")
            if dia_id in seen:
                raise ValidationError(f"duplicate dia_id {dia_id!r}", where=f"{loc}.dia_id")
            seen.add(dia_id)
            assert isinstance(raw, dict)  # checked by require()
            caption = raw.get("blip_caption")
            turns.append(
                Turn(
                    turn_id=dia_id,
                    role=as_str(require(raw, "speaker", loc), f"{loc}.speaker"),
                    content=as_str(require(raw, "text", loc), f"{loc}.text"),
                    image_caption=as_str(caption, f"{loc}.blip_caption") if caption is not None else None,
                )
            )
        sessions.append(Session(session_id=key, started_at=started, turns=tuple(turns)))
    if not sessions:
        raise ValidationError("no session_<N> lists", where=where(path, f"sample_id={sid}", "conversation"))
    return sessions, notes


def _parse_qa(path: Path, sid: str, i: int, raw: object, known: set[str]) -> tuple[Sample, list[str]]:
    item = f"sample_id={sid}"
    loc = where(path, item, f"qa[{i}]")
    category = require(raw, "category", loc)
    if isinstance(category, bool) or not isinstance(category, int) or category not in CATEGORY_NAMES:
        raise ValidationError(f"category must be an integer 1-5, got {category!r}", where=f"{loc}.category")
    assert isinstance(raw, dict)  # checked by require()
    adversarial = raw.get("adversarial_answer")
    adversarial_s = as_answer(adversarial, f"{loc}.adversarial_answer") if adversarial is not None else None
    if "answer" in raw:
        answer = as_answer(raw["answer"], f"{loc}.answer")
    elif category == 5 and adversarial_s is not None:
        answer = adversarial_s
    else:
        raise ValidationError("missing field 'answer'", where=loc)
    evidence_raw = [
        as_str(e, f"{loc}.evidence[{j}]")
        for j, e in enumerate(as_list(require(raw, "evidence", loc), f"{loc}.evidence"))
    ]
    turns, sessions, ev_notes = clean_evidence(evidence_raw, known)
    sample = Sample(
        sample_id=f"{sid}:{i}",
        namespace=sid,
        question=as_str(require(raw, "question", loc), f"{loc}.question"),
        answer=answer,
        category=CATEGORY_NAMES[category],
        question_date=None,
        evidence_session_ids=tuple(sessions),
        evidence_turn_ids=tuple(turns),
        user_evidence_turn_ids=tuple(turns),
        is_abstention=category == 5,
        category_number=category,
        category_mem0=MEM0_CATEGORY_NAMES[category],
        adversarial_answer=adversarial_s,
        raw_evidence=tuple(evidence_raw),
    )
    return sample, [f"{sid}:{i}: {n}" for n in ev_notes]


def iter_locomo(path: Path) -> Iterator[Haystack]:
    """Yield one :class:`Haystack` per LoCoMo conversation (the file is small: parsed in one go)."""
    try:
        with open_source(path) as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"invalid JSON: {exc}", where=str(path)) from None
    seen: set[str] = set()
    for idx, raw in enumerate(as_list(data, where(path, None, "(top level)"))):
        sid_loc = where(path, f"item {idx}", "sample_id")
        sid = as_str(require(raw, "sample_id", where(path, f"item {idx}")), sid_loc)
        if sid in seen:
            raise ValidationError(f"duplicate sample_id {sid!r}", where=sid_loc)
        seen.add(sid)
        item = f"sample_id={sid}"
        sessions, notes = _parse_sessions(path, sid, require(raw, "conversation", where(path, item)))
        known = {t.turn_id for s in sessions for t in s.turns}
        samples: list[Sample] = []
        qa = as_list(require(raw, "qa", where(path, item)), where(path, item, "qa"))
        for i, q in enumerate(qa):
            sample, qa_notes = _parse_qa(path, sid, i, q, known)
            samples.append(sample)
            notes.extend(qa_notes)
        yield Haystack(namespace=sid, sessions=tuple(sessions), samples=tuple(samples), notes=tuple(notes))


def load_locomo(path: Path, *, name: str = "locomo") -> Dataset:
    """Load LoCoMo into a :class:`Dataset` (sha256 of the JSON content, decompressed)."""
    path = Path(path)
    return dataset_from_haystacks(name, content_sha256(path), iter_locomo(path))
