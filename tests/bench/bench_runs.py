"""Helpers of the bench run tests: a data folder of synthetic data sets in the real schemas, options."""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from bench_synth import FIXTURES, make_questions, write_json

from memlane.bench.retrieval.run import RetrievalOptions


def make_data_dir(root: Path, *, questions: int = 10, sessions: int = 8, time_phrases: bool = False) -> Path:
    """``root/data`` holding LoCoMo (the mini fixture) and a synthetic LongMemEval_S file. With
    ``time_phrases``, each question also says how many days before it its first session was ("... 12 days
    ago"), so the time gain of search reorders its sessions."""
    data = root / "data"
    (data / "locomo").mkdir(parents=True)
    (data / "longmemeval").mkdir(parents=True)
    shutil.copy(FIXTURES / "locomo_mini.json", data / "locomo" / "locomo10.json")
    qs = make_questions(questions, n_sessions=sessions, n_fillers=40)
    if time_phrases:
        for q in qs:
            asked, first = (datetime.strptime(d[:10], "%Y/%m/%d") for d in (q["question_date"], q["haystack_dates"][0]))
            q["question"] += f" I told you {(asked - first).days} days ago."
    # A session opening with an assistant turn (the harness splits it off, see memlane.bench.retrieval.history).
    qs[0]["haystack_sessions"][0].insert(0, {"role": "assistant", "content": "Welcome back! How can I help?"})
    write_json(data / "longmemeval" / "longmemeval_s_cleaned.json", qs)
    return data


def options(root: Path, dataset: str = "longmemeval-s", **changes: object) -> RetrievalOptions:
    """Options on the hashing embedder, with data and cache under ``root``."""
    base = RetrievalOptions(
        dataset=dataset, embedder="hashing", data_dir=root / "data", cache_dir=root / "cache", ks=(1, 3, 5, 10, 50)
    )
    return replace(base, **changes)  # type: ignore[arg-type]
