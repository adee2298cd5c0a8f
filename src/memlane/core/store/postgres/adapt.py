"""Sending vectors to pgvector in its binary format (no text formatting of 384 floats per row).

pgvector's binary ``vector``: int16 dimension, int16 unused, then big-endian float4 values. The type's OID
depends on the database (it comes from an extension), so the dumper class is made per store once the OID
is known, and registered on each pooled connection.
"""

from __future__ import annotations

import struct

import numpy as np
from psycopg import adapt, pq
from psycopg.abc import AdaptContext, Buffer
from psycopg.types import TypeInfo

from memlane.core.embedding.protocol import Vectors


class PgVector:
    """One embedding to be sent as a pgvector ``vector`` (a marker type: plain arrays are not touched)."""

    __slots__ = ("data",)

    def __init__(self, data: Vectors) -> None:
        self.data = data


def vector_bytes(vec: Vectors) -> bytes:
    """pgvector's binary wire format of one vector."""
    flat = np.ascontiguousarray(vec, dtype=">f4").reshape(-1)
    return struct.pack(">HH", flat.shape[0], 0) + flat.tobytes()


class _VectorDumper(adapt.Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: object) -> Buffer | None:
        """A PgVector, bytes already in wire format, or anything numpy reads as a vector."""
        if isinstance(obj, PgVector):
            return vector_bytes(obj.data)
        if isinstance(obj, bytes):  # already in wire format (COPY rows)
            return obj
        return vector_bytes(np.asarray(obj, dtype=np.float32))


def vector_dumper(oid: int) -> type[adapt.Dumper]:
    """The dumper class for this database's ``vector`` OID."""
    return type("VectorDumper", (_VectorDumper,), {"oid": oid})


def register_vector(context: AdaptContext, oid: int, array_oid: int) -> None:
    """Make ``PgVector`` values (and COPY columns typed ``oid``) dump as binary vectors on ``context``, and
    lists of them as arrays (``vector[]``, of OID ``array_oid``) sent in binary (``%b``)."""
    context.adapters.register_dumper(PgVector, vector_dumper(oid))
    TypeInfo("vector", oid, array_oid).register(context)
