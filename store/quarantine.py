"""toolgate.tool_quarantine (migration 0024): the tool versions no call may run until an operator
releases them. Execution quarantines a READ_ONLY tool version whose statement tried to write, in
the transaction that records the call (workers/execution/recording.py); policy reads the round's
tool versions in its round's batch and refuses the quarantined (workers/policy/decision.py);
operators quarantine and release by hand (ops/quarantine.py), each with an audit entry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store import batch

Version = tuple[str, str]  # (tool_name, tool_version)

# The round's tool versions that are quarantined (policy's batch).
AMONG = """
SELECT q.tool_name, q.tool_version FROM toolgate.tool_quarantine q
JOIN unnest(%b::text[], %b::text[]) AS r(tool_name, tool_version) USING (tool_name, tool_version)
"""
HOLD = """
INSERT INTO toolgate.tool_quarantine (tool_name, tool_version, reason, actor, call_id, tenant_id)
SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[])
ON CONFLICT (tool_name, tool_version) DO NOTHING
RETURNING tool_name, tool_version
"""
RELEASE = """
DELETE FROM toolgate.tool_quarantine WHERE tool_name = %s AND tool_version = %s
RETURNING reason, actor, call_id, tenant_id
"""
LISTED = """
SELECT tool_name, tool_version, reason, actor, call_id, tenant_id, since FROM toolgate.tool_quarantine
ORDER BY tool_name, tool_version
"""


@dataclass(frozen=True, slots=True)
class Quarantine:
    """Why a tool version is held, by whom, and the call that tripped the detector (if one did)."""

    tool_name: str
    tool_version: str
    reason: str
    actor: str
    call_id: str | None = None
    tenant_id: str | None = None
    since: Any = None

    @property
    def version(self) -> Version:
        return self.tool_name, self.tool_version


def among(versions: Iterable[Version]) -> batch.Statement:
    """The statement of a batch that finds which of these tool versions are quarantined
    (`quarantined` reads its result)."""
    wanted = sorted(set(versions))
    return AMONG, ([v[0] for v in wanted], [v[1] for v in wanted])


def quarantined(result: batch.Result) -> frozenset[Version]:
    return frozenset((row[0], row[1]) for row in result.rows)


async def hold(conn: AsyncConnection[Any], held: Sequence[Quarantine]) -> None:
    """Quarantine these tool versions, in the caller's transaction (or pipeline); one already
    quarantined keeps its first reason."""
    if held:
        await conn.execute(HOLD, _columns(held))


async def hold_one(conn: AsyncConnection[Any], held: Quarantine) -> bool:
    """Quarantine one tool version; False: it already was (and keeps its first reason)."""
    cur = await conn.execute(HOLD, _columns([held]))
    return bool(await cur.fetchall())


def _columns(held: Sequence[Quarantine]) -> list[list[str | None]]:
    names = ("tool_name", "tool_version", "reason", "actor", "call_id", "tenant_id")
    return [[getattr(q, name) for q in held] for name in names]


async def release(conn: AsyncConnection[Any], version: Version) -> Quarantine | None:
    """Release a tool version (an operator's): its quarantine as it was, or None if it had none."""
    cur = await conn.execute(RELEASE, version)
    row = await cur.fetchone()
    return Quarantine(version[0], version[1], *row) if row is not None else None


async def listed(conn: AsyncConnection[Any]) -> list[Quarantine]:
    cur = await conn.execute(LISTED)
    return [Quarantine(*row) for row in await cur.fetchall()]
