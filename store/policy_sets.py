"""toolgate.policy_deployments and toolgate.policy_shadow_disagreements (migration 0028, issue 51
parts 4 and 5): the policy sets operators deployed, each signed, and the calls on which a shadow
set disagreed with the enforcing one.

The policy stage reads which deployment is current for each role in its round's one batch
(`current_statement`, `current`), fetches a deployment's files only when that changed (`fetched`),
and writes a round's disagreements in its last batch (`disagreements_statement`). Operators deploy
(`next_id`, `insert`), list the history (`history`) and report the disagreements (`report`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg.types.json import Jsonb

from toolgate.store import batch

ENFORCING = "enforcing"
SHADOW = "shadow"

# The newest deployment of each role (at most two rows).
CURRENT = "SELECT DISTINCT ON (role) role, id FROM toolgate.policy_deployments ORDER BY role, id DESC"
FETCH = """
SELECT id, role, digest, files, deployed_by, key_id, signature, deployed_at
FROM toolgate.policy_deployments WHERE id = ANY(%b::bigint[])
"""
NEXT_ID = "SELECT nextval(pg_get_serial_sequence('toolgate.policy_deployments', 'id'))"
INSERT = """
INSERT INTO toolgate.policy_deployments (id, role, digest, files, deployed_by, key_id, signature)
VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING deployed_at
"""
NEWEST = """
SELECT id, role, digest, NULL::jsonb AS files, deployed_by, key_id, signature, deployed_at
FROM toolgate.policy_deployments WHERE role = %s ORDER BY id DESC LIMIT 1
"""
HISTORY = """
SELECT id, role, digest, NULL::jsonb AS files, deployed_by, key_id, signature, deployed_at
FROM toolgate.policy_deployments ORDER BY id DESC LIMIT %s
"""
RECORD = """
INSERT INTO toolgate.policy_shadow_disagreements (tenant_id, call_id, tool_name, tool_version, enforcing_digest,
    shadow_digest, enforcing_class, enforcing_code, enforcing_approvals, shadow_class, shadow_code, shadow_approvals)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[],
    %b::int[], %b::text[], %b::text[], %b::int[])
"""
REPORT = """
SELECT tool_name, enforcing_class, enforcing_code, shadow_class, shadow_code, shadow_digest, count(*),
    (array_agg(call_id ORDER BY at DESC))[1:%s]
FROM toolgate.policy_shadow_disagreements WHERE at >= now() - make_interval(secs => %s)
GROUP BY tool_name, enforcing_class, enforcing_code, shadow_class, shadow_code, shadow_digest
ORDER BY count(*) DESC, tool_name
"""


@dataclass(frozen=True)
class Deployment:
    """One deployment: a role's set (its files by name), or a shadow's end (no digest, no files)."""

    id: int
    role: str
    digest: str | None
    files: dict[str, str] | None
    deployed_by: str
    key_id: str
    signature: bytes
    deployed_at: dt.datetime | None = None


@dataclass(frozen=True)
class Reported:
    tool_name: str
    enforcing: tuple[str, str]
    shadow: tuple[str, str]
    shadow_digest: str
    count: int
    examples: list[str]


def current_statement() -> batch.Statement:
    return CURRENT, None


def current(result: batch.Result) -> dict[str, int]:
    """The current deployment's id by role."""
    return {str(row[0]): int(row[1]) for row in result.rows}


def _deployment(row: Sequence[Any]) -> Deployment:
    return Deployment(int(row[0]), row[1], row[2], row[3], row[4], row[5], bytes(row[6]), row[7])


async def fetched_instead(conn: AsyncConnection[Any], ids: Sequence[int]) -> dict[int, Deployment]:
    """Roll back the round's open transaction and fetch these deployments, in one round trip."""
    *_, found = await batch.run(conn, [("ROLLBACK", None), (FETCH, (list(ids),))])
    return {d.id: d for d in map(_deployment, found.rows)}


async def next_id(conn: AsyncConnection[Any]) -> int:
    cur = await conn.execute(NEXT_ID)
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def newest(conn: AsyncConnection[Any], role: str) -> Deployment | None:
    """A role's current deployment (without its files), or None."""
    cur = await conn.execute(NEWEST, (role,))
    row = await cur.fetchone()
    return None if row is None else _deployment(row)


async def insert(conn: AsyncConnection[Any], d: Deployment) -> dt.datetime:
    files = None if d.files is None else Jsonb(d.files)
    cur = await conn.execute(INSERT, (d.id, d.role, d.digest, files, d.deployed_by, d.key_id, d.signature))
    row = await cur.fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def history(conn: Connection[Any], limit: int = 20) -> list[Deployment]:
    """The newest deployments first, without their files."""
    return [_deployment(row) for row in conn.execute(HISTORY, (limit,)).fetchall()]


def current_sets(conn: Connection[Any]) -> dict[str, Deployment]:
    """The current deployment of each role, with its files."""
    ids = current(batch.Result(["role", "id"], conn.execute(CURRENT).fetchall()))
    rows = conn.execute(FETCH, (list(ids.values()),)).fetchall()
    return {d.role: d for d in map(_deployment, rows)}


def disagreements_statement(rows: Sequence[Sequence[Any]]) -> batch.Statement:
    """The insert of a round's disagreements, each (tenant, call_id, tool, version, enforcing
    digest, shadow digest, enforcing class, code, approvals, shadow class, code, approvals)."""
    columns: list[list[Any]] = [[] for _ in range(12)]
    for row in rows:
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    return RECORD, tuple(columns)


def report(conn: Connection[Any], since_s: float, examples: int = 3) -> list[Reported]:
    rows = conn.execute(REPORT, (examples, since_s)).fetchall()
    return [Reported(r[0], (r[1], r[2]), (r[3], r[4]), r[5], int(r[6]), list(r[7])) for r in rows]
