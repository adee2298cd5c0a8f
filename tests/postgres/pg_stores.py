"""What the PostgreSQL tests' store fixtures give: a maker of fresh stores (its keyword arguments go to
:class:`PostgresStore`). Kept out of ``conftest.py``, which pytest may load under the same module name as
another folder's conftest."""

from __future__ import annotations

from collections.abc import Callable

from memlane.core.store.postgres.store import PostgresStore

NewStore = Callable[..., PostgresStore]
