"""Postgres for workers: one async connection pool per process, and what counts as transient.

A transient failure (the server restarting, a dropped connection, a serialization conflict)
is retried with the whole round; anything else is a fault of the round's data and is
isolated to the call that caused it.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass
from typing import Any

import orjson
import psycopg
from psycopg import errors
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57")  # connection, resources, operator intervention
TRANSIENT_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock


def rows_json(rows: Any) -> str:
    """Rows as the JSON text of one `jsonb_to_recordset` parameter: a round's writes in one
    statement. A row is a dict, or a dataclass written as the object of its fields (the recordset
    reads them by name). orjson writes it, in a fraction of json.dumps's time (usage events, key
    settlements and audit entries are one row per call; docs/performance.md, "Figures behind the
    code"). What orjson refuses (a lone surrogate, an integer beyond 64 bits, a key that is not a
    string, a type JSON has no form for) json.dumps writes or refuses as before, so Postgres gets
    the same text for it and answers as it did."""
    try:  # a datetime, which json.dumps refuses, orjson hands back (and so refuses)
        return orjson.dumps(rows, option=orjson.OPT_PASSTHROUGH_DATETIME).decode()
    except orjson.JSONEncodeError:
        return json.dumps(rows, default=_fields)


def _fields(row: Any) -> dict[str, Any]:
    """A dataclass row as orjson writes it, for json.dumps: the object of its fields."""
    if not is_dataclass(row) or isinstance(row, type):
        raise TypeError(f"Object of type {type(row).__name__} is not JSON serializable")
    return {f.name: getattr(row, f.name) for f in fields(row)}


def columns(kind: type[Any], rows: Sequence[Any]) -> list[list[Any]]:
    """Dataclass rows of `kind` as one list per field, in the fields' order: the arrays of one
    `unnest` statement for a round's rows (attribute reads: no copy of the values)."""
    return [[getattr(row, f.name) for row in rows] for f in fields(kind)]


def jsonb(value: Any) -> Jsonb:
    """`value` as a jsonb parameter whose text `rows_json` writes: psycopg's own dumper calls
    json.dumps, several times slower than orjson (docs/performance.md, "Figures behind the code").
    Postgres parses the text into the same jsonb either way."""
    return Jsonb(value, dumps=rows_json)


async def keyed(conn: psycopg.AsyncConnection[Any], query: str, params: Any) -> psycopg.AsyncCursor[Any]:
    """Run `query`, which joins a round's keys (arrays, `unnest`) to a table that grows without
    bound, planned for the table as it is now: never prepared. psycopg prepares a statement after
    its fifth execution, and Postgres then keeps a generic plan; made while the table was nearly
    empty (a new deployment, a worker started then), that plan was a hash join over a sequential
    scan, and went on scanning the whole table on every round as it grew (the keys, store/keys.py).
    Planning each time costs little and finds each key by its index
    (docs/performance.md, "Figures behind the code")."""
    return await conn.execute(query, params, prepare=False)


def one_row(conn: psycopg.Connection[Any], query: str) -> Any:
    """The row of a query that always answers exactly one: an aggregate without GROUP BY (a
    backlog's count and age), `SELECT now()`."""
    row = conn.execute(query).fetchone()
    assert row is not None  # one row, always
    return row


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, psycopg.OperationalError | asyncio.TimeoutError | ConnectionError):
        return True
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        return state in TRANSIENT_SQLSTATES or state[:2] in TRANSIENT_SQLSTATE_CLASSES
    from psycopg_pool import PoolTimeout

    return isinstance(exc, PoolTimeout)


# A connection back in the pool for longer than this is asked whether it still works before it
# is handed out again (one round trip); one that was in use moments ago is not.
STALE_AFTER_S = 2.0


class IdleCheck:
    """The pool's checkout check: a round trip only for a connection that sat idle.

    Checking every checkout cost each round a round trip, felt in a sequential run
    (docs/performance.md, "Figures behind the code"). A connection used moments ago is checked
    locally only (closed or broken); if the server went away since, the round's first statement
    fails as a transient error, the round is retried, and the pool discards the dead connection
    on its return."""

    def __init__(self, stale_after_s: float = STALE_AFTER_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    async def returned(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._returned[conn] = self.clock()

    async def check(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if conn.closed or conn.broken:
            raise psycopg.OperationalError("the connection is closed")
        at = self._returned.get(conn)
        if at is None or self.clock() - at > self.stale_after_s:
            await AsyncConnectionPool.check_connection(conn)


def make_pool(database_url: str, name: str, max_size: int = 4, autocommit: bool = False) -> AsyncConnectionPool:
    """A worker's pool; `autocommit` for one whose transactions are batches that say BEGIN and
    COMMIT themselves (`batch.py`)."""
    idle = IdleCheck(STALE_AFTER_S)
    return AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=max_size,
        name=name,
        open=False,
        timeout=10.0,
        reconnect_timeout=3600.0,
        kwargs={"application_name": f"toolgate-{name}", "autocommit": autocommit},
        check=idle.check,
        reset=idle.returned,
    )


__all__ = ["AsyncConnectionPool", "IdleCheck", "errors", "is_transient", "make_pool", "one_row"]
