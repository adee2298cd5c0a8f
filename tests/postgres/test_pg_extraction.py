"""The extraction suite (tests/core/test_extraction.py) run unchanged on PostgreSQL.

Its tests build stores through two module helpers, ``make_memory`` and ``sql``; here a private copy of that
module gets PostgreSQL versions of both (same tables and columns, so the same SQL), and each of its tests
runs as it is.
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memlane.core.embedding.fake import HashingEmbedder
from memlane.core.llm import ScriptedLLM
from memlane.core.memory import Memory
from memlane.core.store.postgres.store import PostgresStore

pytestmark = pytest.mark.postgres


def _load_suite() -> ModuleType:
    path = Path(__file__).parents[1] / "core" / "test_extraction.py"
    spec = importlib.util.spec_from_file_location("memlane_pg_copy_of_test_extraction", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUITE = _load_suite()
TESTS = {
    name: fn
    for name, fn in vars(SUITE).items()
    if name.startswith("test_") and callable(fn) and "tmp_path" in inspect.signature(fn).parameters
}


@pytest.mark.parametrize("name", sorted(TESTS))
def test_extraction_suite_on_postgres(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, new_server_store: Callable[..., PostgresStore]
) -> None:
    def make_memory(_tmp: Path, _name: str, llm: ScriptedLLM | None = None, **kw: Any) -> Memory:
        return Memory(new_server_store(), HashingEmbedder(), llm=llm, **kw)

    def sql(mem: Memory, query: str) -> list[Any]:
        assert isinstance(mem.store, PostgresStore)
        return mem.store.query(query)

    monkeypatch.setattr(SUITE, "make_memory", make_memory)
    monkeypatch.setattr(SUITE, "sql", sql)
    TESTS[name](tmp_path)
