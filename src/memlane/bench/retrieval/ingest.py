"""Ingest once: one persistent bench store per (data set, ingest settings), reused by every later run.

Layout under the cache directory (``--cache-dir``, ``$MEMLANE_BENCH_CACHE``, default
``<$MEMLANE_CACHE_DIR or ~/.cache/memlane>/bench``)::

    embeddings.db                      shared embedding cache: no text is embedded twice, across data sets
    stores/<dataset>-<key>/store.db    the bench store (durability "normal": a bench store can be rebuilt)
    stores/<dataset>-<key>/manifest.json

``<key>`` hashes the data set (name, sha256 of the source file, derived-set parameters) and the ingest
settings (perspective mode, embedder model id, extraction and its LLM and prompt hash, the harness's
ingest format), so a store is only ever reused for exactly what built it.

Ingest goes namespace by namespace (a LoCoMo conversation, a LongMemEval question). The manifest marks a
namespace complete only after all its blocks are written; a namespace found in the store but not marked
complete (an interrupted ingest) is deleted first and ingested again, so partial namespaces never survive.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm import tqdm

from memlane.bench.datasets.families import Family
from memlane.bench.datasets.model import Haystack, questions
from memlane.bench.datasets.registry import DATASETS, DatasetStream
from memlane.bench.retrieval.history import INGEST_FORMAT, haystack_requests
from memlane.core.embedding.protocol import Embedder
from memlane.core.errors import ConfigError, ValidationError
from memlane.core.memory import Memory
from memlane.core.model import PerspectiveMode
from memlane.core.store.candidates.annsettings import AnnSettings
from memlane.core.store.sqlite import SqliteStore
from memlane.core.timefmt import now_utc
from memlane.settings import bench_cache_from_env

MANIFEST_FORMAT = 1
BENCH_DURABILITY = "normal"
# Sessions per add_many call: large enough to batch the embedder, small enough to bound memory on M.
DEFAULT_BATCH_SESSIONS = 64


def default_bench_cache() -> Path:
    """``$MEMLANE_BENCH_CACHE``, else ``<$MEMLANE_CACHE_DIR or ~/.cache/memlane>/bench`` (read by
    :mod:`memlane.settings`)."""
    return bench_cache_from_env()


@dataclass(frozen=True)
class IngestSettings:
    """Everything that changes what a bench store holds. Extraction is not wired into the harness yet:
    only ``"off"`` is accepted, but it is part of the store key already."""

    perspective: PerspectiveMode
    embedder: str
    embedder_model_id: str
    extraction: str = "off"
    extraction_llm: str | None = None
    extraction_prompt_sha256: str | None = None
    ingest_format: int = INGEST_FORMAT

    def __post_init__(self) -> None:
        if self.extraction != "off":
            raise ConfigError(f"extraction {self.extraction!r} is not supported by the bench ingest yet; use 'off'")

    def to_json(self) -> dict[str, object]:
        """JSON form (the manifest's ``settings``)."""
        out = asdict(self)
        out["perspective"] = self.perspective.value
        return out


@dataclass(frozen=True)
class DatasetIdentity:
    """Which bytes a store was built from: name, sha256 of the source, file name and generation params."""

    name: str
    sha256: str
    file: str
    params: dict[str, int | str] = field(default_factory=dict)

    @classmethod
    def of(cls, stream: DatasetStream) -> DatasetIdentity:
        """Identity of an opened data set (hashes the source file)."""
        return cls(stream.name, stream.sha256(), ", ".join(p.name for p in stream.paths), dict(stream.params))


def dataset_record(stream: DatasetStream) -> dict[str, object]:
    """What a run log records of its data set: the identity, whether the file is the published one
    (``matches``, ``differs`` or ``unlisted``) and which rule found it (``--data-dir``, ``MEMLANE_DATA``,
    ``shipped``)."""
    return asdict(DatasetIdentity.of(stream)) | {"published": stream.verification.status, "origin": stream.origin}


def store_key(dataset: DatasetIdentity, settings: IngestSettings) -> str:
    """16 hex digits naming the store of (data set, settings)."""
    payload = {"dataset": asdict(dataset) | {"file": None}, "settings": settings.to_json()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class IngestReport:
    """What one ingest call did. ``resumed`` counts partial namespaces deleted and ingested again;
    ``warm`` is true when nothing needed ingesting."""

    dataset: str
    key: str
    ingested: int = 0
    skipped: int = 0
    resumed: int = 0
    blocks: int = 0
    exchanges: int = 0
    texts_embedded: int = 0
    seconds: float = 0.0
    namespaces_total: int = 0
    blocks_total: int = 0

    @property
    def warm(self) -> bool:
        return self.ingested == 0

    def to_json(self) -> dict[str, object]:
        """JSON form (for the run log header and ``--json``)."""
        return asdict(self) | {"warm": self.warm, "seconds": round(self.seconds, 3)}


@dataclass
class NamespaceStats:
    """One fully ingested namespace."""

    sessions: int
    requests: int
    exchanges: int
    blocks: int
    texts_embedded: int
    seconds: float


@dataclass
class Manifest:
    """``manifest.json``: what the store holds and how it was built."""

    key: str
    dataset: DatasetIdentity
    settings: dict[str, object]
    created_at: str
    updated_at: str
    complete: bool = False
    samples: int | None = None
    namespaces: dict[str, NamespaceStats] = field(default_factory=dict)
    ingests: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    format: int = MANIFEST_FORMAT

    def totals(self) -> dict[str, float]:
        """Sums over the complete namespaces."""
        entries = list(self.namespaces.values())
        return {
            "namespaces": len(entries),
            "blocks": sum(e.blocks for e in entries),
            "exchanges": sum(e.exchanges for e in entries),
            "texts_embedded": sum(e.texts_embedded for e in entries),
            "seconds": round(sum(e.seconds for e in entries), 3),
        }

    def to_json(self) -> dict[str, object]:
        """JSON form, with the totals for readers of the file."""
        return asdict(self) | {"totals": self.totals()}

    @classmethod
    def from_json(cls, obj: dict[str, object], where: str) -> Manifest:
        """Parse a manifest written by :meth:`to_json`."""
        try:
            data = dict(obj)
            data.pop("totals", None)
            dataset = data.pop("dataset")
            namespaces = data.pop("namespaces")
            assert isinstance(dataset, dict) and isinstance(namespaces, dict)
            return cls(
                dataset=DatasetIdentity(**dataset),
                namespaces={ns: NamespaceStats(**v) for ns, v in namespaces.items()},
                **data,  # type: ignore[arg-type]
            )
        except (AssertionError, KeyError, TypeError) as exc:
            raise ValidationError(f"not a bench manifest: {exc}", where=where) from None


class BenchStore:
    """A bench store and its manifest. Open it with :meth:`open`; ingest with :func:`ingest`."""

    def __init__(self, directory: Path, dataset: DatasetIdentity, settings: IngestSettings, key: str) -> None:
        self.directory = directory
        self.dataset = dataset
        self.settings = settings
        self.key = key
        self.manifest_path = directory / "manifest.json"
        self.manifest = self._load_or_create()
        self._stores: list[SqliteStore] = []

    @classmethod
    def open(cls, cache_dir: Path, dataset: DatasetIdentity, settings: IngestSettings) -> BenchStore:
        """The store of (data set, settings) under ``cache_dir``, created empty if missing."""
        key = store_key(dataset, settings)
        return cls(Path(cache_dir) / "stores" / f"{dataset.name}-{key}", dataset, settings, key)

    @property
    def store_path(self) -> Path:
        return self.directory / "store.db"

    @property
    def embedding_cache_path(self) -> Path:
        return self.directory.parent.parent / "embeddings.db"

    def _load_or_create(self) -> Manifest:
        where = str(self.manifest_path)
        if self.manifest_path.is_file():
            try:
                raw = json.loads(self.manifest_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ValidationError(f"corrupt manifest: {exc}", where=where) from None
            if not isinstance(raw, dict):
                raise ValidationError("not a bench manifest", where=where)
            manifest = Manifest.from_json(raw, where)
            if manifest.key != self.key:
                raise ValidationError("manifest does not belong to this store", where=where)
            return manifest
        created = now_utc().isoformat()
        return Manifest(self.key, self.dataset, self.settings.to_json(), created, created)

    def is_complete(self, namespace: str) -> bool:
        """Whether ``namespace`` was fully ingested."""
        return namespace in self.manifest.namespaces

    def mark_complete(self, namespace: str, stats: NamespaceStats) -> None:
        """Record a fully ingested namespace and save the manifest."""
        self.manifest.namespaces[namespace] = stats
        self.save()

    def save(self) -> None:
        """Write the manifest atomically (temporary file, then rename)."""
        self.manifest.updated_at = now_utc().isoformat()
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.manifest_path.with_name(self.manifest_path.name + ".tmp")
        tmp.write_text(json.dumps(self.manifest.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(self.manifest_path)

    def memory(self, embedder: Embedder, ann: AnnSettings | None = None) -> Memory:
        """A Memory on this store, with the cache directory's shared embedding cache. ``ann``: the store's
        approximate index settings (its default when None)."""
        if embedder.model_id != self.settings.embedder_model_id:
            raise ConfigError(
                f"embedder {embedder.model_id} does not match the store's {self.settings.embedder_model_id}"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        cache = SqliteStore(self.embedding_cache_path, durability=BENCH_DURABILITY)
        store = SqliteStore(self.store_path, durability=BENCH_DURABILITY, ann=ann)
        self._stores += [store, cache]
        return Memory(store, embedder, embedding_cache=cache)

    def close(self) -> None:
        """Close the stores opened by :meth:`memory`."""
        for store in self._stores:
            store.close()
        self._stores.clear()


OnBatch = Callable[[str, int], None]


def _ingest_namespace(
    mem: Memory, haystack: Haystack, family: Family, settings: IngestSettings, batch: int, on_batch: OnBatch | None
) -> tuple[NamespaceStats, list[str]]:
    requests, notes = haystack_requests(haystack, family, settings.perspective)
    start = time.perf_counter()
    misses = mem.embedder.misses
    blocks = exchanges = 0
    # A namespace is written in several transactions; the manifest, not the store, says when it is whole.
    for i in range(0, len(requests), batch):
        for result in mem.add_many(requests[i : i + batch]):
            blocks += len(result.block_ids)
            exchanges += result.exchanges
        if on_batch is not None:
            on_batch(haystack.namespace, min(i + batch, len(requests)))
    stats = NamespaceStats(
        sessions=len(haystack.sessions),
        requests=len(requests),
        exchanges=exchanges,
        blocks=blocks,
        texts_embedded=mem.embedder.misses - misses,
        seconds=round(time.perf_counter() - start, 3),
    )
    return stats, notes


def ingest(
    stream: DatasetStream,
    bench: BenchStore,
    mem: Memory,
    *,
    limit: int | None = None,
    batch_sessions: int = DEFAULT_BATCH_SESSIONS,
    progress: bool = True,
    on_batch: OnBatch | None = None,
) -> IngestReport:
    """Ingest every namespace holding one of the first ``limit`` questions that is not complete yet.

    A store already complete is not read at all (the data set is not even parsed). ``on_batch`` is called
    after each written batch with (namespace, requests written so far): a seam for tests that interrupt an
    ingest half-way through a namespace.
    """
    report = IngestReport(dataset=bench.dataset.name, key=bench.key)
    started = time.perf_counter()
    manifest = bench.manifest
    if not manifest.complete:
        family = DATASETS[bench.dataset.name].family
        present = {u.name for u in mem.users()}
        samples = 0
        known = stream.verification.known
        total = known.namespaces if known is not None and limit is None else None
        bar = tqdm(
            desc=f"ingest {bench.dataset.name} ({family.unit}s)",
            unit=f" {family.unit}",
            total=total,
            disable=not progress,
            leave=False,
        )
        for haystack, _ in questions(stream, limit):
            samples += len(haystack.samples)
            bar.update(1)
            if bench.is_complete(haystack.namespace):
                report.skipped += 1
                continue
            if haystack.namespace in present:
                mem.delete_user(haystack.namespace)
                report.resumed += 1
            stats, notes = _ingest_namespace(mem, haystack, family, bench.settings, batch_sessions, on_batch)
            report.ingested += 1
            report.blocks += stats.blocks
            report.exchanges += stats.exchanges
            report.texts_embedded += stats.texts_embedded
            manifest.notes.extend(notes)
            bench.mark_complete(haystack.namespace, stats)
            bar.set_postfix(blocks=report.blocks, embedded=report.texts_embedded)
        bar.close()
        if not stream.sampled and (limit is None or samples < limit):
            # The whole data set was walked: from now on a rerun need not parse it.
            manifest.complete = True
            manifest.samples = samples
    report.seconds = time.perf_counter() - started
    totals = manifest.totals()
    report.namespaces_total = int(totals["namespaces"])
    report.blocks_total = int(totals["blocks"])
    if report.ingested or report.resumed:
        asked: dict[str, object] = {"at": now_utc().isoformat(), "limit": limit}
        if stream.sampled_per_category is not None:
            asked["per_category"] = stream.sampled_per_category
        if stream.sampled_categories:
            asked["categories"] = list(stream.sampled_categories)
        manifest.ingests.append(asked | report.to_json())
    bench.save()
    return report
