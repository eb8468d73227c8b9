"""The audit log's tree heads and what witnesses answered them (migration 0035).

A head is taken under its own advisory lock (one taker at a time, never the chain's: the audit
writers do not wait on it), over the rows after the last head's `last_row_id`. Rows become visible
in id order (writers append under the chain's lock, one transaction at a time), so the rows a head
reads are the log's prefix up to its last id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

LOCK_ID = 0x61_75_74_72  # "autr"

HEAD_COLUMNS = "id, tree_size, root_hash, last_row_id, compact_range, note, key_id"
LAST_HEAD = f"SELECT {HEAD_COLUMNS} FROM toolgate.audit_tree_heads ORDER BY tree_size DESC LIMIT 1"
HEAD_OF_SIZE = f"SELECT {HEAD_COLUMNS} FROM toolgate.audit_tree_heads WHERE tree_size = %s"
LAST_COSIGNED = (
    f"SELECT {', '.join('h.' + c for c in HEAD_COLUMNS.split(', '))} FROM toolgate.audit_cosignatures c "
    "JOIN toolgate.audit_tree_heads h ON h.id = c.head_id "
    "WHERE c.witness = %s AND c.outcome = 'cosigned' ORDER BY h.tree_size DESC LIMIT 1"
)
LAST_ANSWER = "SELECT outcome, status FROM toolgate.audit_cosignatures WHERE witness = %s ORDER BY id DESC LIMIT 1"
LEAVES = "SELECT id, hash FROM toolgate.audit_log WHERE id > %s AND id <= %s ORDER BY id"
LEAVES_AFTER = "SELECT id, hash FROM toolgate.audit_log WHERE id > %s ORDER BY id LIMIT %s"
ROWS_PER_HEAD = 100_000  # a head covers at most this many new rows: a long log is taken in steps
# Streamed by `audit verify`: every row's chain hash in id order (the first N of them), and every
# head in size order with what the witnesses answered it.
ALL_LEAVES = "SELECT hash FROM toolgate.audit_log ORDER BY id"
FIRST_LEAVES = "SELECT hash FROM toolgate.audit_log ORDER BY id LIMIT %s"
HEADS_WITH_ANSWERS = (
    "SELECT h.id, h.tree_size, h.root_hash, h.last_row_id, h.compact_range, h.note, h.key_id, "
    "to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
    "(SELECT json_agg(json_build_array(c.witness, c.outcome, c.cosignature, c.status, c.answer) ORDER BY c.id) "
    "FROM toolgate.audit_cosignatures c WHERE c.head_id = h.id) "
    "FROM toolgate.audit_tree_heads h ORDER BY h.tree_size"
)
INSERT_HEAD = (
    "INSERT INTO toolgate.audit_tree_heads (tree_size, root_hash, last_row_id, compact_range, note, key_id) "
    "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id"
)
INSERT_ANSWER = (
    "INSERT INTO toolgate.audit_cosignatures (head_id, witness, outcome, cosignature, status, answer) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)


@dataclass(frozen=True)
class Head:
    id: int
    tree_size: int
    root_hash: bytes
    last_row_id: int
    compact_range: bytes
    note: str
    key_id: str

    @classmethod
    def of(cls, row: tuple[Any, ...] | None) -> Head | None:
        if row is None:
            return None
        head_id, size, root, last, compact, note, key_id = row[:7]
        return cls(int(head_id), int(size), bytes(root), int(last), bytes(compact), str(note), str(key_id))


async def lock(conn: AsyncConnection[Any]) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_ID,))


async def last_head(conn: AsyncConnection[Any]) -> Head | None:
    return Head.of(await (await conn.execute(LAST_HEAD)).fetchone())


async def head_of_size(conn: AsyncConnection[Any], size: int) -> Head | None:
    return Head.of(await (await conn.execute(HEAD_OF_SIZE, (size,))).fetchone())


async def last_cosigned(conn: AsyncConnection[Any], witness: str) -> Head | None:
    """The largest head `witness` cosigned, or None: it never did."""
    return Head.of(await (await conn.execute(LAST_COSIGNED, (witness,))).fetchone())


async def last_answer(conn: AsyncConnection[Any], witness: str) -> tuple[str, int | None] | None:
    """The outcome and status of what `witness` answered last (None: nothing yet)."""
    row = await (await conn.execute(LAST_ANSWER, (witness,))).fetchone()
    return (str(row[0]), row[1]) if row is not None else None


async def leaves(conn: AsyncConnection[Any], after_id: int, upto_id: int | None = None) -> list[tuple[int, bytes]]:
    """(id, 32-byte chain hash) of the rows after `after_id`, in id order: up to `upto_id`, or
    the first ROWS_PER_HEAD of them."""
    if upto_id is None:
        cur = await conn.execute(LEAVES_AFTER, (after_id, ROWS_PER_HEAD))
    else:
        cur = await conn.execute(LEAVES, (after_id, upto_id))
    return [(int(row_id), bytes.fromhex(digest)) for row_id, digest in await cur.fetchall()]


async def insert_head(conn: AsyncConnection[Any], head: Head) -> int:
    params = (head.tree_size, head.root_hash, head.last_row_id, head.compact_range, head.note, head.key_id)
    row = await (await conn.execute(INSERT_HEAD, params)).fetchone()
    assert row is not None
    return int(row[0])


async def record_answer(
    conn: AsyncConnection[Any], head_id: int, witness: str, cosignature: str | None, status: int, answer: str
) -> None:
    outcome = "cosigned" if cosignature is not None else "refused"
    await conn.execute(INSERT_ANSWER, (head_id, witness, outcome, cosignature, status, answer[:2000]))
