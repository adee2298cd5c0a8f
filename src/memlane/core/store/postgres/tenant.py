"""A user's id in the PostgreSQL store is a hash of the user's name, the same in Python and in SQL.

Every memlane operation names its user, and every per-user table leads its key with ``user_id``. With the id
computed from the name, any process knows where a user's rows are before it asks the database: on a
distributed PostgreSQL (Citus, distributed by ``user_id``) a lookup by name carries ``id = user_key(name)``
and is routed to the one node holding the user, instead of asking every node for the name. On one server
it is the primary key lookup it always was.

The id is the first 63 bits of the SHA-256 of the UTF-8 name (never negative, so it also names the user's
approximate index: ``key_vectors_ann_u<id>``). Two names with the same id (about one chance in 10^3 at 100
million users) cannot both exist: creating the second fails with a StoreError naming both.
"""

from __future__ import annotations

import hashlib

from memlane.core.errors import StoreError

# The same function in SQL (migration 9 computed existing users' ids with it); ``{}`` is the name.
USER_KEY_SQL = "((('x' || left(encode(sha256(convert_to({}, 'UTF8')), 'hex'), 16))::bit(64) >> 1)::bigint)"


def user_key(name: str) -> int:
    """The user id of ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big") >> 1


def held_by(user: str, user_id: int, holder: str) -> StoreError:
    """What refuses creating ``user`` when its id is held by another name, ``holder``."""
    return StoreError(f"user {user!r} cannot be created: its id {user_id} is held by user {holder!r}")
