"""Append-only columns for the cached per-user indexes: an add extends the cached copy in place.

A search index cached per user (:class:`memlane.core.store.candidates.vectors.UserMatrix`,
:class:`memlane.core.store.candidates.terms.UserTerms`) is extended by each of the process's own writes instead of being
reloaded. Extending by concatenation copies the whole user at every add: 23 of the 36 ms of an add (and
the search after it) into a 300k-key user, and most of an add's 115 ms at 1M keys. Here each array lives in
a buffer with room to grow (a quarter more than it holds, so every key is copied a few times over the
user's life, not once per add), and the next version of the index is a longer view of the same buffer.

Readers keep their versions: a version's arrays are views of the buffer's first ``n`` rows, and an append
writes only past the rows the buffer had handed out (``used``). A buffer is extended in place by the one
version that ends at ``used``; any other (an older version appended to again) gets a copy.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

GROWTH = 1.25  # capacity after a copy: this many times the rows held
MIN_ROOM = 64  # and at least this many rows of room


class Column:
    """One array's buffer and how many of its rows some version has handed out."""

    __slots__ = ("buffer", "lock", "used")

    def __init__(self, buffer: npt.NDArray[Any], used: int) -> None:
        self.buffer = buffer
        self.used = used
        self.lock = threading.Lock()


def extended(
    current: npt.NDArray[Any], column: Column | None, extra: npt.NDArray[Any]
) -> tuple[npt.NDArray[Any], Column]:
    """``current`` followed by ``extra`` (same trailing shape), and the column it now lives in: written
    into ``column``'s room when ``current`` is its last version, else copied into a new, larger buffer."""
    n, k = current.shape[0], extra.shape[0]
    if column is not None:
        with column.lock:
            buffer = column.buffer
            if column.used == n and buffer.shape[0] >= n + k and buffer.shape[1:] == extra.shape[1:]:
                buffer[n : n + k] = extra
                column.used = n + k
                return buffer[: n + k], column
    capacity = max(n + k + MIN_ROOM, int((n + k) * GROWTH))
    buffer = np.empty((capacity, *current.shape[1:]), dtype=current.dtype)
    buffer[:n] = current
    buffer[n : n + k] = extra
    return buffer[: n + k], Column(buffer, n + k)


def extended_all(
    current: Mapping[str, npt.NDArray[Any]], columns: Mapping[str, Column], extra: Mapping[str, npt.NDArray[Any]]
) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Column]]:
    """:func:`extended` for each named array of an index: the new arrays and the columns they live in."""
    arrays: dict[str, npt.NDArray[Any]] = {}
    grown: dict[str, Column] = {}
    for name, array in current.items():
        arrays[name], grown[name] = extended(array, columns.get(name), extra[name])
    return arrays, grown


def capacity_bytes(arrays: dict[str, npt.NDArray[Any]], columns: dict[str, Column]) -> int:
    """The memory the arrays hold: their buffers' whole capacity where they live in a column."""
    return int(sum(columns[name].buffer.nbytes if name in columns else a.nbytes for name, a in arrays.items()))
