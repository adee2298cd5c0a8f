"""Builders shared by the QA tests: samples, blocks and haystacks small enough to check by hand."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlane.bench.datasets.catalog import SHIPPED_DIR
from memlane.bench.datasets.locomo import CATEGORY_NAMES, MEM0_CATEGORY_NAMES
from memlane.bench.datasets.model import Sample
from memlane.core.model import MemoryBlock, PerspectiveMode
from memlane.core.timefmt import annotate


def shared_readme(family: str) -> str:
    """The data set's README: LoCoMo's ships with memlane; LongMemEval's is read from ``$MEMLANE_DATA``
    (skips when it is not set)."""
    if family == "locomo":
        return (SHIPPED_DIR / "locomo" / "README.md").read_text(encoding="utf-8")
    env = os.environ.get("MEMLANE_DATA")
    path = Path(env) / family / "README.md" if env else None
    if path is None or not path.is_file():
        pytest.skip(f"the {family} README is not shipped: set MEMLANE_DATA to the data folder that holds it")
    return path.read_text(encoding="utf-8")


def lme_sample(
    qtype: str, *, qid: str = "q1", answer: str = "Lisbon", question: str = "Where does Ana live?"
) -> Sample:
    """A LongMemEval question of type ``qtype`` (abstention when ``qid`` contains ``_abs``)."""
    return Sample(
        sample_id=qid,
        namespace=qid,
        question=question,
        answer=answer,
        category=qtype,
        question_date=datetime(2023, 4, 10, 23, 7, tzinfo=UTC),
        evidence_session_ids=(),
        evidence_turn_ids=(),
        user_evidence_turn_ids=(),
        is_abstention="_abs" in qid,
    )


def locomo_sample(number: int, *, index: int = 0, answer: str = "Lisbon", question: str = "Where?") -> Sample:
    """A LoCoMo question of category ``number``."""
    return Sample(
        sample_id=f"conv-26:{index}",
        namespace="conv-26",
        question=question,
        answer=answer,
        category=CATEGORY_NAMES[number],
        question_date=None,
        evidence_session_ids=(),
        evidence_turn_ids=(),
        user_evidence_turn_ids=(),
        is_abstention=number == 5,
        category_number=number,
        category_mem0=MEM0_CATEGORY_NAMES[number],
        adversarial_answer=answer if number == 5 else None,
    )


def block(
    message: str, when: datetime, *, session: str = "s1", index: int = 0, perspective: str = "user"
) -> MemoryBlock:
    """A stored block as search returns it."""
    return MemoryBlock(
        id=f"{session}-{index}-{perspective}",
        user="u",
        conversation_id="c",
        session_id=session,
        exchange_index=index,
        perspective=perspective,
        mode=PerspectiveMode.DUAL,
        message=message,
        event_time=when,
        ingest_time=when,
        time_annotation=annotate(when),
        content_hash="h",
    )
