"""``rankings.jsonl``: one retrieval ranking per question, best first, no duplicates.

LongMemEval line: ``{"question_id": "...", "ranked_session_ids": [...], "ranked_turn_ids": [...]}``
LoCoMo line:      ``{"qa_id": "<sample_id>:<i>", "ranked_dia_ids": [...], "ranked_session_ids": [...]}``

A file holds one kind only; question ids are unique within it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from memlane.bench.datasets.locomo import locomo_session_of
from memlane.core.errors import ValidationError

_LME_KEYS = frozenset({"question_id", "ranked_session_ids", "ranked_turn_ids"})
_LOCOMO_KEYS = frozenset({"qa_id", "ranked_dia_ids", "ranked_session_ids"})


def _check_ids(values: Sequence[str], what: str) -> None:
    if len(set(values)) != len(values):
        dupes = [v for v, n in Counter(values).items() if n > 1]
        raise ValidationError(f"duplicate ids {dupes[:5]}", where=what)


@dataclass(frozen=True)
class LongMemEvalRanking:
    """Ranked sessions and turns (``<session_id>_<i>``) of one LongMemEval question."""

    question_id: str
    ranked_session_ids: tuple[str, ...]
    ranked_turn_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_ids(self.ranked_session_ids, f"{self.question_id}: ranked_session_ids")
        _check_ids(self.ranked_turn_ids, f"{self.question_id}: ranked_turn_ids")

    @property
    def key(self) -> str:
        """The question id."""
        return self.question_id

    def to_json(self) -> dict[str, object]:
        """The contract's JSON object."""
        return {
            "question_id": self.question_id,
            "ranked_session_ids": list(self.ranked_session_ids),
            "ranked_turn_ids": list(self.ranked_turn_ids),
        }


@dataclass(frozen=True)
class LocomoRanking:
    """Ranked turns (``dia_id``) and sessions (``session_<n>``) of one LoCoMo question."""

    qa_id: str
    ranked_dia_ids: tuple[str, ...]
    ranked_session_ids: tuple[str, ...]

    def __post_init__(self) -> None:
        _check_ids(self.ranked_dia_ids, f"{self.qa_id}: ranked_dia_ids")
        _check_ids(self.ranked_session_ids, f"{self.qa_id}: ranked_session_ids")

    @property
    def key(self) -> str:
        """The ``<sample_id>:<i>`` QA id."""
        return self.qa_id

    def to_json(self) -> dict[str, object]:
        """The contract's JSON object."""
        return {
            "qa_id": self.qa_id,
            "ranked_dia_ids": list(self.ranked_dia_ids),
            "ranked_session_ids": list(self.ranked_session_ids),
        }


Ranking = LongMemEvalRanking | LocomoRanking


def sessions_in_order(session_ids: Iterable[str]) -> tuple[str, ...]:
    """De-duplicate keeping first occurrences (a session ranking derived from a turn ranking)."""
    return tuple(dict.fromkeys(session_ids))


def locomo_sessions_from_dia_ids(ranked_dia_ids: Iterable[str]) -> tuple[str, ...]:
    """Session ranking implied by a dia_id ranking: ``D3:5, D1:2, D3:1`` -> ``session_3, session_1``."""
    return sessions_in_order(locomo_session_of(d) for d in ranked_dia_ids)


def write_rankings(path: Path, rankings: Iterable[Ranking]) -> int:
    """Write ``rankings`` as JSON lines (written to a temporary file, then renamed). Returns the count."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    kinds: set[type] = set()
    seen: set[str] = set()
    with tmp.open("w", encoding="utf-8") as f:
        for r in rankings:
            kinds.add(type(r))
            if len(kinds) > 1:
                raise ValidationError("mixed LongMemEval and LoCoMo rankings", where=str(path))
            if r.key in seen:
                raise ValidationError(f"duplicate question id {r.key!r}", where=str(path))
            seen.add(r.key)
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def _id_list(obj: dict[str, object], key: str, where: str) -> tuple[str, ...]:
    value = obj[key]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError("must be a list of non-empty strings", where=f"{where}: field {key}")
    return tuple(value)


def parse_ranking_line(line: str, where: str) -> Ranking:
    """Parse and validate one JSON line; ``where`` (``"<file>:<line>"``) prefixes every error."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"invalid JSON: {exc.msg}", where=where) from None
    if not isinstance(obj, dict):
        raise ValidationError("expected a JSON object", where=where)
    keys = set(obj)
    if keys == _LME_KEYS:
        qid_key = "question_id"
    elif keys == _LOCOMO_KEYS:
        qid_key = "qa_id"
    else:
        raise ValidationError(
            f"keys {sorted(keys)} match neither {sorted(_LME_KEYS)} nor {sorted(_LOCOMO_KEYS)}", where=where
        )
    qid = obj[qid_key]
    if not isinstance(qid, str) or not qid:
        raise ValidationError("must be a non-empty string", where=f"{where}: field {qid_key}")
    try:
        if qid_key == "question_id":
            return LongMemEvalRanking(
                qid, _id_list(obj, "ranked_session_ids", where), _id_list(obj, "ranked_turn_ids", where)
            )
        return LocomoRanking(
            qid,
            _id_list(obj, "ranked_dia_ids", where),
            _id_list(obj, "ranked_session_ids", where),
        )
    except ValidationError as exc:
        if exc.where and exc.where.startswith(where):
            raise
        raise ValidationError(str(exc), where=where) from None


def iter_rankings(path: Path) -> Iterator[Ranking]:
    """Stream and validate ``rankings.jsonl``; errors name the file and the 1-based line number.

    Blank lines are ignored; mixing kinds or repeating a question id is an error.
    """
    path = Path(path)
    if not path.is_file():
        raise ValidationError("file not found", where=str(path))
    kind: type | None = None
    seen: set[str] = set()
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            ranking = parse_ranking_line(line, where)
            if kind is not None and type(ranking) is not kind:
                raise ValidationError("mixes LongMemEval and LoCoMo rankings", where=where)
            kind = type(ranking)
            if ranking.key in seen:
                raise ValidationError(f"duplicate question id {ranking.key!r}", where=where)
            seen.add(ranking.key)
            yield ranking


def read_rankings(path: Path) -> dict[str, Ranking]:
    """All rankings of a file, keyed by question id (``question_id`` or ``qa_id``), in file order."""
    return {r.key: r for r in iter_rankings(path)}
