"""The audit log: append-only, hash-chained, and anchored by signed checkpoints.

Each row's hash is sha256(previous hash || canonical JSON of the row), so removing,
reordering or editing any row breaks every hash after it. A chain alone cannot show that its
newest rows were deleted, so every append also writes one checkpoint row in the same statement
(`toolgate.audit_heads`): the chain's row count and head hash, signed with the deployment's
Ed25519 key. `toolgate audit verify` walks the chain and checks that every signed checkpoint
still names the row at its count: a log cut at the end (rows deleted, the table emptied, even
by its owner, even if it grew again since) no longer does. Writers serialize on a
transaction-scoped advisory lock, so the chain has one order; each row carries its position
(`seq`), so a writer never counts. Workers connect as a role that may only insert into both
tables (migration 0009), and neither can be truncated (0008).

Each checkpoint names the deployment key that signed it, and verify checks it with that key
(toolgate/trust/checkpoint_keys.py: which key signs, which keys check), so a rotation of the
deployment secret leaves the chain verifiable. A writer with no key at all appends without a
checkpoint (and says so once in its log): verify reports such rows as not covered by a checkpoint.

    verdict        when
    BROKEN         a row's hash or link does not hold (edited, removed, reordered)
    CUT            a signed checkpoint names a head the log no longer holds (deleted tail, TRUNCATE)
    DIVERGED       a signed checkpoint's head is in the log at another position
    UNANCHORED     no signed checkpoint at all (a log written before 0008, or without keys)
    INTACT         otherwise; rows newer than the newest checkpoint are reported as not covered
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, AsyncCursor, Connection

from toolgate.store import batch
from toolgate.store.audit_entry import GENESIS as GENESIS
from toolgate.store.audit_entry import Entry as Entry
from toolgate.store.audit_entry import chain_hash as chain_hash
from toolgate.store.db import make_pool, rows_json
from toolgate.trust.checkpoint_keys import TrustedKeys, signer
from toolgate.trust.checkpoint_keys import use_key as use_key
from toolgate.trust.checkpoint_keys import use_keyset as use_keyset
from toolgate.trust.ed25519 import PublicKey

log = logging.getLogger("toolgate.audit")

LOCK_ID = 0x61_75_64_74  # "audt"
CHECKPOINT_PURPOSE = b"toolgate.audit-head.v1"
# A timestamp as the exact text that was hashed (UTC, microseconds).
AT_TEXT = "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"


def checkpoint_bytes(row_count: int, head_hash: str) -> bytes:
    """What a checkpoint's signature covers: length-prefixed, so no two checkpoints share bytes."""
    fields = [CHECKPOINT_PURPOSE, str(row_count).encode(), head_hash.encode()]
    return b"".join(len(f).to_bytes(4, "big") + f for f in fields)


# --- appending ---------------------------------------------------------------------------------

# The tail's hash and position; rows from before 0008 have no position, so the first append
# after it counts them (once: COALESCE evaluates the count only when the tail has none).
TAIL = (
    f"SELECT {AT_TEXT.format('now()')}, t.hash, coalesce(t.seq, (SELECT count(*) FROM toolgate.audit_log)) "
    "FROM (SELECT 1) AS one LEFT JOIN LATERAL "
    "(SELECT hash, seq FROM toolgate.audit_log ORDER BY id DESC LIMIT 1) AS t ON true"
)
ROWS = (
    "INSERT INTO toolgate.audit_log (at, stage, action, call_id, tenant_id, actor, detail, prev_hash, hash, seq) "
    "SELECT r.at::timestamptz, r.stage, r.action, r.call_id, r.tenant_id, r.actor, r.detail, r.prev_hash, r.hash, "
    "r.seq FROM jsonb_to_recordset(%s::jsonb) AS r(at text, stage text, action text, call_id text, tenant_id text, "
    "actor text, detail jsonb, prev_hash text, hash text, seq bigint)"
)
ROWS_AND_CHECKPOINT = (
    f"WITH appended AS ({ROWS}) INSERT INTO toolgate.audit_heads (row_count, head_hash, signature, key_id) "
    "VALUES (%s, %s, %s, %s)"
)


LOCK = "SELECT pg_advisory_xact_lock(%s)"
# The chain's lock, then the read of its tail: as statements of a batch (`batch.run`), whose last
# result is the tail's row for `rows_statement`.
HEAD: list[batch.Statement] = [(LOCK, (LOCK_ID,)), (TAIL, None)]


async def append(conn: AsyncConnection[Any], entries: list[Entry]) -> None:
    """Append entries, and the signed checkpoint after them, inside the caller's transaction."""
    if entries:
        query, params = rows_statement(await (await tail(conn)).fetchone(), entries)
        await conn.execute(query, params)


async def tail(conn: AsyncConnection[Any]) -> AsyncCursor[Any]:
    """Take the chain's lock and read its tail, inside the caller's transaction: the cursor
    whose row `rows_statement` takes. In a caller's pipeline (execution's writes), both go with
    it, and their answer comes with its sync.

    Not a pipeline of their own: for two statements psycopg's pipeline costs more client CPU
    than the round trip it saves (docs/performance.md, "Figures behind the code"). A caller that
    batches its statements sends `HEAD` with them instead."""
    await conn.execute(LOCK, (LOCK_ID,))
    return await conn.execute(TAIL)


def rows_statement(row: tuple[Any, ...] | None, entries: list[Entry]) -> batch.Statement:
    """The statement that appends `entries` after the tail `row` (TAIL's one row), and the
    signed checkpoint after them: for the caller to run before it commits, on its own or with
    COMMIT in one batch (`batch.run`)."""
    assert row is not None
    at, prev, count = str(row[0]), str(row[1] or GENESIS), int(row[2])
    rows = []
    for entry in entries:
        digest = chain_hash(prev, at, entry)
        count += 1
        rows.append(
            {
                "at": at,
                "stage": entry.stage,
                "action": entry.action,
                "call_id": entry.call_id,
                "tenant_id": entry.tenant_id,
                "actor": entry.actor,
                "detail": entry.detail,
                "prev_hash": prev,
                "hash": digest,
                "seq": count,
            }
        )
        prev = digest
    signing = signer()
    if signing is None:
        return ROWS, (rows_json(rows),)
    key_id, key = signing
    return ROWS_AND_CHECKPOINT, (rows_json(rows), count, prev, key.sign(checkpoint_bytes(count, prev)), key_id)


class AuditSink:
    """Where a stage audits what it refused outside a handler's own transaction (a forged record,
    bytes that prove nobody): a one-connection pool of its own, opened on first use."""

    def __init__(self, database_url: str, stage: str) -> None:
        self.pool = make_pool(database_url, f"{stage}-audit", max_size=1)
        self._opened = False

    async def write(self, entries: list[Entry]) -> None:
        if not self._opened:
            await self.pool.open()
            self._opened = True
        async with self.pool.connection() as conn, conn.transaction():
            await append(conn, entries)


# --- verifying ---------------------------------------------------------------------------------

# Streamed: rows in id order; checkpoints newest first, each with its head row's position (or None).
VERIFY = (
    f"SELECT id, {AT_TEXT.format('at')}, stage, action, actor, call_id, tenant_id, detail, prev_hash, hash "
    "FROM toolgate.audit_log ORDER BY id"
)
CHECKPOINTS = (
    f"SELECT h.id, {AT_TEXT.format('h.at')}, h.row_count, h.head_hash, h.signature, h.key_id, l.n "
    "FROM toolgate.audit_heads h "
    "LEFT JOIN (SELECT hash, row_number() OVER (ORDER BY id) AS n FROM toolgate.audit_log) l ON l.hash = h.head_hash "
    "ORDER BY h.id DESC"
)


def verify_rows(rows: Iterable[tuple[Any, ...]]) -> tuple[int, int | None]:
    """(rows checked, id of the first broken row or None)."""
    return _walk(rows)[:2]


def _walk(rows: Iterable[tuple[Any, ...]]) -> tuple[int, int | None, int]:
    """(rows checked, id of the first broken row or None, rows in all), in one pass holding one
    hash: the rows come and go as the caller streams them."""
    prev, checked, total = GENESIS, 0, 0
    broken: int | None = None
    for row_id, at, stage, action, actor, call_id, tenant_id, detail, prev_hash, digest in rows:
        total += 1
        if broken is None:
            entry = Entry(stage, action, actor, call_id, tenant_id, detail)
            if prev_hash != prev or chain_hash(prev, at, entry) != digest:
                broken = int(row_id)
            else:
                prev, checked = digest, checked + 1
    return checked, broken, total


@dataclass(frozen=True)
class Checkpoint:
    id: int
    at: str
    row_count: int
    head_hash: str
    signature: bytes
    key_id: str | None = None  # the deployment key that signed it (none before migration 0022)


class Verdict(enum.StrEnum):
    INTACT = "intact"
    UNANCHORED = "unanchored"
    BROKEN = "broken"
    CUT = "cut"
    DIVERGED = "diverged"


@dataclass(frozen=True)
class Report:
    verdict: Verdict
    rows: int
    checked: int
    broken_at: int | None = None
    # The newest signed checkpoint the log still agrees with, and the newest one it does not.
    anchor: Checkpoint | None = None
    violated: Checkpoint | None = None
    # Checkpoints that would have mattered but carry no valid signature (forged), ignored.
    unsigned: int = 0

    @property
    def uncovered(self) -> int:
        """Rows newer than the anchor (appended without a signed checkpoint)."""
        return self.rows - (self.anchor.row_count if self.anchor else 0)

    @property
    def ok(self) -> bool:
        return self.verdict in (Verdict.INTACT, Verdict.UNANCHORED)


def verify(
    rows: Iterable[tuple[Any, ...]],
    checkpoints: Iterable[tuple[Checkpoint, int | None]],
    keys: TrustedKeys | PublicKey,
) -> Report:
    """The log's rows (in id order) against its checkpoints (newest first), each with the position
    of the row holding its head (CHECKPOINTS). A checkpoint whose head is the row at its count
    agrees whoever wrote it; only one that disagrees, or the newest that agrees (the anchor), has its
    signature checked, with the trusted key it names. Each row and checkpoint is read once and none
    is kept: constant state."""
    trusted = keys if isinstance(keys, TrustedKeys) else TrustedKeys([keys])
    checked, broken, total = _walk(rows)
    anchor: Checkpoint | None = None
    violated: Checkpoint | None = None
    violated_in_log, unsigned = False, 0
    for checkpoint, position in checkpoints:
        agrees = position == checkpoint.row_count
        if agrees and anchor is not None:
            continue
        message = checkpoint_bytes(checkpoint.row_count, checkpoint.head_hash)
        if not trusted.ok(checkpoint.key_id, checkpoint.signature, message):
            unsigned += 1
        elif agrees:
            anchor = checkpoint
        else:
            violated, violated_in_log = checkpoint, position is not None
            break
    if broken is not None:
        verdict = Verdict.BROKEN
    elif violated is not None:
        verdict = Verdict.DIVERGED if violated_in_log else Verdict.CUT
    elif anchor is None:
        verdict = Verdict.UNANCHORED
    else:
        verdict = Verdict.INTACT
    return Report(verdict, total, checked, broken, anchor, violated, unsigned)


JUDGMENT = """
SELECT action, detail FROM toolgate.audit_log WHERE action LIKE 'decision_%%' AND detail->>'decision_id' = %s
ORDER BY id DESC LIMIT 1
"""


def judgment(conn: Connection[Any], decision_id: str) -> tuple[str, dict[str, Any]] | None:
    """The last audit row of approval-wait's judgment of a decision: its action and detail."""
    row = conn.execute(JUDGMENT, (decision_id,)).fetchone()
    return (row[0], row[1]) if row is not None else None
