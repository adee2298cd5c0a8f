"""What every PostgreSQL statement of the store shares: the connection type and the database's clock."""

from __future__ import annotations

import psycopg
from psycopg.rows import TupleRow

Conn = psycopg.Connection[TupleRow]

# The database's clock: leases compare times written by many machines.
NOW = "extract(epoch FROM now())"
