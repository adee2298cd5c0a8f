"""Typed, immutable model of an evaluation data set.

A data set is a set of *namespaces* (one memory per namespace: a LoCoMo conversation, or one LongMemEval
question's haystack), each with the history to ingest (sessions of turns) and the questions (samples)
asked against it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from memlane.core.errors import ValidationError


@dataclass(frozen=True, slots=True)
class Turn:
    """One utterance.

    ``turn_id`` is the LoCoMo ``dia_id`` (``"D3:5"``) or the LongMemEval ``<session_id>_<i>`` (``i`` 1-based,
    counting both roles). ``role`` is ``"user"``/``"assistant"`` (LongMemEval) or the speaker's name
    (LoCoMo). ``has_answer`` is ``None`` where the source carries no flag. ``image_caption`` is LoCoMo's
    ``blip_caption`` of a shared image (the official prompts render it as `` and shared <caption>.``).
    """

    turn_id: str
    role: str
    content: str
    has_answer: bool | None = None
    image_caption: str | None = None


@dataclass(frozen=True, slots=True)
class Session:
    """A dated block of turns. ``started_at`` is aware UTC, ``None`` when the source gives no date."""

    session_id: str
    started_at: datetime | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One question with its gold answer and evidence.

    * ``sample_id``: LongMemEval ``question_id``; LoCoMo ``"<sample_id>:<i>"`` (``i`` = 0-based index in
      that conversation's ``qa`` list).
    * ``category``: LongMemEval ``question_type``; LoCoMo official name (``multi-hop``, ``temporal``,
      ``open-domain``, ``single-hop``, ``adversarial``). ``category_number`` is LoCoMo's integer 1-5 and
      ``category_mem0`` the label mem0-lineage papers print for that integer (both ``None`` for
      LongMemEval).
    * ``evidence_turn_ids``: every evidence turn (LongMemEval: turns with ``has_answer: true``, any role;
      LoCoMo: cleaned, existing ``dia_id`` s). ``user_evidence_turn_ids``: the official LongMemEval
      retrieval targets (user turns with ``has_answer: true``); for LoCoMo, where both speakers are users,
      it equals ``evidence_turn_ids``.
    * ``raw_evidence``: LoCoMo's ``evidence`` list as stored, before cleaning (empty for LongMemEval).
    """

    sample_id: str
    namespace: str
    question: str
    answer: str
    category: str
    question_date: datetime | None
    evidence_session_ids: tuple[str, ...]
    evidence_turn_ids: tuple[str, ...]
    user_evidence_turn_ids: tuple[str, ...]
    is_abstention: bool
    category_number: int | None = None
    category_mem0: str | None = None
    adversarial_answer: str | None = None
    raw_evidence: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Haystack:
    """One namespace: the history to ingest and the samples asked against it (the streaming unit)."""

    namespace: str
    sessions: tuple[Session, ...]
    samples: tuple[Sample, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Dataset:
    """A fully materialised data set.

    ``sha256`` is the hex digest of the source's JSON content (decompressed, so a compressed and a plain
    copy of one file are the same data set). ``params`` records generation settings of derived
    sets (e.g. the seed and size of ``longmemeval-s-x500``). ``notes`` lists every data quirk that loading
    repaired or dropped, so nothing is silently changed.
    """

    name: str
    sha256: str
    histories: Mapping[str, tuple[Session, ...]]
    samples: tuple[Sample, ...]
    notes: tuple[str, ...] = ()
    params: Mapping[str, int | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        orphans = sorted({s.namespace for s in self.samples} - set(self.histories))
        if orphans:
            raise ValidationError(f"samples of namespaces without history: {orphans[:5]}", where=self.name)

    def samples_for(self, namespace: str) -> tuple[Sample, ...]:
        """The samples asked against ``namespace``, in data-set order."""
        return tuple(s for s in self.samples if s.namespace == namespace)

    def haystacks(self) -> Iterator[Haystack]:
        """Yield the data set namespace by namespace, in the order of ``histories``."""
        by_ns: dict[str, list[Sample]] = {ns: [] for ns in self.histories}
        for s in self.samples:
            by_ns[s.namespace].append(s)
        for ns, sessions in self.histories.items():
            yield Haystack(namespace=ns, sessions=sessions, samples=tuple(by_ns[ns]))


def dataset_from_haystacks(
    name: str, sha256: str, haystacks: Iterator[Haystack], params: Mapping[str, int | str] | None = None
) -> Dataset:
    """Materialise a stream of haystacks into a :class:`Dataset`."""
    histories: dict[str, tuple[Session, ...]] = {}
    samples: list[Sample] = []
    notes: list[str] = []
    for h in haystacks:
        histories[h.namespace] = h.sessions
        samples.extend(h.samples)
        notes.extend(h.notes)
    return Dataset(
        name=name,
        sha256=sha256,
        histories=histories,
        samples=tuple(samples),
        notes=tuple(notes),
        params=dict(params or {}),
    )


def questions(haystacks: Iterable[Haystack], limit: int | None = None) -> Iterator[tuple[Haystack, tuple[Sample, ...]]]:
    """Each haystack with its samples, up to ``limit`` samples in all (every sample without a limit): the
    questions a run with that limit asks, and the namespaces it needs. No haystack after the limit is read."""
    asked = 0
    for haystack in haystacks:
        if limit is not None and asked >= limit:
            return
        samples = haystack.samples if limit is None else haystack.samples[: limit - asked]
        asked += len(samples)
        yield haystack, samples


def per_category(haystacks: Iterable[Haystack], n: int) -> Iterator[Haystack]:
    """The first ``n`` samples of each category, in data-set order, each with its haystack (a haystack none
    of whose samples is kept is left out): a sample that weighs every question type alike, for systems too
    slow to ingest every haystack. The same ``n`` picks the same questions on every run."""
    if n < 1:
        raise ValueError(f"per_category must be positive, got {n}")
    taken: dict[str, int] = {}
    for haystack in haystacks:
        kept = []
        for sample in haystack.samples:
            if taken.get(sample.category, 0) < n:
                taken[sample.category] = taken.get(sample.category, 0) + 1
                kept.append(sample)
        if kept:
            yield replace(haystack, samples=tuple(kept))
