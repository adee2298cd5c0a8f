"""Helpers of the bench tests: fixture locations, the real-data switch, synthetic LongMemEval data.

Kept out of a conftest.py on purpose: several test folders import their own ``conftest`` by name.
"""

from __future__ import annotations

import json
import lzma
import os
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


NO_DATA = (
    "LongMemEval is not shipped: set MEMLANE_DATA to a folder that holds it (`memlane datasets` says where to get it)"
)


def real_data_dir(*names: str) -> Path:
    """The data folder named by ``$MEMLANE_DATA`` (for the LongMemEval files); skips when it is not set, or
    when it does not hold the data sets ``names``."""
    from memlane.bench.datasets.registry import find_dataset

    env = os.environ.get("MEMLANE_DATA")
    if not env or not Path(env).is_dir():
        pytest.skip(NO_DATA)
    missing = [name for name in names if find_dataset(name, Path(env)) is None]
    if missing:
        pytest.skip(f"MEMLANE_DATA={env} holds no {', '.join(missing)}: {NO_DATA}")
    return Path(env)


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def lme_date(dt: datetime) -> str:
    """``2023/04/10 (Mon) 23:07``."""
    return f"{dt:%Y/%m/%d} ({_WEEKDAYS[dt.weekday()]}) {dt:%H:%M}"


def filler_session(sid: str) -> list[dict[str, Any]]:
    """Content depends only on the id, as in S where a shared session id always has the same turns."""
    n = 2 + sum(map(ord, sid)) % 3
    turns = []
    for i in range(n):
        turns.append({"role": "user", "content": f"{sid} question {i}"})
        turns.append({"role": "assistant", "content": f"{sid} answer {i}"})
    return turns


def make_question(i: int, rng: random.Random, n_sessions: int, n_fillers: int) -> dict[str, Any]:
    """One S-schema question: 1-2 evidence sessions plus fillers from a shared pool of ids."""
    qid = f"synth{i:04d}" + ("_abs" if i % 10 == 9 else "")
    n_evidence = 1 + i % 2
    evidence = [f"answer_{qid}_{j + 1}" for j in range(n_evidence)]
    fillers = rng.sample([f"sharegpt_f{k}_0" for k in range(n_fillers)], n_sessions - n_evidence)
    ids = fillers + evidence
    rng.shuffle(ids)
    start = datetime(2023, 1, 1) + timedelta(days=rng.randint(0, 200))
    dates = sorted(start + timedelta(days=rng.randint(0, 30), minutes=rng.randint(0, 1439)) for _ in ids)
    sessions = []
    for sid in ids:
        if sid in evidence:
            sessions.append(
                [
                    {"role": "user", "content": f"fact for {qid}", "has_answer": True},
                    {"role": "assistant", "content": "noted", "has_answer": False},
                    {"role": "user", "content": "thanks", "has_answer": False},
                ]
            )
        else:
            sessions.append(filler_session(sid))
    return {
        "question_id": qid,
        "question_type": "multi-session" if n_evidence > 1 else "single-session-user",
        "question": f"What is the fact for {qid}?",
        "question_date": lme_date(dates[-1] + timedelta(days=2)),
        "answer": i if i % 7 == 0 else f"fact {i}",
        "answer_session_ids": evidence,
        "haystack_dates": [lme_date(d) for d in dates],
        "haystack_session_ids": ids,
        "haystack_sessions": sessions,
    }


def make_questions(
    n: int,
    *,
    n_sessions: int = 12,
    n_fillers: int = 200,
    seed: int = 7,
) -> list[dict[str, Any]]:
    """``n`` questions with ``n_sessions`` sessions each."""
    rng = random.Random(seed)
    return [make_question(i, rng, n_sessions, n_fillers) for i in range(n)]


def write_json(path: Path, data: object) -> Path:
    """Write like the official files (indent 4, ASCII); ``.xz`` names are compressed."""
    text = json.dumps(data, indent=4).encode()
    if path.name.endswith(".xz"):
        with lzma.open(path, "wb") as f:
            f.write(text)
    else:
        path.write_bytes(text)
    return path
