"""What the run viewer shows, read from run folders: one JSON-ready model for the page.

A *system* is what answered a question: a search mode or baseline of a retrieval run (``<run>/<mode>``), or
the reader of a QA run (``<run>/qa``). For every system and question the model keeps what a person needs to
see why it was a hit or a miss: the first retrieved turns and sessions (only what the search returned, not
the padding of the exported rankings), the per-question recall figures, and for QA the answer, the verdict
and the judge's raw reply. Turn and session texts come from the data set itself, found by the same rule as
every bench command and checked against the sha256 the run logged; without it the page shows ids only.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlane.bench.datasets.model import Haystack, Sample
from memlane.bench.datasets.registry import DatasetNotFound, open_dataset
from memlane.bench.qa.qalog import QA_LOG_FORMAT, QA_LOG_NAME, AnswerRecord, read_qa_log
from memlane.bench.reports.results import compute_results
from memlane.bench.retrieval.runlog import (
    LOG_FORMAT,
    LOG_NAME,
    LogContents,
    QuestionRecord,
    log_file,
    read_lines,
    read_log,
)
from memlane.core.errors import MemlaneError, ValidationError

TOP = 10  # hits shown per system and question
TEXT_CHARS = 600  # a turn's text is cut there (LongMemEval's assistant replies run to thousands)
_RECALL = re.compile(r"^(session|turn)/(?:(recall_all|recall_any)@\d+|latest_first|latest@1)$")
RETRIEVAL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("session/recall_all@5", "session R_all@5"),
    ("session/recall_all@10", "session R_all@10"),
    ("session/recall_any@5", "session R_any@5"),
    ("turn/recall_all@10", "turn R_all@10"),
    ("turn/recall_all@50", "turn R_all@50"),
)
QA_COLUMNS: tuple[tuple[str, str], ...] = (("j", "J"), ("f1", "F1"), ("bleu1", "BLEU-1"))


@dataclass
class _Texts:
    """The turns and sessions the page needs, per data set: what to look up, and what was found."""

    turns: dict[str, set[str]] = field(default_factory=dict)  # namespace -> turn ids
    sessions: dict[str, set[str]] = field(default_factory=dict)  # namespace -> session ids

    def want(self, namespace: str, turns: Iterable[str] = (), sessions: Iterable[str] = ()) -> None:
        self.turns.setdefault(namespace, set()).update(turns)
        self.sessions.setdefault(namespace, set()).update(sessions)


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def _question(sample: Sample, split: str | None) -> dict[str, object]:
    return {
        "ns": sample.namespace,
        "q": sample.question,
        "a": sample.answer,
        "cat": sample.category,
        "date": sample.question_date.isoformat() if sample.question_date else None,
        "es": list(sample.evidence_session_ids),
        "et": list(sample.user_evidence_turn_ids or sample.evidence_turn_ids),
        "abs": sample.is_abstention,
        "split": split,
    }


def _compact(value: float | None) -> float | int | None:
    """A figure as short as JSON allows: most per-question recalls are exactly 0 or 1."""
    rounded = _round(value)
    return int(rounded) if rounded is not None and rounded.is_integer() else rounded


def _retrieval_record(r: QuestionRecord, top: int, metrics: list[str]) -> dict[str, object]:
    """One question of one system; ``m`` holds the figures in the order of ``metrics`` (the model's
    ``metrics`` list, extended here with any new name), ``None`` for an unscored question."""
    m: list[float | int | None] | None = None
    if r.scores is not None:
        for key in r.scores:
            if _RECALL.match(key) and key not in metrics:
                metrics.append(key)
        m = [_compact(r.scores.get(key)) for key in metrics]
    return {
        "t": list(r.ranked_turn_ids[: min(top, r.retrieved_turns)]),
        "s": list(r.ranked_session_ids[: min(top, r.retrieved_sessions)]),
        "m": m,
        "err": r.error,
    }


def _qa_record(r: AnswerRecord) -> dict[str, object]:
    verdict = r.verdict or {}
    correct = verdict.get("correct")
    return {
        "ans": r.hypothesis,
        "ok": correct if isinstance(correct, bool) else None,
        "scores": {k: _round(v) for k, v in r.scores.items()},
        "reply": verdict.get("reply"),
        "judge": verdict.get("prompt_id"),
        "err": "; ".join(str(e.get("message", e)) for e in r.errors) or None,
    }


def _log_format(run_dir: Path) -> str:
    path = log_file(run_dir / LOG_NAME)
    if not path.is_file():
        raise ValidationError("no run log (log.jsonl or log.jsonl.gz) here", where=str(run_dir))
    for _, obj in read_lines(path):
        return str(obj.get("format"))
    raise ValidationError("empty run log", where=str(path))


def _plot(run_dir: Path) -> str | None:
    png = run_dir / "recall.png"
    if not png.is_file():
        return None
    return "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")


def _figure(mean: float | None) -> str | None:
    """A table's figure as the reports write it (``report.md``: ``f"{mean:.3f}"``), rounded once from the
    raw mean: rounding a rounded value again (or in the browser, whose ``toFixed`` breaks exact ties
    upwards) gave 0.313 where the report said 0.312 for a mean of 5/16."""
    return None if mean is None else f"{mean:.3f}"


def _retrieval_tables(log: LogContents, modes: Sequence[str]) -> dict[str, dict[str, dict[str, object]]]:
    """Per mode, per group (category): n, skipped and the key figures, computed from the run's log by the
    code that writes its report."""
    results = compute_results(log)
    out: dict[str, dict[str, dict[str, object]]] = {}
    for mode in modes:
        groups = results.modes[mode].groups if mode in results.modes else {}
        out[mode] = {
            name: {"n": g.n, "skipped": g.skipped, **{key: _figure(g.means.get(key)) for key, _ in RETRIEVAL_COLUMNS}}
            for name, g in groups.items()
        }
    return out


def _qa_tables(run_dir: Path) -> dict[str, dict[str, dict[str, object]]]:
    path = run_dir / "results.json"
    if not path.is_file():
        return {}
    agg = json.loads(path.read_text(encoding="utf-8")).get("aggregates", {})
    rows: dict[str, dict[str, object]] = {}
    for cat in agg.get("categories", []):
        metrics = cat.get("metrics", {})
        rows[str(cat.get("name"))] = {
            "n": max((m.get("n", 0) for m in metrics.values()), default=0),
            **{key: _figure(metrics.get(key, {}).get("mean")) for key, _ in QA_COLUMNS},
        }
    for name in ("overall", "overall_all"):
        if name in agg:
            overall = agg[name]
            rows[name] = {
                "n": max((m.get("n", 0) for m in overall.values()), default=0),
                **{key: _figure(overall.get(key, {}).get("mean")) for key, _ in QA_COLUMNS},
            }
    return {"qa": rows}


def build_model(run_dirs: Sequence[Path], *, data_dir: Path | None = None, top: int = TOP) -> dict[str, Any]:
    """The page's data for the runs in ``run_dirs`` (retrieval or QA run folders, any mix)."""
    runs: list[dict[str, object]] = []
    questions: dict[str, dict[str, object]] = {}
    results: dict[str, dict[str, dict[str, object]]] = {}
    wanted: dict[tuple[str, str, int, int], _Texts] = {}
    notes: list[str] = []
    metrics: list[str] = []
    names = _unique_names(run_dirs)
    for run_dir, name in zip(run_dirs, names, strict=True):
        run_dir = Path(run_dir)
        fmt = _log_format(run_dir)
        if fmt == LOG_FORMAT:
            log = read_log(run_dir / LOG_NAME)
            header = log.header
            modes = list(header.config.modes)
            dataset, config = dict(header.dataset), _jsonable(header.config)
            run: dict[str, object] = {
                "kind": "retrieval",
                "systems": [f"{name}/{m}" for m in modes],
                "columns": RETRIEVAL_COLUMNS,
            }
            tables = _retrieval_tables(log, modes)
            run["tables"] = {f"{name}/{m}": t for m, t in tables.items()}
            texts = wanted.setdefault(_dataset_key(dataset), _Texts())
            for r in log.records:
                questions.setdefault(r.sample.sample_id, _question(r.sample, r.split))
                rec = _retrieval_record(r, top, metrics)
                results.setdefault(f"{name}/{r.mode}", {})[r.sample.sample_id] = rec
                texts.want(r.sample.namespace, r.sample.evidence_turn_ids, r.sample.evidence_session_ids)
                texts.want(r.sample.namespace, rec["t"], rec["s"])  # type: ignore[arg-type]
        elif fmt == QA_LOG_FORMAT:
            qa = read_qa_log(run_dir / QA_LOG_NAME)
            dataset, config = dict(qa.header.dataset), dict(qa.header.config)
            system = f"{name}/qa"
            run = {"kind": "qa", "systems": [system], "columns": QA_COLUMNS}
            run["tables"] = {system: _qa_tables(run_dir).get("qa", {})}
            texts = wanted.setdefault(_dataset_key(dataset), _Texts())
            for a in qa.records:
                questions.setdefault(a.sample.sample_id, _question(a.sample, None))
                results.setdefault(system, {})[a.sample.sample_id] = _qa_record(a)
                texts.want(a.sample.namespace, a.sample.evidence_turn_ids, a.sample.evidence_session_ids)
        else:
            raise ValidationError(f"not a run log memlane knows (format {fmt!r})", where=str(run_dir))
        run.update({"name": name, "path": str(run_dir), "dataset": dataset, "config": config, "plot": _plot(run_dir)})
        runs.append(run)
    for by_question in results.values():
        for rec in by_question.values():
            m = rec.get("m")
            if isinstance(m, list) and len(m) < len(metrics):  # a figure only some questions carry
                m.extend([None] * (len(metrics) - len(m)))
    turns: dict[str, list[str]] = {}
    sessions: dict[str, list[str | None]] = {}
    for key, texts in wanted.items():
        note = _read_texts(key, texts, data_dir, turns, sessions)
        if note:
            notes.append(note)
    return {"runs": runs, "questions": questions, "results": results, "turns": turns, "sessions": sessions,
            "metrics": metrics, "notes": notes, "top": top}  # fmt: skip


def _unique_names(run_dirs: Sequence[Path]) -> list[str]:
    names: list[str] = []
    for d in run_dirs:
        base = Path(d).resolve().name or "run"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def _jsonable(config: object) -> dict[str, object]:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(config) and not isinstance(config, type):
        return json.loads(json.dumps(asdict(config), default=str))  # type: ignore[no-any-return]
    return dict(config) if isinstance(config, dict) else {}


def _dataset_key(dataset: dict[str, object]) -> tuple[str, str, int, int]:
    params = dataset.get("params") or {}
    assert isinstance(params, dict)
    return (
        str(dataset.get("name")),
        str(dataset.get("sha256")),
        int(params.get("size", 0)),
        int(params.get("seed", 0)),
    )


def _read_texts(
    key: tuple[str, str, int, int],
    texts: _Texts,
    data_dir: Path | None,
    turns: dict[str, list[str]],
    sessions: dict[str, list[str | None]],
) -> str | None:
    """Fill ``turns`` (``"<namespace>|<turn id>"`` -> [speaker, text]) and ``sessions`` (-> [date, first
    words]) from the data set; a note when it cannot be read or is not the file the runs used."""
    name, sha256, size, seed = key
    try:
        stream = open_dataset(name, data_dir, **({"size": size, "seed": seed} if size else {}))
        if stream.sha256() != sha256:
            return f"{name}: the data set found here is not the one the runs used (sha256 {sha256[:12]}...): ids only"
        for haystack in stream:
            if haystack.namespace in texts.turns or haystack.namespace in texts.sessions:
                _take(haystack, texts, turns, sessions)
    except (DatasetNotFound, MemlaneError) as exc:
        return f"{name}: texts not shown ({exc})"
    return None


def _take(h: Haystack, texts: _Texts, turns: dict[str, list[str]], sessions: dict[str, list[str | None]]) -> None:
    want_turns = texts.turns.get(h.namespace, set())
    want_sessions = texts.sessions.get(h.namespace, set())
    for s in h.sessions:
        if s.session_id in want_sessions:
            first = " ".join(f"{t.role}: {t.content}" for t in s.turns[:2])
            date = s.started_at.isoformat() if s.started_at else None
            sessions[f"{h.namespace}|{s.session_id}"] = [date, first[:TEXT_CHARS]]
        for t in s.turns:
            if t.turn_id in want_turns:
                text = t.content + (f" [shared {t.image_caption}]" if t.image_caption else "")
                turns[f"{h.namespace}|{t.turn_id}"] = [t.role, text[:TEXT_CHARS]]
