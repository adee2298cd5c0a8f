"""Baseline retrievers, reproduced by the harness: simple rankers that work on a haystack directly.

memlane's figures are read next to those of simple retrievers measured in the same run. Each baseline is
named, and a baseline run writes an ordinary retrieval run folder (mode name = baseline name), so
``memlane bench report`` and ``memlane bench compare`` read it unchanged.

Baselines (no memlane store, no LLM):

* ``bm25-sessions``: Okapi BM25 over whole sessions (every turn's text joined);
* ``minilm-sessions``: cosine between the question's vector and each whole session's vector (the
  harness's embedder, ``minilm-128`` by default, which truncates a session to its first 128 tokens);
* ``rrf-sessions``: reciprocal rank fusion (k = 60) of the two rankings above;
* ``bm25-rounds`` (LongMemEval): BM25 over rounds, a user turn plus the assistant turns after it up to
  the next user turn (assistant turns before a session's first user turn belong to no round);
* ``bm25-turns``: BM25 over single target turns (LoCoMo: every dia_id, the LoCoMo turn baseline;
  LongMemEval: user turns, the official turn-level corpus);
* ``bm25-sessions-user``, ``minilm-sessions-user``, ``rrf-sessions-user``: the same with a session's
  text made of its target turns only (LongMemEval: user turns, which is the official session corpus of
  ``run_retrieval.py``; on LoCoMo identical to the plain ones). These reproduce the reference table of
  docs/bench/baselines.md, whose "BM25 on rounds" session figures are the official turn-to-session ones
  (``turn2session/...``).

Defaults (``Family.baselines``): all eight on LongMemEval, the four plain ones on LoCoMo.

BM25 (:mod:`.bm25`) is the ``BM25Okapi`` of ``rank_bm25``, the library the official LongMemEval ``flat-bm25``
uses, with its defaults: k1 = 1.5, b = 0.75, and idf = ln((N - n + 0.5) / (n + 0.5)) where a negative idf (a term in
more than half the documents) is replaced by epsilon (0.25) times the mean idf of the corpus vocabulary;
every occurrence of a query term adds its term score. Tokens are lower-cased ``\\w+`` words, no stemming,
no stop words (the official code splits on whitespace without lower-casing; the reference table is
lower-cased). The corpus of a question is its own haystack, as in the official per-question retrieval.

Rankings follow :mod:`memlane.bench.retrieval.history`'s conventions:

* *retrieved* units are the ones a ranker scores: BM25 units with a positive score, every unit for the
  cosine, every unit of either list for RRF; ties keep haystack order;
* session rankings of round and turn baselines follow the units' sessions in rank order;
* session baselines rank no turns: their turn ranking is empty and carries no turn metrics, so reports show
  ``-`` (as the official session-granularity retrieval, and the reference table, do). Expanding a session
  ranking into its turns in haystack order would only measure where evidence sits inside a session;
* every list is cut at ``min_length`` (``max(50, max(k))``) and padded to it (or to the whole haystack)
  with the remaining sessions / target turns in haystack order, exactly as :func:`memlane.bench.retrieval.history.rank`.

Logged config: ``perspective`` is ``none`` (nothing is ingested), ``depth`` = ``min_length`` (units kept per
question), ``embedder``/``embedder_model_id`` name the embedder when a cosine baseline runs, else ``none``;
``search_settings`` holds each baseline's parameters. Latency: ``index`` (tokenizing and embedding the
haystack, paid by the first baseline of a haystack that needs it) and ``search`` (the question's
tokenizing or embedding plus scoring).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from memlane.bench.datasets.families import LOCOMO, LONGMEMEVAL, Family
from memlane.bench.datasets.model import Haystack, Sample, Session, Turn, questions
from memlane.bench.datasets.registry import DATASETS, DatasetStream, open_dataset
from memlane.bench.reports.plot import check_plotting
from memlane.bench.reports.report import write_reports
from memlane.bench.retrieval.bm25 import (
    BM25,
    BM25_B,
    BM25_EPSILON,
    BM25_K1,
    FloatArray,
    TermCounts,
    Vocabulary,
    tokenize,
)
from memlane.bench.retrieval.history import HaystackIndex, pad
from memlane.bench.retrieval.ingest import BENCH_DURABILITY, dataset_record, default_bench_cache
from memlane.bench.retrieval.runlog import (
    DEFAULT_EMBEDDER,
    DEFAULT_KS,
    LOG_NAME,
    MIN_RANKING_LENGTH,
    QuestionRecord,
    RetrievalConfig,
    RunLog,
    new_header,
    pack_log,
)
from memlane.bench.split import sample_splitter
from memlane.core.embedding.protocol import CachedEmbedder, make_embedder
from memlane.core.errors import ConfigError
from memlane.core.store.sqlite import SqliteStore
from memlane.settings import embedder_config_from_env

RRF_K = 60
NONE = "none"

Retriever = Literal["bm25", "cosine", "rrf"]
Unit = Literal["session", "round", "turn"]
SessionText = Literal["all", "targets"]


@dataclass(frozen=True)
class Baseline:
    """A named baseline: its retriever, the unit it ranks, and (sessions) which turns make the text.
    ``fuses`` names the two baselines an RRF baseline fuses; ``families`` where it applies."""

    name: str
    retriever: Retriever
    unit: Unit
    session_text: SessionText = "all"
    fuses: tuple[str, ...] = ()
    families: tuple[Family, ...] = (LOCOMO, LONGMEMEVAL)

    def settings(self) -> dict[str, object]:
        """What the run log records for this baseline (``search_settings``)."""
        out: dict[str, object] = {"retriever": self.retriever, "unit": self.unit}
        if self.unit == "session":
            out["session_text"] = self.session_text
        if self.retriever == "bm25":
            out |= {"k1": BM25_K1, "b": BM25_B, "epsilon": BM25_EPSILON, "tokens": "lower-cased \\w+ words"}
        if self.retriever == "rrf":
            out |= {"rrf_k": RRF_K, "fuses": list(self.fuses)}
        return out


BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        Baseline("bm25-sessions", "bm25", "session"),
        Baseline("minilm-sessions", "cosine", "session"),
        Baseline("rrf-sessions", "rrf", "session", fuses=("bm25-sessions", "minilm-sessions")),
        Baseline("bm25-sessions-user", "bm25", "session", "targets"),
        Baseline("minilm-sessions-user", "cosine", "session", "targets"),
        Baseline(
            "rrf-sessions-user", "rrf", "session", "targets", fuses=("bm25-sessions-user", "minilm-sessions-user")
        ),
        Baseline("bm25-rounds", "bm25", "round", families=(LONGMEMEVAL,)),
        Baseline("bm25-turns", "bm25", "turn"),
    )
}


# ----------------------------------------------------------------------------------------- corpora


@dataclass(frozen=True)
class UnitDoc:
    """One ranked unit: its id, session, the target turns it stands for, and its text."""

    unit_id: str
    session_id: str
    turn_ids: tuple[str, ...]
    text: str


def session_units(session: Session, family: Family, unit: Unit, session_text: SessionText = "all") -> list[UnitDoc]:
    """The units of one session (see the module doc)."""
    sid = session.session_id
    if unit == "session":
        turns = [t for t in session.turns if session_text == "all" or family.is_target(t)]
        targets = tuple(t.turn_id for t in session.turns if family.is_target(t))
        return [UnitDoc(sid, sid, targets, "\n".join(family.turn_text(t) for t in turns))]
    if unit == "turn":
        return [
            UnitDoc(t.turn_id, sid, (t.turn_id,), family.turn_text(t)) for t in session.turns if family.is_target(t)
        ]
    if not family.user_assistant:
        raise ConfigError(f"rounds (user turn + reply) need user and assistant turns; {family.name} has none")
    rounds: list[UnitDoc] = []
    current: list[Turn] = []
    for t in (*session.turns, None):
        if t is None or t.role == "user":
            if current:
                head = current[0]
                text = "\n".join(family.turn_text(x) for x in current)
                rounds.append(UnitDoc(head.turn_id, sid, (head.turn_id,), text))
            current = [t] if t is not None else []
        elif current:
            current.append(t)
    return rounds


class TermCache:
    """Term counts of each session's units, kept across haystacks (x500 haystacks share their fillers).

    Keyed by (unit kind, session id, hash of the session's turns), so a session id reused with other
    content is tokenized again."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self._cache: dict[tuple[str, str, int], list[TermCounts]] = {}
        self.hits = 0
        self.misses = 0

    def units(self, session: Session, family: Family, unit: Unit, session_text: SessionText) -> list[TermCounts]:
        fingerprint = hash(tuple((t.turn_id, t.role, t.content, t.image_caption) for t in session.turns))
        key = (f"{unit}/{session_text}", session.session_id, fingerprint)
        found = self._cache.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        counts = [self.vocab.counts(tokenize(u.text)) for u in session_units(session, family, unit, session_text)]
        self._cache[key] = counts
        return counts


# ----------------------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class UnitRanking:
    """Units best first with their scores (only retrieved units), and the seconds the query took."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    seconds: float


def _order(scores: FloatArray, keep: npt.NDArray[np.bool_] | None = None) -> list[int]:
    """Indices by descending score, ties in haystack (index) order; only ``keep`` ones if given."""
    order = np.argsort(-scores, kind="stable")
    if keep is not None:
        order = order[keep[order]]
    return [int(i) for i in order]


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K, order: Sequence[str] = ()) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: score = sum over rankings of 1 / (k + rank), rank 1-based. Ties keep the
    order of ``order`` (haystack order), then first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank_, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank_)
    position = {item: i for i, item in enumerate(order)}
    first = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], position.get(kv[0], len(position)), first[kv[0]]))


class HaystackRanker:
    """Ranks one haystack's units for a question with every baseline; builds each index on first use."""

    def __init__(
        self, haystack: Haystack, family: Family, terms: TermCache, embedder: CachedEmbedder | None = None
    ) -> None:
        self.haystack = haystack
        self.family = family
        self.terms = terms
        self.embedder = embedder
        self._units: dict[tuple[Unit, SessionText], list[UnitDoc]] = {}
        self._bm25: dict[tuple[Unit, SessionText], BM25] = {}
        self._vectors: dict[SessionText, npt.NDArray[np.float32]] = {}
        self._memo: dict[tuple[str, str], UnitRanking] = {}
        self.index_seconds = 0.0

    def units(self, unit: Unit, session_text: SessionText = "all") -> list[UnitDoc]:
        key = (unit, session_text)
        if key not in self._units:
            self._units[key] = [
                u for s in self.haystack.sessions for u in session_units(s, self.family, unit, session_text)
            ]
        return self._units[key]

    def _bm25_index(self, unit: Unit, session_text: SessionText) -> BM25:
        key = (unit, session_text)
        if key not in self._bm25:
            started = time.perf_counter()
            docs = [c for s in self.haystack.sessions for c in self.terms.units(s, self.family, unit, session_text)]
            self._bm25[key] = BM25(docs)
            self.index_seconds += time.perf_counter() - started
        return self._bm25[key]

    def _session_vectors(self, session_text: SessionText) -> npt.NDArray[np.float32]:
        if self.embedder is None:
            raise ConfigError("a cosine baseline needs an embedder")
        if session_text not in self._vectors:
            started = time.perf_counter()
            self._vectors[session_text] = self.embedder.embed([u.text for u in self.units("session", session_text)])
            self.index_seconds += time.perf_counter() - started
        return self._vectors[session_text]

    def rank(self, baseline: Baseline, question: str) -> UnitRanking:
        """The baseline's unit ranking for ``question`` (memoized per question, so RRF reuses its parts)."""
        key = (baseline.name, question)
        if key in self._memo:
            return self._memo[key]
        if baseline.retriever == "rrf":
            parts = [self.rank(BASELINES[name], question) for name in baseline.fuses]
            started = time.perf_counter()
            haystack_order = [u.unit_id for u in self.units(baseline.unit, baseline.session_text)]
            fused = rrf([p.ids for p in parts], RRF_K, haystack_order)
            seconds = time.perf_counter() - started + sum(p.seconds for p in parts)
            result = UnitRanking(tuple(i for i, _ in fused), tuple(s for _, s in fused), seconds)
        elif baseline.retriever == "bm25":
            index = self._bm25_index(baseline.unit, baseline.session_text)
            units = self.units(baseline.unit, baseline.session_text)
            started = time.perf_counter()
            scores = index.scores(self.terms.vocab.lookup(tokenize(question)))
            order = _order(scores, scores > 0)
            result = UnitRanking(
                tuple(units[i].unit_id for i in order),
                tuple(float(scores[i]) for i in order),
                time.perf_counter() - started,
            )
        else:
            if baseline.unit != "session":
                raise ConfigError(f"{baseline.name}: the cosine baseline ranks sessions only")
            matrix = self._session_vectors(baseline.session_text)
            units = self.units("session", baseline.session_text)
            assert self.embedder is not None
            started = time.perf_counter()
            query = self.embedder.embed([question])[0]
            scores = (matrix @ query).astype(np.float64) if len(units) else np.zeros(0)
            order = _order(scores)
            result = UnitRanking(
                tuple(units[i].unit_id for i in order),
                tuple(float(scores[i]) for i in order),
                time.perf_counter() - started,
            )
        self._memo[key] = result
        return result


@dataclass(frozen=True)
class BaselineRankings:
    """Exported rankings of one question (``turn_ids`` is ``None`` for session baselines)."""

    session_ids: tuple[str, ...]
    turn_ids: tuple[str, ...] | None
    retrieved_sessions: int
    retrieved_turns: int


def rankings_of(
    ranking: UnitRanking, units: Sequence[UnitDoc], index: HaystackIndex, unit: Unit, min_length: int
) -> BaselineRankings:
    """Session and turn rankings implied by a unit ranking, cut and padded to ``min_length``."""
    session_length = min(min_length, len(index.session_ids))
    if unit == "session":
        sessions = list(ranking.ids)
        return BaselineRankings(
            pad(sessions[:session_length], index.session_ids, session_length),
            None,
            min(len(sessions), session_length),
            0,
        )
    by_id = {u.unit_id: u for u in units}
    sessions_seen: dict[str, None] = {}
    turns_seen: dict[str, None] = {}
    for unit_id in ranking.ids:
        u = by_id[unit_id]
        sessions_seen.setdefault(u.session_id)
        for t in u.turn_ids:
            turns_seen.setdefault(t)
    turn_length = min(min_length, len(index.turn_ids))
    return BaselineRankings(
        session_ids=pad(list(sessions_seen)[:session_length], index.session_ids, session_length),
        turn_ids=pad(list(turns_seen)[:turn_length], index.turn_ids, turn_length),
        retrieved_sessions=min(len(sessions_seen), session_length),
        retrieved_turns=min(len(turns_seen), turn_length),
    )


def evaluate_baseline(
    ranker: HaystackRanker,
    sample: Sample,
    index: HaystackIndex,
    baseline: Baseline,
    config: RetrievalConfig,
    split: str | None = None,
) -> QuestionRecord:
    """Rank one question with one baseline, score it, and make its log record (``split``: the question's
    side of the dev/test split)."""
    index_before = ranker.index_seconds
    started = time.perf_counter()
    ranking = ranker.rank(baseline, sample.question)
    ranked = time.perf_counter()
    units = ranker.units(baseline.unit, baseline.session_text)
    out = rankings_of(ranking, units, index, baseline.unit, config.min_length)
    scores = DATASETS[config.dataset].family.score(
        sample, out.session_ids, out.turn_ids, config.ks, session_dates=index.session_dates
    )
    done = time.perf_counter()
    index_ms = (ranker.index_seconds - index_before) * 1000
    return QuestionRecord(
        mode=baseline.name,
        sample=sample,
        hits=tuple(zip(ranking.ids[: config.depth], ranking.scores[: config.depth], strict=True)),
        ranked_session_ids=out.session_ids,
        ranked_turn_ids=out.turn_ids or (),
        retrieved_sessions=out.retrieved_sessions,
        retrieved_turns=out.retrieved_turns,
        latency_ms={
            "index": index_ms,
            "search": ranking.seconds * 1000,
            "rank_and_score": (done - ranked) * 1000,
            "total": (done - started) * 1000,
        },
        scores=scores,
        split=split,
    )


# ------------------------------------------------------------------------------------------ a run


@dataclass(frozen=True)
class BaselineOptions:
    """What a caller asks for. ``baselines`` empty = the family's defaults (``Family.baselines``)."""

    dataset: str
    baselines: tuple[str, ...] = ()
    ks: tuple[int, ...] = DEFAULT_KS
    limit: int | None = None
    embedder: str = DEFAULT_EMBEDDER
    data_dir: Path | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True)
class BaselineOutcome:
    """What :func:`run_baselines` did."""

    run_dir: Path
    written: int
    already_logged: int
    seconds: float
    index_seconds: float
    texts_embedded: int


def check_baselines(dataset: str, names: Sequence[str]) -> tuple[Baseline, ...]:
    """Baselines by name (empty = the family's defaults, ``Family.baselines``), checked against the data set's
    family."""
    if dataset not in DATASETS:
        raise ConfigError(f"unknown data set {dataset!r}; known: {', '.join(DATASETS)}")
    family = DATASETS[dataset].family
    names = tuple(names) or family.baselines
    if len(set(names)) != len(names):
        raise ConfigError(f"baselines repeat: {names}")
    out = []
    for name in names:
        if name not in BASELINES:
            raise ConfigError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")
        baseline = BASELINES[name]
        if family not in baseline.families:
            raise ConfigError(f"baseline {name!r} does not apply to {dataset} ({family.name})")
        out.append(baseline)
    return tuple(out)


def resolve_baselines(options: BaselineOptions) -> tuple[Baseline, ...]:
    """The baselines a run asks for, checked against the data set's family."""
    return check_baselines(options.dataset, options.baselines)


def needs_embedder(baselines: Sequence[Baseline]) -> bool:
    """Whether any of the baselines ranks by cosine (directly or inside a fusion)."""
    return any(b.retriever == "cosine" or any(BASELINES[f].retriever == "cosine" for f in b.fuses) for b in baselines)


def _check(options: BaselineOptions) -> None:
    if not options.ks or any(k < 1 for k in options.ks):
        raise ConfigError(f"k values must be positive integers, got {options.ks}")
    if options.limit is not None and options.limit < 1:
        raise ConfigError(f"--limit must be positive, got {options.limit}")


def baseline_config(
    options: BaselineOptions, baselines: Sequence[Baseline], stream: DatasetStream, embedder: tuple[str, str]
) -> RetrievalConfig:
    """The logged config (see the module doc for the fields a baseline run fills its own way)."""
    ks = tuple(sorted(set(options.ks)))
    min_length = max(MIN_RANKING_LENGTH, max(ks))
    return RetrievalConfig(
        dataset=options.dataset,
        modes=tuple(b.name for b in baselines),
        ks=ks,
        limit=options.limit,
        depth=min_length,
        min_length=min_length,
        before_question_date=False,
        perspective=NONE,
        embedder=embedder[0],
        embedder_model_id=embedder[1],
        extraction="off",
        dataset_params=dict(stream.params),
        search_settings={b.name: b.settings() for b in baselines},
    )


def run_baselines(options: BaselineOptions, run_dir: Path, *, progress: bool = True) -> BaselineOutcome:
    """Rank every pending (question, baseline), write the log and the reports of a standard run folder."""
    _check(options)
    baselines = resolve_baselines(options)
    check_plotting()
    started = time.perf_counter()
    stream = open_dataset(options.dataset, options.data_dir)
    family = DATASETS[options.dataset].family
    cache_store: SqliteStore | None = None
    embedder: CachedEmbedder | None = None
    names = (NONE, NONE)
    if needs_embedder(baselines):
        inner = make_embedder(options.embedder, embedder_config_from_env())
        cache_dir = options.cache_dir or default_bench_cache()
        cache_dir.mkdir(parents=True, exist_ok=True)
        # The bench stores' shared embedding cache: a rerun (or another data set's) embeds nothing twice.
        cache_store = SqliteStore(cache_dir / "embeddings.db", durability=BENCH_DURABILITY)
        embedder = CachedEmbedder(inner, cache_store)
        names = (options.embedder, inner.model_id)
    try:
        config = baseline_config(options, baselines, stream, names)
        store_info: dict[str, object] = {
            "key": NONE,
            "kind": "baselines rank each haystack directly; nothing is ingested",
            "namespaces": NONE,
            "blocks": NONE,
        }
        header = new_header(config, dataset_record(stream), store_info)
        log = RunLog.open(Path(run_dir), header, {"baselines": [b.name for b in baselines]})
        written = 0
        already = len(log.done)
        index_seconds = 0.0
        terms = TermCache(Vocabulary())
        split_of = sample_splitter(family, (h.namespace for h in stream))
        bar = tqdm(desc=f"baselines {options.dataset}", unit="q", total=options.limit, disable=not progress)
        try:
            for haystack, samples in questions(stream, options.limit):
                pending = [(s, b) for s in samples for b in baselines if (b.name, s.sample_id) not in log.done]
                if pending:
                    ranker = HaystackRanker(haystack, family, terms, embedder)
                    index = HaystackIndex.of(haystack, family)
                    for sample, baseline in pending:
                        log.write(evaluate_baseline(ranker, sample, index, baseline, config, split_of(sample)))
                        written += 1
                    index_seconds += ranker.index_seconds
                bar.update(len(samples))
        finally:
            bar.close()
            log.close()
    finally:
        if cache_store is not None:
            cache_store.close()
    write_reports(Path(run_dir))
    pack_log(Path(run_dir) / LOG_NAME)
    return BaselineOutcome(
        run_dir=Path(run_dir),
        written=written,
        already_logged=already,
        seconds=time.perf_counter() - started,
        index_seconds=index_seconds,
        texts_embedded=embedder.misses if embedder is not None else 0,
    )
