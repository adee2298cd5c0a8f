"""Deleted vectors out of the approximate index's files (:mod:`memlane.core.store.sqlite.ann`).

An HNSW graph keeps every node it was built with; hnswlib's ``mark_deleted`` only hides a node from
answers and keeps its vector, and a graph is rebuilt only once a fifth of its keys are deleted. So the
vector of a deleted, updated or expired text would stay in the index file, where anyone who can read
the file can read it back (its cosine with the text's embedding is 1) and confirm what was said.

Instead, the vector of a node none of whose keys is alive any more is overwritten with zeros in every
index file of its user, in place (``pwrite`` at its offset, then ``fdatasync`` when the store's durability
is "full"). The graph's links stay: a
zero vector is at the same distance from every query, so the node still connects its neighbours but is
no nearer to any query than the rest, and the search drops its keys as it drops every deleted key
(they are not in the user's matrix). The graph is rebuilt, as before, once a fifth of its keys are gone.

hnswlib 0.8 writes an index as a header (:data:`HEADER`) followed by one fixed-size record per node: its
level-0 links, its vector (float32), its label (uint64). The labels in record order are saved beside the
index (``u<user>-<token>.labels``, int64), so a scrub finds a node's record without reading the file;
without that file (an index saved by an earlier memlane) they are read from the records.

When: every deletion of keys (a block, a session, a user's expired blocks, the old keys of an update;
:func:`memlane.core.store.sqlite.ann.forget_keys`, in the deleting transaction) lists the keys in a
journal row of ``meta`` (``ann_scrub_u<user id>``) if the user has an index file. Right after the commit,
before the deletion returns, the store scrubs the files of every journalled user and deletes the row
(:func:`scrub_journal`); a process killed between the two leaves the row, and the next process that
opens the store scrubs then. A journal that commits with the deletion, and a scrub after it, never zero
the vector of a key whose deletion was rolled back.

A save races the deletions: it writes an index of the keys it read earlier, so the index it writes is
scrubbed of every node dead when it is about to be renamed into place, and again, inside the
transaction that records it, if keys it holds were deleted since (:meth:`AnnIndexes._save`).

An index is written to a temporary file before it is renamed into place; a process killed meanwhile
leaves it behind. The writer holds an exclusive ``flock`` on it while it writes, so a temporary file
that can be locked is such a leftover, and is deleted (:func:`remove_leftovers`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import sqlite3
import struct
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memlane.core.store.sqlite.annnodes import KeyMap, load_map, map_path

log = logging.getLogger(__name__)

# hnswlib 0.8's saveIndex header: offsetLevel0, max_elements, cur_element_count, size_data_per_element,
# label_offset, offsetData (size_t), maxlevel (int), enterpoint_node (uint32), maxM, maxM0, M (size_t),
# mult (double), ef_construction (size_t).
HEADER = struct.Struct("<QQQQQQiIQQQdQ")
TMP_SUFFIX = ".hnsw.tmp"
# The records' bytes are what must reach the disk; the file's times need not (fdatasync skips them).
_datasync = getattr(os, "fdatasync", os.fsync)
JOURNAL = "ann_scrub_u"  # + user id: a meta row listing the user's deleted keys still to scrub (JSON)
# The connections (by id) whose open transaction journalled keys: the store scrubs after it commits.
_journalled: set[int] = set()
_journalled_lock = threading.Lock()


@dataclass(frozen=True)
class Layout:
    """Where an index file keeps its nodes' records."""

    count: int  # nodes
    size: int  # bytes per record
    label_at: int  # offset of the label in a record
    data_at: int  # offset of the vector in a record

    @property
    def vector_bytes(self) -> int:
        return self.label_at - self.data_at

    def record(self, position: int) -> int:
        return HEADER.size + position * self.size


def labels_path(index_path: Path) -> Path:
    """The file of an index's labels in record order (``u<user>-<token>.labels`` beside ``.hnsw``)."""
    return index_path.with_suffix(".labels")


def layout(fd: int) -> Layout | None:
    """The layout of the open index file ``fd``, or None if it is not a complete hnswlib index."""
    head = os.pread(fd, HEADER.size, 0)
    if len(head) < HEADER.size:
        return None
    fields = HEADER.unpack(head)
    count, size, label_at, data_at = int(fields[2]), int(fields[3]), int(fields[4]), int(fields[5])
    if not (0 < data_at < label_at and label_at + 8 <= size):
        return None
    if os.fstat(fd).st_size < HEADER.size + count * size:
        return None
    return Layout(count, size, label_at, data_at)


def read_labels(path: Path, shape: Layout) -> npt.NDArray[np.int64]:
    """The labels of ``path``'s records, in order: from the labels file if it matches, else from the records."""
    saved = labels_path(path)
    if saved.is_file():
        try:
            labels = np.fromfile(saved, dtype="<i8")
        except (OSError, ValueError):
            labels = np.zeros(0, dtype=np.int64)
        if labels.shape[0] == shape.count:
            return labels.astype(np.int64)
    records = np.memmap(path, dtype=np.uint8, mode="r", offset=HEADER.size, shape=(shape.count, shape.size))
    column = np.ascontiguousarray(records[:, shape.label_at : shape.label_at + 8])
    return column.view("<u8").reshape(-1).astype(np.int64)


def save_labels(index_path: Path, target: Path) -> None:
    """Write ``index_path``'s labels in record order to ``target`` (fsynced)."""
    fd = os.open(index_path, os.O_RDONLY)
    try:
        shape = layout(fd)
    finally:
        os.close(fd)
    if shape is None:
        raise ValueError(f"{index_path} is not a complete hnswlib index")
    labels = read_labels(index_path, shape)
    with open(target, "wb") as fh:
        fh.write(labels.astype("<i8").tobytes())
        fh.flush()
        os.fsync(fh.fileno())


def scrub(path: Path, labels: npt.NDArray[np.int64], *, sync: bool = True) -> int:
    """Overwrite with zeros the vectors of the nodes labelled ``labels`` in the index file ``path``, in
    place (and fsynced with ``sync``: a process crash keeps what was written either way, a power loss only
    what was synced); how many records were overwritten (a label the file does not hold is skipped). A
    file that is not a complete index is left alone (0)."""
    if labels.size == 0:
        return 0
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0  # replaced or deleted meanwhile: the new file is another's to scrub
    try:
        shape = layout(fd)
        if shape is None:
            return 0
        positions = np.flatnonzero(np.isin(read_labels(path, shape), labels))
        zeros = bytes(shape.vector_bytes)
        for position in positions.tolist():
            os.pwrite(fd, zeros, shape.record(position) + shape.data_at)
        if positions.size and sync:
            _datasync(fd)
        return int(positions.size)
    finally:
        os.close(fd)


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the temporary index file ``path`` (created empty) while it is written,
    so that :func:`remove_leftovers` never takes it for a dead writer's."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def remove_leftovers(base: Path, user_id: int) -> None:
    """Delete the user's temporary index files whose writer is gone (no lock held on them)."""
    for path in base.glob(f"u{user_id}-*{TMP_SUFFIX}"):
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # being written: its writer scrubs what it saves
        else:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)


Pks = npt.NDArray[np.int64]


def dead_labels(labels: Pks, keys: KeyMap | None, live: Pks) -> Pks:
    """The nodes of ``labels`` none of whose keys is in ``live`` (``keys``: the index's map; None: each
    node is the key it is labelled by)."""
    if keys is None:
        return labels[~np.isin(labels, live)]
    alive = np.unique(keys.labels[np.isin(keys.pks, live)])
    return labels[~np.isin(labels, alive)]


def live_keys(conn: sqlite3.Connection, user_id: int) -> npt.NDArray[np.int64]:
    rows = conn.execute("SELECT pk FROM search_keys WHERE user_id = ?", (user_id,)).fetchall()
    return np.array([int(r[0]) for r in rows], dtype=np.int64)


def index_files(base: Path, user_id: int) -> list[Path]:
    return sorted(base.glob(f"u{user_id}-*.hnsw")) if base.is_dir() else []


def journal(conn: sqlite3.Connection, base: Path, user_id: int, key_pks: npt.NDArray[np.int64]) -> None:
    """Inside a transaction deleting the user's keys ``key_pks``: list them for :func:`scrub_journal`, if
    the user has an index file (a file saved later is scrubbed by its writer)."""
    if key_pks.size == 0 or not index_files(base, user_id):
        return
    key = f"{JOURNAL}{user_id}"
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    listed: list[int] = json.loads(row[0]) if row else []
    listed.extend(key_pks.tolist())
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(listed)),
    )
    with _journalled_lock:
        _journalled.add(id(conn))


def take_journalled(conn: sqlite3.Connection) -> bool:
    """Whether the transaction ``conn`` just ended journalled keys (and forget it: called once it ends)."""
    with _journalled_lock:
        if id(conn) not in _journalled:
            return False
        _journalled.discard(id(conn))
        return True


def scrub_journal(conn: sqlite3.Connection, base: Path, *, sync: bool = True) -> int:
    """Scrub the keys of every journal row from their users' index files and delete the rows (outside any
    transaction on ``conn``); how many rows there were. A row whose scrub fails (logged) stays for the next
    call. ``sync``: fsync the index files (the store's durability is "full")."""
    rows = conn.execute("SELECT key, value FROM meta WHERE key GLOB ?", (f"{JOURNAL}*",)).fetchall()
    for key, value in rows:
        user_id = int(str(key).removeprefix(JOURNAL))
        try:
            scrub_keys(conn, base, user_id, np.array(json.loads(value), dtype=np.int64), sync=sync)
        except OSError as exc:
            log.warning("deleted vectors of user %s are still in the approximate index's files: %s", user_id, exc)
            continue
        _clear(conn, key, value)
    return len(rows)


def _clear(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Delete a journal row, if no deletion journalled more in it meanwhile (those keys are the next
    scrub's). Not synced: a row that comes back after a power loss is scrubbed again, to no effect."""
    (level,) = conn.execute("PRAGMA synchronous").fetchone()
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("DELETE FROM meta WHERE key = ? AND value = ?", (key, value))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute(f"PRAGMA synchronous = {int(level)}")


def scrub_keys(conn: sqlite3.Connection, base: Path, user_id: int, key_pks: Pks, *, sync: bool = True) -> None:
    """Overwrite, in each of the user's index files, the vectors of the nodes of the deleted keys
    ``key_pks`` that no live key still carries; delete the user's leftover temporary files."""
    if not base.is_dir():
        return
    remove_leftovers(base, user_id)
    for path in index_files(base, user_id):
        if map_path(path).is_file():
            keys = load_map(map_path(path))
            if keys is None:  # unreadable (the index is rebuilt at its next load): every node not alive
                scrub(path, _file_dead(path, None, live_keys(conn, user_id)), sync=sync)
                continue
            nodes = np.unique(keys.label_of(key_pks))
            nodes = nodes[nodes >= 0]
            others = np.setdiff1d(keys.expand(nodes), key_pks)
            alive = keys.label_of(_live_among(conn, user_id, others)) if others.size else np.zeros(0, np.int64)
            scrub(path, np.setdiff1d(nodes, alive), sync=sync)
        else:
            scrub(path, key_pks, sync=sync)


def _file_dead(path: Path, keys: KeyMap | None, live: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    fd = os.open(path, os.O_RDONLY)
    try:
        shape = layout(fd)
    finally:
        os.close(fd)
    return np.zeros(0, np.int64) if shape is None else dead_labels(read_labels(path, shape), keys, live)


def _live_among(conn: sqlite3.Connection, user_id: int, pks: Sequence[int] | Pks) -> Pks:
    out: list[int] = []
    items = [int(p) for p in pks]
    for start in range(0, len(items), 500):
        chunk = items[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT pk FROM search_keys WHERE user_id = ? AND pk IN ({marks})", (user_id, *chunk))
        out.extend(int(r[0]) for r in rows)
    return np.array(out, dtype=np.int64)
