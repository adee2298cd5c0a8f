"""The versioned run log of a retrieval run: ``log.jsonl`` in the run folder.

Line 1 is the header (``"type": "header"``): the log format, the full resolved config, the data set
(name, sha256, file name, parameters), the bench store it searched (key, ingest settings, ingest figures),
the git revision and the package versions. Every further line is one question in one mode
(``"type": "question"``): the question with its gold evidence, the retrieved block ids with scores, the
session and turn rankings (how much of each came from retrieval), the per-stage latency, the scores and
the error, if any. Reports are computed from this file alone.

A run resumes from an incomplete log: a cut-off last line is dropped, and questions already logged in a
mode are not asked again. The header of the existing log must match the new run's, so one log never
mixes settings.

A finished run's log is gzipped (``log.jsonl.gz``, about a sixth of the size: a LoCoMo run with the
baselines logs 65 MB): :func:`pack_log`. Every reader takes either form, and a run that goes on in the same
folder unpacks it first.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from memlane.bench.datasets.model import Sample
from memlane.core.embedding.protocol import Embedder
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.timefmt import now_utc

# Defaults of a retrieval run (``bench retrieval`` and ``bench baselines``).
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20, 30, 50)
# minilm at 256 tokens cannot ingest LongMemEval-S in the 15-minute budget on 2 cores; 128 tokens can
# (docs/bench/retrieval.md has the measurements and the recall difference).
DEFAULT_EMBEDDER = "minilm-128"
# The contract: exported rankings are at least this long (or the whole haystack).
MIN_RANKING_LENGTH = 50

LOG_FORMAT = "memlane-bench-retrieval-log/1"
LOG_NAME = "log.jsonl"
PACKED_SUFFIX = ".gz"
PACKAGES = ("memlane", "numpy", "onnxruntime", "tokenizers", "ijson", "click", "tqdm", "matplotlib")


@dataclass(frozen=True)
class RetrievalConfig:
    """The resolved settings of a retrieval run (no paths: a log must not depend on the machine).

    ``depth`` is the number of blocks retrieved per question; ``min_length`` the length every exported
    ranking is padded to (or the whole haystack). ``perspective`` and ``embedder`` are resolved names.
    """

    dataset: str
    modes: tuple[str, ...]
    ks: tuple[int, ...]
    limit: int | None
    depth: int
    min_length: int
    before_question_date: bool
    perspective: str
    embedder: str
    embedder_model_id: str
    extraction: str = "off"
    dataset_params: dict[str, int | str] = field(default_factory=dict)
    search_settings: dict[str, dict[str, object]] = field(default_factory=dict)
    per_category: int | None = None  # only the first N questions of each category were asked

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> RetrievalConfig:
        """Inverse of ``asdict``."""
        data = dict(obj)
        data["modes"] = tuple(_str_list(data["modes"]))
        ks = data["ks"]
        assert isinstance(ks, list)
        data["ks"] = tuple(int(k) for k in ks)
        return cls(**data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunHeader:
    """The first line of a run log."""

    config: RetrievalConfig
    dataset: dict[str, object]
    store: dict[str, object]
    git_revision: str
    packages: dict[str, str]
    created_at: str
    format: str = LOG_FORMAT

    def to_json(self) -> dict[str, object]:
        """The header line's JSON object."""
        return {"type": "header"} | asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> RunHeader:
        """Parse a header line (see :meth:`to_json`)."""
        data = {k: v for k, v in obj.items() if k != "type"}
        config = data.pop("config")
        assert isinstance(config, dict)
        return cls(config=RetrievalConfig.from_json(config), **data)  # type: ignore[arg-type]


def _str_list(value: object) -> list[str]:
    if not isinstance(value, list):
        raise ValidationError(f"expected a list, got {type(value).__name__}")
    return [str(v) for v in value]


def sample_to_json(sample: Sample) -> dict[str, object]:
    """A sample as logged (question, gold answer, category, evidence)."""
    out = asdict(sample)
    out["question_date"] = sample.question_date.isoformat() if sample.question_date else None
    return out


def sample_from_json(obj: dict[str, object]) -> Sample:
    """Inverse of :func:`sample_to_json`."""
    data = dict(obj)
    date = data.get("question_date")
    data["question_date"] = datetime.fromisoformat(date) if isinstance(date, str) else None
    for key in ("evidence_session_ids", "evidence_turn_ids", "user_evidence_turn_ids", "raw_evidence"):
        data[key] = tuple(_str_list(data.get(key, [])))
    return Sample(**data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class QuestionRecord:
    """One question answered by retrieval in one mode.

    ``hits`` are the top retrieved blocks (id, score), best first; ``ranked_*`` the exported rankings,
    whose first ``retrieved_*`` entries came from the search (the rest is padding in haystack order).
    ``scores`` is ``None`` when the question is not scored (LongMemEval abstention, no evidence).
    ``split`` is the question's side of the dev/test split (:mod:`memlane.bench.split`); logs written
    before splits existed have none.
    """

    mode: str
    sample: Sample
    hits: tuple[tuple[str, float], ...]
    ranked_session_ids: tuple[str, ...]
    ranked_turn_ids: tuple[str, ...]
    retrieved_sessions: int
    retrieved_turns: int
    latency_ms: dict[str, float]
    scores: dict[str, float] | None
    error: str | None = None
    split: str | None = None

    def to_json(self) -> dict[str, object]:
        """The record's JSON line object."""
        return {
            "type": "question",
            "mode": self.mode,
            "sample": sample_to_json(self.sample),
            "hits": [[block_id, round(score, 6)] for block_id, score in self.hits],
            "ranked_session_ids": list(self.ranked_session_ids),
            "ranked_turn_ids": list(self.ranked_turn_ids),
            "retrieved_sessions": self.retrieved_sessions,
            "retrieved_turns": self.retrieved_turns,
            "latency_ms": {k: round(v, 3) for k, v in self.latency_ms.items()},
            "scores": self.scores,
            "error": self.error,
            "split": self.split,
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> QuestionRecord:
        """Parse a question line (see :meth:`to_json`)."""
        sample = obj["sample"]
        hits = obj["hits"]
        latency = obj["latency_ms"]
        scores = obj["scores"]
        assert isinstance(sample, dict) and isinstance(hits, list) and isinstance(latency, dict)
        assert scores is None or isinstance(scores, dict)
        error = obj.get("error")
        return cls(
            mode=str(obj["mode"]),
            sample=sample_from_json(sample),
            hits=tuple((str(h[0]), float(h[1])) for h in hits),
            ranked_session_ids=tuple(_str_list(obj["ranked_session_ids"])),
            ranked_turn_ids=tuple(_str_list(obj["ranked_turn_ids"])),
            retrieved_sessions=int(str(obj["retrieved_sessions"])),
            retrieved_turns=int(str(obj["retrieved_turns"])),
            latency_ms={str(k): float(v) for k, v in latency.items()},
            scores=None if scores is None else {str(k): float(v) for k, v in scores.items()},
            error=None if error is None else str(error),
            split=None if obj.get("split") is None else str(obj.get("split")),
        )


def git_revision() -> str:
    """``git rev-parse HEAD`` of the source tree this package runs from, or ``"unknown"``."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and rev else "unknown"


def package_versions() -> dict[str, str]:
    """Versions of memlane and the packages that shape its results, plus Python and the platform."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def log_file(path: Path) -> Path:
    """``path`` (a ``log.jsonl``) if it exists, else its packed form ``log.jsonl.gz`` if that exists."""
    packed = path.with_name(path.name + PACKED_SUFFIX)
    return packed if not path.is_file() and packed.is_file() else path


def pack_log(path: Path) -> Path:
    """Gzip the finished log at ``path`` into ``<path>.gz`` (written aside, then renamed) and remove the
    plain file; returns the packed path. A crash leaves the plain log, or both (readers take the plain)."""
    packed = path.with_name(path.name + PACKED_SUFFIX)
    tmp = packed.with_name(packed.name + ".tmp")
    with path.open("rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, packed)
    path.unlink()
    return packed


def unpack_log(path: Path) -> None:
    """Undo :func:`pack_log` so that ``path`` can be appended to (nothing to do if it is not packed)."""
    packed = path.with_name(path.name + PACKED_SUFFIX)
    if not packed.is_file():
        return
    if not path.is_file():
        tmp = path.with_name(path.name + ".tmp")
        with gzip.open(packed, "rb") as src, tmp.open("wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, path)
    packed.unlink()


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(PACKED_SUFFIX):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_lines(path: Path) -> Iterator[tuple[int, dict[str, object]]]:
    """The JSON objects of a JSONL log (plain or gzipped) with their line numbers; a last line cut off by a
    crash is ignored."""
    path = log_file(path)
    with _open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.endswith("\n"):
                return  # cut off by a crash: the record was never completed
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"invalid JSON: {exc.msg}", where=f"{path}:{lineno}") from None
            if not isinstance(obj, dict):
                raise ValidationError("expected a JSON object", where=f"{path}:{lineno}")
            yield lineno, obj


@dataclass(frozen=True)
class LogContents:
    """A parsed run log. ``segments`` has one entry per invocation that wrote to it (start time, git
    revision, what its ingest did), so a resumed run shows every code revision it ran under.
    ``calibrations`` are the machine's reference timings taken during the run (:class:`Calibration`)."""

    header: RunHeader
    records: list[QuestionRecord]
    segments: list[dict[str, object]]
    calibrations: list[Calibration] = field(default_factory=list)


@dataclass(frozen=True)
class Calibration:
    """A reference timing of the machine, logged between question records: the p50 of embedding a fixed
    set of texts one at a time, taken when ``records`` question records were in the log. Search latency
    moves with the machine (a shared host here slowed by 2x for minutes); a run's search times compare
    with another run's only where their calibrations agree."""

    records: int
    embed_ms_p50: float
    at: str

    def to_json(self) -> dict[str, object]:
        return {
            "type": "calibration",
            "records": self.records,
            "embed_ms_p50": round(self.embed_ms_p50, 3),
            "at": self.at,
        }

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> Calibration:
        records, ms = obj["records"], obj["embed_ms_p50"]
        assert isinstance(records, int) and isinstance(ms, int | float) and records >= 0 and ms >= 0
        return cls(records=records, embed_ms_p50=float(ms), at=str(obj["at"]))


def read_log(path: Path) -> LogContents:
    """The header, segments and complete records of a run log, plain or packed (a cut-off last line is
    ignored)."""
    path = log_file(Path(path))
    if not path.is_file():
        raise ValidationError("run log not found", where=str(path))
    header: RunHeader | None = None
    records: list[QuestionRecord] = []
    segments: list[dict[str, object]] = []
    calibrations: list[Calibration] = []
    for lineno, obj in read_lines(path):
        where = f"{path}:{lineno}"
        try:
            if obj.get("type") == "header":
                if header is not None:
                    raise ValidationError("second header line", where=where)
                if obj.get("format") != LOG_FORMAT:
                    raise ValidationError(f"unsupported log format {obj.get('format')!r}", where=where)
                header = RunHeader.from_json(obj)
            elif obj.get("type") == "segment":
                segments.append(obj)
            elif obj.get("type") == "question":
                if header is None:
                    raise ValidationError("record before the header", where=where)
                records.append(QuestionRecord.from_json(obj))
            elif obj.get("type") == "calibration":
                calibrations.append(Calibration.from_json(obj))
            else:
                raise ValidationError(f"unknown record type {obj.get('type')!r}", where=where)
        except (AssertionError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(f"malformed record: {exc!r}", where=where) from None
    if header is None:
        raise ValidationError("empty run log (no header)", where=str(path))
    return LogContents(header, records, segments, calibrations)


class RunLog:
    """Append-only writer of a run log. Open with :meth:`open`, which resumes an existing log."""

    def __init__(self, path: Path, header: RunHeader, done: set[tuple[str, str]], handle: IO[str]) -> None:
        self.path = path
        self.header = header
        self.done = done  # one entry per question record in the log (a record is never written twice)
        self._handle = handle

    @classmethod
    def open(cls, run_dir: Path, header: RunHeader, segment: dict[str, object]) -> RunLog:
        """Start a log in ``run_dir``, or resume the one there if its config and data set match.

        ``segment`` (what this invocation's ingest did) is logged with the start time and git revision."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / LOG_NAME
        unpack_log(path)
        done: set[tuple[str, str]] = set()
        if path.is_file() and path.stat().st_size > 0:
            contents = read_log(path)
            old = contents.header
            if old.config != header.config or old.dataset.get("sha256") != header.dataset.get("sha256"):
                raise ConfigError(
                    f"{path} holds a run with other settings or data; choose another --out "
                    f"(existing: {asdict(old.config)}; new: {asdict(header.config)})"
                )
            done = {(r.mode, r.sample.sample_id) for r in contents.records}
            header = old
            handle = open_segment(path, None, segment)
        else:
            handle = open_segment(path, header.to_json(), segment)
        return cls(path, header, done, handle)

    def write(self, record: QuestionRecord) -> None:
        """Append one record (flushed, so a crash loses at most the line being written)."""
        self._handle.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
        self._handle.flush()
        self.done.add((record.mode, record.sample.sample_id))

    def calibrate(self, embed_ms_p50: float) -> Calibration:
        """Append a calibration taken now, placed after the records written so far."""
        cal = Calibration(records=len(self.done), embed_ms_p50=embed_ms_p50, at=now_utc().isoformat())
        self._handle.write(json.dumps(cal.to_json()) + "\n")
        self._handle.flush()
        return cal

    def close(self) -> None:
        self._handle.close()


# Calibration: fixed question-like texts embedded one at a time, every CALIBRATE_EVERY questions of a run.
CALIBRATION_TEXTS = (
    "What was the name of the restaurant I went to with my sister last month?",
    "How many days did I spend in Japan in total across my two trips?",
    "What is my current favourite running shoe brand?",
    "When did I start learning the violin?",
    "Which museum did we visit on the second day of the trip to Lisbon?",
    "How much did I pay for the new laptop?",
    "What did my manager say about the quarterly report?",
    "Where does my friend Ana live now?",
    "What breed is the dog I adopted last weekend?",
    "Did I book the dentist appointment for Tuesday or Thursday?",
)
CALIBRATE_EVERY = 100


def calibrate(embedder: Embedder) -> float:
    """The p50 in ms of embedding each of :data:`CALIBRATION_TEXTS` alone (after one warm-up run)."""
    embedder.embed([CALIBRATION_TEXTS[0]])
    times = []
    for text in CALIBRATION_TEXTS:
        started = time.perf_counter()
        embedder.embed([text])
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _drop_partial_line(path: Path) -> None:
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        with path.open("r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def open_segment(path: Path, header: Mapping[str, object] | None, segment: Mapping[str, object]) -> IO[str]:
    """Open a JSONL run log for a new segment: a new log (``header`` given) starts with the header line; an
    old one (``header`` None) loses a partial last line left by a crash and is appended to. Either way the
    segment line (start time, git revision and ``segment``) is written and flushed."""
    if header is None:
        _drop_partial_line(path)
        handle = path.open("a", encoding="utf-8")
    else:
        handle = path.open("w", encoding="utf-8")
        handle.write(json.dumps(header, ensure_ascii=False) + "\n")
    stamp = {"type": "segment", "started_at": now_utc().isoformat(), "git_revision": git_revision()}
    handle.write(json.dumps(stamp | dict(segment), ensure_ascii=False) + "\n")
    handle.flush()
    return handle


def new_header(config: RetrievalConfig, dataset: dict[str, object], store: dict[str, object]) -> RunHeader:
    """A header for a new run, stamped with the git revision, package versions and time."""
    return RunHeader(
        config=config,
        dataset=dataset,
        store=store,
        git_revision=git_revision(),
        packages=package_versions(),
        created_at=now_utc().isoformat(),
    )
