"""``longmemeval-s-x500``: LongMemEval_S haystacks grown to a fixed number of sessions.

Each haystack gets filler sessions drawn from the *other* questions' S haystacks. Evidence never leaks in:
sessions whose id starts with ``answer_``, that any question lists in ``answer_session_ids``, or that
carry a ``has_answer: true`` turn are excluded from the pool. Fillers are de-duplicated by session id
against the haystack and dated uniformly (to the minute) inside the haystack's own date range.

Determinism: every question draws from its own RNG, seeded by a hash of ``(seed, question_id)``, over a
pool sorted by session id, so the result does not depend on iteration order. It does depend on the set of
input questions (they form the pool), so expand the whole S file, not a subset, to reproduce a run.
Fillers share their turn tuples with the pool, so memory stays about that of S itself.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import timedelta

from memlane.bench.datasets.model import Haystack, Session
from memlane.core.errors import ValidationError

DEFAULT_SIZE = 500
DEFAULT_SEED = 0


def question_rng(seed: int, question_id: str) -> random.Random:
    """An RNG that depends only on ``(seed, question_id)``."""
    digest = hashlib.sha256(f"{seed}\x00{question_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _is_evidence(session: Session, evidence_ids: set[str]) -> bool:
    return (
        session.session_id.startswith("answer_")
        or session.session_id in evidence_ids
        or any(t.has_answer for t in session.turns)
    )


def filler_pool(haystacks: Iterable[Haystack]) -> dict[str, Session]:
    """Every non-evidence session of the given haystacks, one per session id, sorted by id."""
    base = list(haystacks)
    evidence_ids = {e for h in base for s in h.samples for e in s.evidence_session_ids}
    pool: dict[str, Session] = {}
    for h in base:
        for session in h.sessions:
            if session.session_id not in pool and not _is_evidence(session, evidence_ids):
                pool[session.session_id] = session
    return dict(sorted(pool.items()))


def grow_haystack(haystack: Haystack, pool: dict[str, Session], *, size: int, seed: int) -> Haystack:
    """Add ``size - len(sessions)`` fillers from ``pool`` (a haystack at or above ``size`` is unchanged)."""
    need = size - len(haystack.sessions)
    if need <= 0:
        return haystack
    dates = [s.started_at for s in haystack.sessions if s.started_at is not None]
    if not dates:
        raise ValidationError("haystack has no session dates to place fillers in", where=haystack.namespace)
    own = {s.session_id for s in haystack.sessions}
    pool_ids = list(pool)
    rng = question_rng(seed, haystack.namespace)
    # Drawing need + len(own) ids and discarding the haystack's own leaves at least `need` of them.
    drawn = rng.sample(pool_ids, min(len(pool_ids), need + len(own)))
    chosen = [sid for sid in drawn if sid not in own][:need]
    if len(chosen) < need:
        raise ValidationError(
            f"only {len(chosen)} filler sessions available, {need} needed to reach {size}",
            where=haystack.namespace,
        )
    low, high = min(dates), max(dates)
    span = int((high - low).total_seconds() // 60)
    fillers = []
    for sid in sorted(chosen):
        fillers.append(replace(pool[sid], started_at=low + timedelta(minutes=rng.randint(0, span))))
    # Stable sort: at equal timestamps the original sessions stay ahead of fillers.
    sessions = sorted(
        haystack.sessions + tuple(fillers),
        key=lambda s: s.started_at if s.started_at is not None else low,
    )
    note = f"{haystack.namespace}: grown from {len(haystack.sessions)} to {size} sessions (seed {seed})"
    return replace(haystack, sessions=tuple(sessions), notes=(*haystack.notes, note))


def expand_haystacks(
    haystacks: Iterable[Haystack], *, size: int = DEFAULT_SIZE, seed: int = DEFAULT_SEED
) -> Iterator[Haystack]:
    """Grow every haystack to ``size`` sessions with fillers from the other haystacks (see module doc).

    The input is materialised once (it is the filler pool); output haystacks are yielded lazily.
    """
    if size < 1:
        raise ValidationError(f"size must be positive, got {size}", where="size")
    base = list(haystacks)
    pool = filler_pool(base)
    for haystack in base:
        yield grow_haystack(haystack, pool, size=size, seed=seed)
