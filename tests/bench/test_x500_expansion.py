"""The longmemeval-s-x500 haystack expansion, on generated S-schema data."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from bench_synth import filler_session, make_questions, write_json

from memlane.bench.datasets.expansion import expand_haystacks, filler_pool, grow_haystack
from memlane.bench.datasets.longmemeval import iter_longmemeval
from memlane.bench.datasets.model import Haystack
from memlane.core.errors import ValidationError


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> list[Haystack]:
    path = write_json(
        tmp_path_factory.mktemp("x") / "s.json.xz",
        make_questions(30, n_sessions=12, n_fillers=300),
    )
    return list(iter_longmemeval(path))


@pytest.fixture(scope="module")
def grown(base: list[Haystack]) -> list[Haystack]:
    return list(expand_haystacks(base, size=60, seed=1))


def test_every_haystack_reaches_the_size(grown: list[Haystack]) -> None:
    assert [len(h.sessions) for h in grown] == [60] * 30


def test_no_duplicate_session_ids(grown: list[Haystack]) -> None:
    for h in grown:
        ids = [s.session_id for s in h.sessions]
        assert len(ids) == len(set(ids))


def test_originals_and_samples_kept(base: list[Haystack], grown: list[Haystack]) -> None:
    for before, after in zip(base, grown, strict=True):
        assert set(before.sessions) <= set(after.sessions)
        assert before.samples == after.samples


def test_no_evidence_session_added(base: list[Haystack], grown: list[Haystack]) -> None:
    all_evidence = {e for h in base for s in h.samples for e in s.evidence_session_ids}
    for before, after in zip(base, grown, strict=True):
        own = {s.session_id for s in before.sessions}
        added = [s for s in after.sessions if s.session_id not in own]
        assert len(added) == 48
        for s in added:
            assert not s.session_id.startswith("answer_")
            assert s.session_id not in all_evidence
            assert not any(t.has_answer for t in s.turns)


def test_filler_dates_inside_the_haystack_range(base: list[Haystack], grown: list[Haystack]) -> None:
    for before, after in zip(base, grown, strict=True):
        dates = [s.started_at for s in before.sessions if s.started_at is not None]
        low, high = min(dates), max(dates)
        for s in after.sessions:
            assert s.started_at is not None and low <= s.started_at <= high
        starts = [s.started_at for s in after.sessions]
        assert starts == sorted(starts)  # type: ignore[type-var]


def test_deterministic_and_order_independent(base: list[Haystack], grown: list[Haystack]) -> None:
    again = list(expand_haystacks(base, size=60, seed=1))
    assert again == grown
    reversed_run = {h.namespace: h for h in expand_haystacks(list(reversed(base)), size=60, seed=1)}
    assert all(reversed_run[h.namespace] == h for h in grown)
    other_seed = list(expand_haystacks(base, size=60, seed=2))
    assert [h.sessions for h in other_seed] != [h.sessions for h in grown]


def test_fillers_carry_the_pool_content(base: list[Haystack], grown: list[Haystack]) -> None:
    h = grown[0]
    own = {s.session_id for s in base[0].sessions}
    filler = next(s for s in h.sessions if s.session_id not in own)
    assert [t.content for t in filler.turns] == [t["content"] for t in filler_session(filler.session_id)]
    assert filler.turns[0].turn_id == f"{filler.session_id}_1"


def test_evidence_listed_by_another_question_is_never_a_filler(base: list[Haystack]) -> None:
    # A session that some question lists as evidence must stay out of the pool even without the answer_
    # prefix or has_answer flags, although another question has it as a plain filler.
    own = {s.session_id for s in base[0].sessions}
    candidates = [s for s in base[1].sessions if s.session_id not in own]
    victim = next(s for s in candidates if not s.session_id.startswith("answer_"))
    listed = replace(base[0].samples[0], evidence_session_ids=(victim.session_id,))
    haystacks = [Haystack(base[0].namespace, base[0].sessions, (listed,)), *base[1:]]
    assert victim.session_id not in filler_pool(haystacks)
    assert victim.session_id in filler_pool(base)


def test_large_haystack_unchanged_and_small_pool_rejected(base: list[Haystack]) -> None:
    pool = filler_pool(base)
    assert grow_haystack(base[0], pool, size=12, seed=0) is base[0]
    with pytest.raises(ValidationError, match="filler sessions available"):
        list(expand_haystacks(base[:2], size=500))
    with pytest.raises(ValidationError, match="size must be positive"):
        list(expand_haystacks(base, size=0))


def test_registry_x500(tmp_path: Path) -> None:
    from memlane.bench.datasets.registry import open_dataset

    folder = tmp_path / "data" / "longmemeval"
    folder.mkdir(parents=True)
    write_json(folder / "longmemeval_s_cleaned.json.xz", make_questions(12, n_sessions=8, n_fillers=100))
    stream = open_dataset("longmemeval-s-x500", tmp_path / "data", size=40, seed=3)
    ds = stream.load()
    assert ds.name == "longmemeval-s-x500" and ds.params == {"size": 40, "seed": 3}
    assert {len(v) for v in ds.histories.values()} == {40}
    assert ds.sha256 == stream.sha256()
