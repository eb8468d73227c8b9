"""The archive of evidence bundles (migration 0037): append-only, never pruned. The pruner keeps a
call's bundle here before retention deletes the call's operational rows (store/retention.py
deletes them only once it is kept); `toolgate evidence` reads it when the rows are gone; `evidence
export` lists the calls made since a time, live and archived, a page at a time."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

# A call whose operational rows are older than %(age)s seconds and whose bundle is not kept yet; not
# one still held for approval (retention keeps it, and its story is not over). Each table's oldest
# are taken by its time index and stop at the batch (a backlog of old rows is not read whole for
# every batch); a call found in several is one.
_UNKEPT = """NOT EXISTS (SELECT 1 FROM toolgate.evidence_bundles e WHERE e.tenant_id = {t}.tenant_id
        AND e.call_id = {t}.call_id)
    AND NOT EXISTS (SELECT 1 FROM toolgate.approvals p
        WHERE p.tenant_id = {t}.tenant_id AND p.call_id = {t}.call_id AND p.status = 'PENDING')"""
_OLD = "now() - make_interval(secs => %(age)s)"
DUE = f"""
SELECT tenant_id, call_id, min(at) FROM (
    (SELECT c.tenant_id, c.call_id, c.at FROM toolgate.calls c
     WHERE c.at < {_OLD} AND {_UNKEPT.format(t="c")} ORDER BY c.at LIMIT %(batch)s)
    UNION ALL
    (SELECT d.tenant_id, d.call_id, d.at FROM toolgate.call_decisions d
     WHERE d.at < {_OLD} AND {_UNKEPT.format(t="d")} ORDER BY d.at LIMIT %(batch)s)
    UNION ALL
    (SELECT a.tenant_id, a.call_id, a.created_at FROM toolgate.approvals a
     WHERE a.status <> 'PENDING' AND a.decided_at < {_OLD} AND {_UNKEPT.format(t="a")}
     ORDER BY a.decided_at LIMIT %(batch)s)
) c
GROUP BY tenant_id, call_id ORDER BY 3, 1, 2 LIMIT %(batch)s
"""
INSERT = """
INSERT INTO toolgate.evidence_bundles (tenant_id, call_id, bundle, called_at)
SELECT r.tenant_id, r.call_id, r.bundle, r.called_at
FROM jsonb_to_recordset(%s::jsonb) AS r(tenant_id text, call_id text, bundle jsonb, called_at timestamptz)
"""
ARCHIVED = """
SELECT bundle FROM toolgate.evidence_bundles WHERE tenant_id = %s AND call_id = %s ORDER BY id DESC LIMIT 1
"""
# The calls made since a time (of a tenant), live or archived, after a (time, tenant, call) cursor.
SINCE = """
SELECT tenant_id, call_id, min(at) AS at, bool_and(archived) AS archived FROM (
    SELECT tenant_id, call_id, at, false AS archived FROM toolgate.calls WHERE at >= %(since)s
    UNION ALL
    SELECT tenant_id, call_id, at, false FROM toolgate.call_decisions WHERE at >= %(since)s
    UNION ALL
    SELECT tenant_id, call_id, called_at, true FROM toolgate.evidence_bundles WHERE called_at >= %(since)s
) c
WHERE %(tenant)s::text IS NULL OR tenant_id = %(tenant)s
GROUP BY tenant_id, call_id
HAVING (min(at), tenant_id, call_id) > (%(after_at)s::timestamptz, %(after_tenant)s, %(after_call)s)
ORDER BY 3, 1, 2 LIMIT %(page)s
"""


async def due(conn: AsyncConnection[Any], age_s: float, batch: int) -> list[tuple[str, str, datetime]]:
    """(tenant_id, call_id, when it was made) of calls whose bundle must be kept before their rows go."""
    cur = await conn.execute(DUE, {"age": age_s, "batch": batch})
    return [(str(t), str(c), at) for t, c, at in await cur.fetchall()]


async def keep(conn: AsyncConnection[Any], bundles: Sequence[tuple[dict[str, Any], datetime]]) -> None:
    """Keep each bundle, with when its call was made, in one statement."""
    rows = [
        {"tenant_id": b["tenant_id"], "call_id": b["call_id"], "bundle": b, "called_at": at.isoformat()}
        for b, at in bundles
    ]
    if rows:
        await conn.execute(INSERT, (json.dumps(rows),))


async def archived(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> dict[str, Any] | None:
    row = await (await conn.execute(ARCHIVED, (tenant_id, call_id))).fetchone()
    return None if row is None else dict(row[0])


async def since(
    conn: AsyncConnection[Any],
    since: datetime,
    tenant_id: str | None,
    after: tuple[datetime, str, str],
    page: int,
) -> list[tuple[str, str, datetime, bool]]:
    """A page of (tenant_id, call_id, when made, only archived) of the calls made since `since`,
    after the cursor `after` (the last row of the page before)."""
    params = {
        "since": since,
        "tenant": tenant_id,
        "after_at": after[0],
        "after_tenant": after[1],
        "after_call": after[2],
        "page": page,
    }
    cur = await conn.execute(SINCE, params)
    return [(str(t), str(c), at, bool(only)) for t, c, at, only in await cur.fetchall()]
