"""The README's recipe that loads LoCoMo into a store of one's own runs as written (with the hashing
embedder, for speed) and gives one user per conversation, every one of its turns stored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlane.bench.datasets.registry import open_dataset
from memlane.core.memory import Memory

README = Path(__file__).parents[2] / "README.md"


def test_the_readmes_locomo_recipe_makes_a_normal_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    recipe = next(b for b in blocks if 'open_dataset("locomo")' in b)
    assert 'Memory.open("locomo.db")' in recipe
    monkeypatch.chdir(tmp_path)
    exec(recipe.replace('Memory.open("locomo.db")', 'Memory.open("locomo.db", embedder="hashing")'), {})
    conversations = list(open_dataset("locomo"))
    mem = Memory.open(tmp_path / "locomo.db", embedder="hashing")
    try:
        users = {u.name: u.blocks for u in mem.users()}
        assert sorted(users) == sorted(c.namespace for c in conversations) and len(users) == 10
        first = conversations[0]
        sessions = {b.session_id for b in mem.list(first.namespace, limit=10_000)}
        assert sessions == {s.session_id for s in first.sessions}
        assert mem.search(first.namespace, first.samples[0].question, k=3)
    finally:
        mem.close()
