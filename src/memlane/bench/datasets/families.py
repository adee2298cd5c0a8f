"""Data set families: everything the harness does differently for LoCoMo and for LongMemEval, in one object each.

A family is a kind of data set. It knows its loader; what one namespace is (a LoCoMo conversation, one
LongMemEval question's haystack); its ids (a turn id names its session: LoCoMo ``D3:5`` is in
``session_3``, LongMemEval ``<session_id>_<i>`` in ``<session_id>``); which turns rankings are scored on;
its official retrieval scores and its QA scores; its dev/test split; its question categories with their
labels and the rows its reports lead with; and its defaults (perspective, baselines, QA prompts, judge,
metrics). Every named data set of the catalog points at its family (``DatasetInfo.family``), and the
harness asks the family rather than testing which data set it runs.

Adding a family: subclass :class:`Family`, set its attributes, implement its methods, add it to
:data:`FAMILIES` and point a catalog entry at it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memlane.bench.datasets.locomo import CATEGORY_NAMES, MEM0_CATEGORY_NAMES, iter_locomo, locomo_session_of
from memlane.bench.datasets.longmemeval import QUESTION_TYPES, iter_longmemeval, longmemeval_session_of
from memlane.bench.datasets.model import Haystack, Sample, Turn
from memlane.bench.qa.aggregate import QAReport, SampleScores, locomo_report, longmemeval_report
from memlane.bench.qa.bleu import bleu1
from memlane.bench.qa.bootstrap import BootstrapSettings
from memlane.bench.qa.costs import ModelPrice
from memlane.bench.qa.scoring import locomo_f1, mem0_f1, token_f1
from memlane.bench.retrieval.metrics import (
    OVERALL,
    TASK_AVERAGE,
    move_metrics,
    recency_metrics,
    score_locomo,
    score_longmemeval,
)
from memlane.bench.retrieval.rankings import LocomoRanking, LongMemEvalRanking, Ranking
from memlane.bench.split import Split, conversation_split, dev_conversations, question_split
from memlane.core.errors import ConfigError
from memlane.core.model import PerspectiveMode

Before = tuple[Sequence[str], Sequence[str] | None]
"""A question's (session ids, turn ids) rankings (turn ids None: session level only)."""


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What a family's QA report is made from.

    ``rows``: the scores of a run's questions; ``metrics``: the score names the run logged, in report order;
    ``settings``: the bootstrap of the confidence intervals (None: the default); ``prices``: the price of
    each model, for the cost figures (None: no price known); ``dataset``: the run's data set name.
    """

    rows: Sequence[SampleScores]
    metrics: Sequence[str]
    settings: BootstrapSettings | None
    prices: Mapping[str, ModelPrice] | None
    dataset: str


class Family(ABC):
    """A data set family (see the module doc). One instance per family: :data:`LOCOMO`, :data:`LONGMEMEVAL`."""

    name: str
    """What logs record (a QA run's ``family``) and reports and errors print."""
    unit: str
    """What one namespace is (one memory): ``conversation`` or ``question``."""
    id_key: str
    """The question id's field in ``rankings.jsonl`` and ``answers.jsonl``."""
    user_assistant: bool
    """Turns carry the roles ``user`` and ``assistant`` (else speaker names, both people being users)."""
    perspective: PerspectiveMode
    """The perspective ``auto`` ingests with (extraction off)."""
    categories: tuple[str, ...]
    """The question categories, in the order report rows show them."""
    headline_row: str
    """The overall row tables lead with and modes are compared on."""
    headline_excludes: frozenset[str] = frozenset()
    """Categories the headline row leaves out."""
    summary_rows: tuple[str, ...]
    """The rows after the categories in a retrieval report."""
    baselines: tuple[str, ...]
    """The baselines ``--baselines default`` runs."""
    qa_metrics: tuple[str, ...]
    """The QA scores, headline first."""
    answer_prompt: str
    """The answer prompt ``--answer-prompt auto`` picks."""
    judge: str
    """The judge ``--judge-prompts auto`` picks."""
    adversarial_category: int | None = None
    """A category asked as the official two-option question (LoCoMo's false premises)."""
    hypotheses_file: bool = False
    """Whether a QA run writes ``hypotheses.jsonl``, the input of the official evaluation script."""
    context_newest_first: bool = False
    """Whether answer prompts show the retrieved memories newest first (else oldest first, as LoCoMo's
    prompts say), so that the newest version of a fact told twice is read first."""

    def __repr__(self) -> str:
        return f"<data set family {self.name}>"

    @abstractmethod
    def read(self, path: Path) -> Iterator[Haystack]:
        """Stream a file of the family as one haystack per namespace."""

    @abstractmethod
    def session_of(self, turn_id: str) -> str:
        """The id of the session a turn id belongs to."""

    @abstractmethod
    def is_target(self, turn: Turn) -> bool:
        """Whether turn rankings hold ``turn``: the official turn-level corpus."""

    def turn_text(self, turn: Turn) -> str:
        """A turn's text as the harness stores and shows it."""
        return turn.content

    def score(
        self,
        sample: Sample,
        session_ids: Sequence[str],
        turn_ids: Sequence[str] | None,
        ks: Sequence[int],
        *,
        session_dates: Mapping[str, datetime | None] | None = None,
        before: Before | None = None,
    ) -> dict[str, float] | None:
        """The official retrieval scores of one question's rankings (``turn_ids`` None: session level only);
        None when the question is not scored. With ``session_dates`` (each session's date), also whether
        the newest evidence ranks first (:func:`memlane.bench.retrieval.metrics.recency_metrics`) for
        questions whose evidence carries several dates. With ``before`` (the same question's session and
        turn rankings before a reordering, supersession's), also what the reordering moved
        (:func:`memlane.bench.retrieval.metrics.move_metrics`)."""
        scores = self.official_scores(sample, session_ids, turn_ids, ks)
        if scores is None:
            return scores
        sessions, turns = self.evidence(sample)
        if session_dates:
            scores |= recency_metrics(session_ids, turn_ids, sessions, turns, session_dates, self.session_of)
        if before is not None:
            scores |= move_metrics(before, (session_ids, turn_ids), sessions, turns)
        return scores

    @abstractmethod
    def official_scores(
        self, sample: Sample, session_ids: Sequence[str], turn_ids: Sequence[str] | None, ks: Sequence[int]
    ) -> dict[str, float] | None:
        """The data set's own retrieval scores of one question's rankings; None when it is not scored."""

    @abstractmethod
    def evidence(self, sample: Sample) -> tuple[Sequence[str], Sequence[str]]:
        """The question's evidence (session ids, turn ids), where the recency and move figures look for it."""

    @abstractmethod
    def splitter(self, namespaces: Iterable[str]) -> Callable[[Sample], Split]:
        """The dev/test side of each sample of a data set whose namespaces are ``namespaces`` (read only by a
        family that splits by namespace: pass a generator, and a family that does not never opens it)."""

    @abstractmethod
    def ranking(self, sample_id: str, session_ids: Sequence[str], turn_ids: Sequence[str]) -> Ranking:
        """One line of ``rankings.jsonl``."""

    def category_label(self, category: str) -> str:
        """A category as report rows name it."""
        return category

    def row_filter(self, row: str) -> Callable[[str], bool] | None:
        """Which categories' questions report row ``row`` averages (a category, the overall row or the
        headline row); None for a row that is not a mean over questions (the task average)."""
        if row == TASK_AVERAGE:
            return None
        if row == OVERALL:
            return lambda category: True
        if row == self.headline_row:
            return lambda category: category not in self.headline_excludes
        return lambda category: category == row

    @property
    def task_averaged(self) -> bool:
        """Whether reports give the mean of the per-category means (LongMemEval's task-averaged figure)."""
        return TASK_AVERAGE in self.summary_rows

    @abstractmethod
    def lexical_scores(self, sample: Sample, hypothesis: str) -> dict[str, float | None]:
        """The F1 and BLEU-1 scores of an answer."""

    def answer_fields(self, sample: Sample) -> dict[str, object]:
        """The category fields of an ``answers.jsonl`` line."""
        return {"category": sample.category}

    @abstractmethod
    def qa_report(self, given: ReportInputs) -> QAReport:
        """The QA aggregates of a run's questions."""


class LoCoMoFamily(Family):
    """LoCoMo: ten long two-person conversations; questions in five numbered categories."""

    name = "locomo"
    unit = "conversation"
    id_key = "qa_id"
    user_assistant = False
    # Only speakers mode takes the speakers' names; the duplicate blocks it stores are collapsed in rankings.
    perspective = PerspectiveMode.SPEAKERS
    categories = tuple(CATEGORY_NAMES[n] for n in sorted(CATEGORY_NAMES))
    # Papers mostly report categories 1-4: adversarial questions have no answer to find.
    headline_row = "overall (1-4)"
    headline_excludes = frozenset({CATEGORY_NAMES[5]})
    summary_rows = (OVERALL, "overall (1-4)")
    # Both speakers are users, so the "-user" baselines would equal these.
    baselines = ("bm25-sessions", "minilm-sessions", "rrf-sessions", "bm25-turns")
    qa_metrics = ("f1", "mem0_f1", "bleu1", "j")
    answer_prompt = "locomo-short-answer-v1"
    judge = "locomo-mem0"
    adversarial_category = 5

    def read(self, path: Path) -> Iterator[Haystack]:
        return iter_locomo(path)

    def session_of(self, turn_id: str) -> str:
        return locomo_session_of(turn_id)

    def is_target(self, turn: Turn) -> bool:
        return True  # every dia_id: both speakers are users

    def turn_text(self, turn: Turn) -> str:
        # The official prompts' rendering of a shared image: the caption is often the only place a fact is stated.
        if turn.image_caption:
            return f"{turn.content} and shared {turn.image_caption}." if turn.content.strip() else turn.image_caption
        return turn.content

    def official_scores(
        self, sample: Sample, session_ids: Sequence[str], turn_ids: Sequence[str] | None, ks: Sequence[int]
    ) -> dict[str, float] | None:
        return score_locomo(sample, turn_ids, session_ids, ks)

    def evidence(self, sample: Sample) -> tuple[Sequence[str], Sequence[str]]:
        return sample.evidence_session_ids, sample.evidence_turn_ids

    def splitter(self, namespaces: Iterable[str]) -> Callable[[Sample], Split]:
        dev = dev_conversations(namespaces)
        return lambda sample: conversation_split(sample.namespace, dev)

    def ranking(self, sample_id: str, session_ids: Sequence[str], turn_ids: Sequence[str]) -> Ranking:
        return LocomoRanking(sample_id, tuple(turn_ids), tuple(session_ids))

    def category_label(self, category: str) -> str:
        """The official number and name, and the label mem0-lineage tables give that number."""
        for number, name in CATEGORY_NAMES.items():
            if name == category:
                return f"{number} {name} [mem0: {MEM0_CATEGORY_NAMES[number]}]"
        return category

    def lexical_scores(self, sample: Sample, hypothesis: str) -> dict[str, float | None]:
        """LoCoMo's official per-category F1, the mem0-lineage token F1 and BLEU-1."""
        if sample.category_number is None:
            raise ValueError(f"LoCoMo question {sample.sample_id} has no category number")
        return {
            "f1": locomo_f1(hypothesis, sample.answer, sample.category_number),
            "mem0_f1": mem0_f1(hypothesis, sample.answer),
            "bleu1": bleu1(hypothesis, sample.answer),
        }

    def answer_fields(self, sample: Sample) -> dict[str, object]:
        return {
            "category": sample.category,
            "category_number": sample.category_number,
            "category_mem0": sample.category_mem0,
        }

    def qa_report(self, given: ReportInputs) -> QAReport:
        return locomo_report(given.rows, metrics=given.metrics, settings=given.settings, prices=given.prices)


class LongMemEvalFamily(Family):
    """LongMemEval (S, M, oracle and the x500 expansion): one haystack per question, six question types."""

    name = "longmemeval"
    unit = "question"
    id_key = "question_id"
    user_assistant = True
    # With extraction off the perspectives of an exchange share one text: single mode stores it once.
    perspective = PerspectiveMode.SINGLE
    categories = QUESTION_TYPES
    headline_row = OVERALL
    summary_rows = (OVERALL, TASK_AVERAGE)
    # The reference table was measured on the official session corpus (user turns only), which the "-user"
    # variants reproduce; the plain ones use every turn.
    baselines = (
        "bm25-sessions",
        "minilm-sessions",
        "rrf-sessions",
        "bm25-sessions-user",
        "minilm-sessions-user",
        "rrf-sessions-user",
        "bm25-rounds",
        "bm25-turns",
    )
    qa_metrics = ("j", "f1", "bleu1")
    answer_prompt = "lme-reader-con-v1"  # Chain-of-Note: the paper's best reading setting
    judge = "longmemeval"
    hypotheses_file = True
    context_newest_first = True  # the reader prompt states no order; knowledge updates want the newest first

    def read(self, path: Path) -> Iterator[Haystack]:
        return iter_longmemeval(path)

    def session_of(self, turn_id: str) -> str:
        return longmemeval_session_of(turn_id)

    def is_target(self, turn: Turn) -> bool:
        return turn.role == "user"  # the official turn corpus: evidence sits in user turns

    def official_scores(
        self, sample: Sample, session_ids: Sequence[str], turn_ids: Sequence[str] | None, ks: Sequence[int]
    ) -> dict[str, float] | None:
        return score_longmemeval(sample, session_ids, turn_ids, ks)

    def evidence(self, sample: Sample) -> tuple[Sequence[str], Sequence[str]]:
        turns = sample.user_evidence_turn_ids  # the official targets, as the recall figures
        return tuple(dict.fromkeys(longmemeval_session_of(t) for t in turns)), turns

    def splitter(self, namespaces: Iterable[str]) -> Callable[[Sample], Split]:
        return lambda sample: question_split(sample.sample_id)

    def ranking(self, sample_id: str, session_ids: Sequence[str], turn_ids: Sequence[str]) -> Ranking:
        return LongMemEvalRanking(sample_id, tuple(session_ids), tuple(turn_ids))

    def lexical_scores(self, sample: Sample, hypothesis: str) -> dict[str, float | None]:
        """LoCoMo's normalised, stemmed token F1 without its category rules (LongMemEval has no official F1),
        and BLEU-1."""
        return {"f1": token_f1(hypothesis, sample.answer), "bleu1": bleu1(hypothesis, sample.answer)}

    def qa_report(self, given: ReportInputs) -> QAReport:
        return longmemeval_report(
            given.rows, metrics=given.metrics, settings=given.settings, prices=given.prices, dataset=given.dataset
        )


LOCOMO: Family = LoCoMoFamily()
LONGMEMEVAL: Family = LongMemEvalFamily()
FAMILIES: dict[str, Family] = {f.name: f for f in (LOCOMO, LONGMEMEVAL)}


def family_named(name: str) -> Family:
    """The family a log names; ConfigError for a name no family has."""
    family = FAMILIES.get(name)
    if family is None:
        raise ConfigError(f"unknown data set family {name!r}; known: {', '.join(FAMILIES)}")
    return family
