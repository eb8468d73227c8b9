"""Statements sent as one simple-protocol batch, against the session's real Postgres.

A batch binds its values in the client: whatever text an agent put in a value arrives as that
text, never as SQL. Each statement's result comes back in order, commands included; a batch
that fails leaves nothing open and nothing written; and a batch only runs on a connection that
lets it say BEGIN and COMMIT itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolgate.store import batch

from .conftest import Database

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40)  # what a UTF-8 server takes


async def _connect(database: Database, autocommit: bool = True) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(database.database_url, autocommit=autocommit)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(TEXT, min_size=1, max_size=5), number=st.integers(-(2**63), 2**63 - 1))
def test_values_bound_in_the_client_arrive_as_the_values_they_were(
    database: Database, values: list[str], number: int
) -> None:
    async def scenario() -> list[batch.Result]:
        conn = await _connect(database)
        try:
            return await batch.run(
                conn,
                [
                    # A cast binds before a sign: a scalar with one goes in parentheses (batch.py).
                    ("SELECT %s::text[] AS a, (%s)::bigint AS n, %s::bigint[] AS ns", (values, number, [number, 0])),
                    ("SELECT x FROM unnest(%s::text[]) AS x", (values,)),
                    ("SELECT %(one)s::text AS one", {"one": values[0]}),
                ],
            )
        finally:
            await conn.close()

    arrays, rows, named = asyncio.run(scenario())
    assert arrays.columns == ["a", "n", "ns"] and arrays.rows == [(values, number, [number, 0])]
    assert [row[0] for row in rows.rows] == values
    assert named.dicts() == [{"one": values[0]}]


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(TEXT, min_size=1, max_size=5),
    blobs=st.lists(st.binary(max_size=40), min_size=1, max_size=3),
    number=st.integers(-(2**31), 2**31 - 1),
)
def test_a_statement_written_for_binary_arrays_runs_as_written_in_a_batch(
    database: Database, values: list[str], blobs: list[bytes], number: int
) -> None:
    """The store's statements take their arrays as `%b` (store/batch.py): sent alone, in binary;
    in a batch, bound as the same literals `%s` would be. Both ways answer the same rows."""
    query = "SELECT t, b, n FROM unnest(%(t)b::text[]) AS t, unnest(%(b)b::bytea[]) AS b, unnest(%(n)b::int[]) AS n"
    params = {"t": values, "b": blobs, "n": [number, 0]}

    async def scenario() -> tuple[list[batch.Result], list[tuple[Any, ...]], bytes, bytes]:
        conn = await _connect(database)
        try:
            alone = await (await conn.execute(query, params)).fetchall()
            cur = psycopg.AsyncClientCursor(conn)
            as_b, as_s = cur.mogrify(query, params), cur.mogrify(query.replace(")b::", ")s::"), params)
            return await batch.run(conn, [(query, params)]), alone, as_b.encode(), as_s.encode()
        finally:
            await conn.close()

    (batched,), alone, as_b, as_s = asyncio.run(scenario())
    assert as_b == as_s
    assert [(t, bytes(b), n) for t, b, n in batched.rows] == [(t, bytes(b), n) for t, b, n in alone]
    assert len(alone) == len(values) * len(blobs) * 2


def test_every_statement_answers_in_order_commands_included(database: Database) -> None:
    async def scenario() -> list[batch.Result]:
        conn = await _connect(database)
        try:
            async with batch.transaction(conn):
                return await batch.run(
                    conn,
                    [batch.BEGIN, ("SELECT pg_advisory_xact_lock(%s)", (42,)), ("SELECT 1 AS one", None), batch.COMMIT],
                )
        finally:
            await conn.close()

    begin, lock, one, commit = asyncio.run(scenario())
    assert begin.rows == [] and commit.rows == []
    assert lock.columns == ["pg_advisory_xact_lock"]
    assert one.rows == [(1,)]


def test_a_statement_ending_in_a_line_comment_keeps_the_next_one_apart(database: Database) -> None:
    async def scenario() -> list[batch.Result]:
        conn = await _connect(database)
        try:
            return await batch.run(conn, [("SELECT 1 AS one -- a lookup's comment", None), ("SELECT 2 AS two", None)])
        finally:
            await conn.close()

    one, two = asyncio.run(scenario())
    assert one.rows == [(1,)] and two.rows == [(2,)]


def test_a_failing_batch_writes_nothing_and_leaves_no_transaction_open(database: Database) -> None:
    database.sql("CREATE TABLE IF NOT EXISTS batch_probe (v text)")

    async def scenario() -> tuple[BaseException | None, psycopg.pq.TransactionStatus]:
        conn = await _connect(database)
        error: BaseException | None = None
        try:
            async with batch.transaction(conn):
                await batch.run(conn, [batch.BEGIN, ("INSERT INTO batch_probe VALUES (%s)", ("kept?",))])
                await batch.run(conn, [("SELECT 1 / 0", None), batch.COMMIT])
        except psycopg.Error as exc:
            error = exc
        status = conn.info.transaction_status
        await conn.close()
        return error, status

    error, status = asyncio.run(scenario())
    assert isinstance(error, psycopg.errors.DivisionByZero)
    assert status is psycopg.pq.TransactionStatus.IDLE
    assert database.sql("SELECT count(*) FROM batch_probe") == [(0,)]


def test_a_batched_transaction_refuses_a_connection_that_begins_on_its_own(database: Database) -> None:
    async def scenario() -> None:
        conn = await _connect(database, autocommit=False)
        try:
            async with batch.transaction(conn):
                await batch.run(conn, [batch.BEGIN])
        finally:
            await conn.close()

    with pytest.raises(RuntimeError, match="autocommit"):
        asyncio.run(scenario())
