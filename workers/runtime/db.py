"""Postgres for workers: one async connection pool per process, and what counts as transient.

A transient failure (the server restarting, a dropped connection, a serialization conflict)
is retried with the whole round; anything else is a fault of the round's data and is
isolated to the call that caused it.
"""

from __future__ import annotations

import asyncio

import psycopg
from psycopg import errors
from psycopg_pool import AsyncConnectionPool

TRANSIENT_SQLSTATE_CLASSES = ("08", "53", "57")  # connection, resources, operator intervention
TRANSIENT_SQLSTATES = ("40001", "40P01")  # serialization failure, deadlock


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, psycopg.OperationalError | asyncio.TimeoutError | ConnectionError):
        return True
    if isinstance(exc, psycopg.Error):
        state = exc.sqlstate or ""
        return state in TRANSIENT_SQLSTATES or state[:2] in TRANSIENT_SQLSTATE_CLASSES
    from psycopg_pool import PoolTimeout

    return isinstance(exc, PoolTimeout)


def make_pool(database_url: str, name: str, max_size: int = 4) -> AsyncConnectionPool:
    return AsyncConnectionPool(
        database_url,
        min_size=1,
        max_size=max_size,
        name=name,
        open=False,
        timeout=10.0,
        reconnect_timeout=3600.0,
        kwargs={"application_name": f"toolgate-{name}"},
        check=AsyncConnectionPool.check_connection,
    )


__all__ = ["AsyncConnectionPool", "errors", "is_transient", "make_pool"]
