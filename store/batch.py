"""A transaction's statements in as few round trips as they allow: simple-protocol batches.

psycopg costs the client CPU on every round trip, and a round of one call made dozens of them
across the stages. Statements that do not wait on each other's answers go as one simple-protocol
query instead, their values bound in the client by psycopg (`AsyncClientCursor.mogrify`: libpq's
quoting), and the server runs them in order, each with a snapshot of its own as in separate round
trips. A transaction in two such batches costs the client less CPU than one statement at a time,
and far less than a psycopg pipeline (docs/performance.md, "Figures behind the code").

A statement is written once, for either way of sending it (store/__init__.py): `%b` where an
array goes in binary when the statement is sent alone (`conn.execute`, a pipeline), `%s` for the
rest. The simple protocol has no binary parameters: psycopg's client-side binding writes every
placeholder, `%s`, `%b` or `%t`, as the same text literal of its value (`_query2pg_client` and
`Transformer.as_literal`, read in psycopg 3.2 and 3.3; tests/integration/test_batch.py holds the
installed psycopg to it), so a batch sends statements as they are written, never rewritten.

Bound in the client, a negative number is written `-5`, and a cast binds before the sign:
`%s::bigint` of -2**63 overflows. A scalar parameter with a cast goes in parentheses,
`(%s)::bigint`; an array (`%s::int[]`, `%b::int[]`) is written as a quoted literal and needs none.

The connection is in autocommit mode: the batches say BEGIN and COMMIT themselves, and psycopg
sends nothing of its own. `transaction` rolls back whatever a failure leaves open.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncClientCursor, AsyncConnection
from psycopg.pq import TransactionStatus

Statement = tuple[str, Any]  # a query with %s, %b, %(name)s or %(name)b placeholders, and its parameters (or None)
BEGIN: Statement = ("BEGIN", None)
COMMIT: Statement = ("COMMIT", None)


@dataclass(frozen=True)
class Result:
    """What one statement of a batch returned: its columns and rows (none for a command)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]

    def dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


async def run(conn: AsyncConnection[Any], statements: Sequence[Statement]) -> list[Result]:
    """Run `statements` in one round trip; what each returned, in order."""
    cur = AsyncClientCursor(conn)
    # Each statement ends on a line of its own: a trailing `--` comment cannot swallow the `;`.
    await cur.execute("\n;\n".join(cur.mogrify(query, params) for query, params in statements))
    results: list[Result] = []
    while True:
        if cur.description is None:
            results.append(Result([], []))
        else:
            results.append(Result([c.name for c in cur.description], list(await cur.fetchall())))
        if not cur.nextset():
            break
    if len(results) != len(statements):
        raise RuntimeError(f"{len(statements)} statements gave {len(results)} results")
    return results


@asynccontextmanager
async def transaction(conn: AsyncConnection[Any]) -> AsyncIterator[AsyncConnection[Any]]:
    """Roll back what a failure inside leaves open (the batches say BEGIN and COMMIT)."""
    if not conn.autocommit:
        raise RuntimeError("a batched transaction needs a connection in autocommit mode")
    try:
        yield conn
    except BaseException:
        if not conn.broken and conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
            await conn.execute("ROLLBACK")
        raise
