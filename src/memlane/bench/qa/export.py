"""LongMemEval's official hypothesis file: one JSON object per line, ``{"question_id", "hypothesis"}``.

The official ``src/evaluation/evaluate_qa.py`` reads the file line by line with ``json.loads`` and, if that
fails, as one JSON list; it scores the ids it finds in the reference file and skips the others.
:func:`read_hypotheses` reads the same way, so a round trip shows that the official script would read ours.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from memlane.core.errors import ValidationError


def write_hypotheses(path: Path, hypotheses: Iterable[tuple[str, str]]) -> int:
    """Write ``(question_id, hypothesis)`` pairs as JSONL (UTF-8, one line each); return how many.

    A question id may appear once: the official script would otherwise judge it twice.
    """
    seen: set[str] = set()
    lines: list[str] = []
    for question_id, hypothesis in hypotheses:
        if question_id in seen:
            raise ValidationError(f"question id {question_id!r} appears twice", where=str(path))
        seen.add(question_id)
        # ASCII escapes: no character of a hypothesis can be read as a line break by any reader.
        lines.append(json.dumps({"question_id": question_id, "hypothesis": hypothesis}))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def read_hypotheses(path: Path) -> dict[str, str]:
    """Read a hypothesis file as ``evaluate_qa.py`` does (JSONL, else a JSON list): question id -> hypothesis."""
    with path.open(encoding="utf-8") as f:
        lines = f.readlines()
    try:
        entries = [json.loads(line) for line in lines]
    except json.JSONDecodeError:
        try:
            entries = json.loads("".join(lines))
        except json.JSONDecodeError as exc:
            raise ValidationError(f"neither JSONL nor a JSON list: {exc}", where=str(path)) from None
    out: dict[str, str] = {}
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict) or not isinstance(entry.get("question_id"), str):
            raise ValidationError("expected an object with a string question_id", where=f"{path}: entry {i}")
        out[entry["question_id"]] = str(entry.get("hypothesis"))
    return out
