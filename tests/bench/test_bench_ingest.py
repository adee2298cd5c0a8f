"""Ingest once: a rerun ingests nothing, an interrupted ingest resumes without partial namespaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_runs import make_data_dir, options

from memlane.bench.retrieval.ingest import BenchStore, ingest
from memlane.bench.retrieval.run import open_bench


class Interrupted(Exception):
    pass


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_data_dir(tmp_path)
    return tmp_path


def _ingest(root: Path, **changes: object) -> tuple[BenchStore, dict[str, int]]:
    stream, bench, mem = open_bench(options(root, **changes))
    try:
        report = ingest(stream, bench, mem, progress=False)
        counts = {u.name: u.blocks for u in mem.users()}
    finally:
        bench.close()
    assert report.to_json()["warm"] == report.warm
    return bench, counts | {"__ingested": report.ingested, "__embedded": report.texts_embedded}


def test_second_run_ingests_nothing(root: Path) -> None:
    bench, first = _ingest(root)
    assert first["__ingested"] == 10
    assert first["__embedded"] > 0
    manifest = json.loads(bench.manifest_path.read_text())
    assert manifest["complete"] is True
    assert manifest["samples"] == 10
    assert manifest["totals"]["namespaces"] == 10
    assert manifest["settings"]["perspective"] == "single"
    assert manifest["settings"]["extraction"] == "off"

    again, second = _ingest(root)
    assert again.directory == bench.directory
    assert second["__ingested"] == 0
    assert {k: v for k, v in second.items() if not k.startswith("__")} == {
        k: v for k, v in first.items() if not k.startswith("__")
    }


def test_other_settings_get_their_own_store_but_share_the_embedding_cache(root: Path) -> None:
    single, _ = _ingest(root)
    dual, counts = _ingest(root, perspective="dual")
    assert dual.directory != single.directory
    assert counts["__ingested"] == 10
    # Dual mode cuts exchanges at user turns, as the harness's single mode does: every text is cached.
    assert counts["__embedded"] == 0


def test_interrupted_ingest_resumes_without_duplicates(root: Path) -> None:
    _, clean = _ingest(root, cache_dir=root / "reference")  # an uninterrupted ingest, elsewhere
    done: list[str] = []

    def crash_in_third_namespace(namespace: str, written: int) -> None:
        if namespace not in done:
            done.append(namespace)
        if len(done) == 3 and written >= 2:
            raise Interrupted

    stream, bench, mem = open_bench(options(root))
    try:
        with pytest.raises(Interrupted):
            ingest(stream, bench, mem, progress=False, batch_sessions=1, on_batch=crash_in_third_namespace)
        partial = {u.name: u.blocks for u in mem.users()}
    finally:
        bench.close()
    third = done[2]
    assert third in partial  # half of it is in the store ...
    assert not bench.is_complete(third)  # ... but not in the manifest
    assert len(bench.manifest.namespaces) == 2

    stream, bench, mem = open_bench(options(root))
    try:
        report = ingest(stream, bench, mem, progress=False)
        final = {u.name: u.blocks for u in mem.users()}
        blocks = mem.list(third, limit=10_000)
    finally:
        bench.close()
    assert (report.ingested, report.skipped, report.resumed) == (8, 2, 1)
    assert bench.manifest.complete
    assert final == {k: v for k, v in clean.items() if not k.startswith("__")}
    ids = [(b.session_id, b.message_ids) for b in blocks]
    assert len(ids) == len(set(ids))  # no exchange stored twice


def test_limit_ingests_only_needed_namespaces(root: Path) -> None:
    stream, bench, mem = open_bench(options(root, limit=2))
    try:
        report = ingest(stream, bench, mem, limit=2, progress=False)
    finally:
        bench.close()
    assert report.ingested == 2
    assert not bench.manifest.complete  # a later full run walks the data set again
