"""The versioned log of a QA run: ``log.jsonl`` in the run folder. Every other output is computed from it.

* line 1, ``"type": "header"``: format, the resolved :class:`~memlane.bench.qa.runconfig.QAConfig`, the
  data set (name, sha256, file, parameters), the bench store searched (key, settings, counts; ``null`` for
  full context), git revision, package versions, creation time;
* a ``"type": "segment"`` line per invocation: start time, git revision, concurrency, what its ingest did;
* one ``"type": "answer"`` line per question: the question with its gold answer, the context shown (kind,
  estimated tokens, retrieved block ids and scores, retrieval scores, or the full-context truncation
  record), the answer, the hypothesis scored (the answer, or for a LoCoMo category-5 letter the option it
  names), the judge's verdict, the scores, every failure, every call's usage and per-stage latency.

Resume: a cut-off last line is dropped and questions already logged are not asked again (with
``retry_failed``, those whose record has an error are, and the newer record supersedes the older). A log
with another config or data set is refused.
"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memlane.bench.datasets.model import Sample
from memlane.bench.qa.records import CallUsage
from memlane.bench.retrieval.runlog import (
    git_revision,
    open_segment,
    package_versions,
    read_lines,
    sample_from_json,
    sample_to_json,
)
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.timefmt import now_utc

QA_LOG_FORMAT = "memlane-bench-qa-log/1"
QA_LOG_NAME = "log.jsonl"
QA_PACKAGES = ("nltk", "httpx", "regex")
"""Packages that shape QA results beyond the retrieval log's list (BLEU tokenizer, stemmer, client)."""


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise ValidationError(f"expected a JSON object, got {type(value).__name__}", where=where)
    return value


def _optional_object(value: object, where: str) -> dict[str, object] | None:
    return None if value is None else _object(value, where)


@dataclass(frozen=True)
class QAHeader:
    """The first line of a QA log."""

    config: dict[str, object]
    dataset: dict[str, object]
    store: dict[str, object] | None
    git_revision: str
    packages: dict[str, str]
    created_at: str
    format: str = QA_LOG_FORMAT

    def to_json(self) -> dict[str, object]:
        """The header line's object."""
        return {
            "type": "header",
            "format": self.format,
            "config": self.config,
            "dataset": self.dataset,
            "store": self.store,
            "git_revision": self.git_revision,
            "packages": self.packages,
            "created_at": self.created_at,
        }

    @classmethod
    def new(cls, config: dict[str, object], dataset: dict[str, object], store: dict[str, object] | None) -> QAHeader:
        """A header stamped with the git revision, package versions and time. ``config`` is normalised
        through JSON, so it compares equal to the same config read back from a log."""
        packages = package_versions()
        for name in QA_PACKAGES:
            try:
                packages[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                packages[name] = "not installed"
        normal = json.loads(json.dumps(config))
        return cls(normal, dataset, store, git_revision(), packages, now_utc().isoformat())

    @classmethod
    def from_json(cls, obj: dict[str, object], where: str) -> QAHeader:
        """Parse a header line."""
        packages = _object(obj.get("packages"), f"{where}: packages")
        return cls(
            config=_object(obj.get("config"), f"{where}: config"),
            dataset=_object(obj.get("dataset"), f"{where}: dataset"),
            store=_optional_object(obj.get("store"), f"{where}: store"),
            git_revision=str(obj.get("git_revision")),
            packages={str(k): str(v) for k, v in packages.items()},
            created_at=str(obj.get("created_at")),
            format=str(obj.get("format")),
        )


@dataclass(frozen=True)
class AnswerRecord:
    """One question answered and scored (see the module docstring for each part).

    ``index`` is the question's position in the data set (reports are in that order, whatever order the
    concurrent calls finished in). ``scores`` maps every metric to its value, ``None`` where a stage failed.
    ``errors`` holds the failures as JSON objects (``stage``, ``error``, ``message``, ...); ``calls`` the
    ``(stage, usage)`` of every LLM call made for the question.
    """

    index: int
    sample: Sample
    context: dict[str, object]
    answer: dict[str, object] | None
    hypothesis: str | None
    verdict: dict[str, object] | None
    scores: dict[str, float | None]
    errors: list[dict[str, object]] = field(default_factory=list)
    calls: list[tuple[str, CallUsage]] = field(default_factory=list)
    latency_ms: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when any stage failed (the question is counted as failed, never as a zero)."""
        return bool(self.errors)

    def to_json(self) -> dict[str, object]:
        """The record's JSON line object."""
        return {
            "type": "answer",
            "index": self.index,
            "sample": sample_to_json(self.sample),
            "context": self.context,
            "answer": self.answer,
            "hypothesis": self.hypothesis,
            "verdict": self.verdict,
            "scores": self.scores,
            "errors": self.errors,
            "calls": [[stage, usage.to_json()] for stage, usage in self.calls],
            "latency_ms": {k: round(v, 3) for k, v in self.latency_ms.items()},
        }

    @classmethod
    def from_json(cls, obj: dict[str, object], where: str) -> AnswerRecord:
        """Parse an answer line."""
        scores = _object(obj.get("scores"), f"{where}: scores")
        errors = obj.get("errors", [])
        calls = obj.get("calls", [])
        latency = _object(obj.get("latency_ms", {}), f"{where}: latency_ms")
        if not isinstance(errors, list) or not isinstance(calls, list):
            raise ValidationError("errors and calls must be lists", where=where)
        hypothesis = obj.get("hypothesis")
        parsed_calls: list[tuple[str, CallUsage]] = []
        for call in calls:
            if not isinstance(call, list) or len(call) != 2:
                raise ValidationError("a call must be [stage, usage]", where=where)
            usage = _object(call[1], f"{where}: call usage")
            parsed_calls.append((str(call[0]), CallUsage(**usage)))  # type: ignore[arg-type]
        return cls(
            index=int(str(obj["index"])),
            sample=sample_from_json(_object(obj["sample"], f"{where}: sample")),
            context=_object(obj.get("context"), f"{where}: context"),
            answer=_optional_object(obj.get("answer"), f"{where}: answer"),
            hypothesis=None if hypothesis is None else str(hypothesis),
            verdict=_optional_object(obj.get("verdict"), f"{where}: verdict"),
            scores={str(k): None if v is None else float(str(v)) for k, v in scores.items()},
            errors=[_object(e, f"{where}: error") for e in errors],
            calls=parsed_calls,
            latency_ms={str(k): float(str(v)) for k, v in latency.items()},
        )


@dataclass(frozen=True)
class QALogContents:
    """A parsed QA log: header, segments, and the latest record of every question in data-set order."""

    header: QAHeader
    records: list[AnswerRecord]
    segments: list[dict[str, object]]


def read_qa_log(path: Path) -> QALogContents:
    """Read a QA log (a cut-off last line is ignored; a later record of a question supersedes an earlier)."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError("QA run log not found", where=str(path))
    header: QAHeader | None = None
    latest: dict[str, AnswerRecord] = {}
    segments: list[dict[str, object]] = []
    for lineno, obj in read_lines(path):
        where = f"{path}:{lineno}"
        kind = obj.get("type")
        try:
            if kind == "header":
                if header is not None:
                    raise ValidationError("second header line", where=where)
                if obj.get("format") != QA_LOG_FORMAT:
                    raise ValidationError(f"unsupported QA log format {obj.get('format')!r}", where=where)
                header = QAHeader.from_json(obj, where)
            elif kind == "segment":
                segments.append(obj)
            elif kind == "answer":
                if header is None:
                    raise ValidationError("record before the header", where=where)
                record = AnswerRecord.from_json(obj, where)
                latest[record.sample.sample_id] = record
            else:
                raise ValidationError(f"unknown record type {kind!r}", where=where)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(f"malformed record: {exc!r}", where=where) from None
    if header is None:
        raise ValidationError("empty QA run log (no header)", where=str(path))
    return QALogContents(header, sorted(latest.values(), key=lambda r: r.index), segments)


class QALog:
    """Append-only writer of a QA log; :meth:`open` resumes an existing one. Written from one thread."""

    def __init__(self, path: Path, header: QAHeader, done: set[str], handle: IO[str]) -> None:
        self.path = path
        self.header = header
        self.done = done
        self._handle = handle

    @classmethod
    def open(cls, run_dir: Path, header: QAHeader, segment: dict[str, object], *, retry_failed: bool = False) -> QALog:
        """Start a log in ``run_dir`` or resume the one there (same config and data set, else ConfigError).

        ``done`` holds the questions not to ask again: all logged ones, or with ``retry_failed`` those
        whose latest record has no error."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / QA_LOG_NAME
        done: set[str] = set()
        if path.is_file() and path.stat().st_size > 0:
            old = read_qa_log(path)
            before, now = old.header.config, header.config
            if before != now or old.header.dataset.get("sha256") != header.dataset.get("sha256"):
                changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
                raise ConfigError(
                    f"{path} holds a QA run with other settings or data (differs in: "
                    f"{', '.join(changed) or 'data set sha256'}); choose another --out"
                )
            done = {r.sample.sample_id for r in old.records if not (retry_failed and r.failed)}
            header = old.header
            handle = open_segment(path, None, segment)
        else:
            handle = open_segment(path, header.to_json(), segment)
        return cls(path, header, done, handle)

    def write(self, record: AnswerRecord) -> None:
        """Append one record, flushed: a crash loses at most the line being written."""
        self._handle.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        self._handle.flush()
        self.done.add(record.sample.sample_id)

    def close(self) -> None:
        self._handle.close()
