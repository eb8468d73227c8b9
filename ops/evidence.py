"""`toolgate evidence CALL_ID` and `toolgate evidence export` (docs/evidence.md): a call's bundle
from its rows (workers/reconciliation/evidence.py), or from the archive once retention pruned them;
every call made since a time, one file each, a page at a time.

Reads only, each in one read-only REPEATABLE READ transaction: a bundle's rows, its tree head and
the leaves its proofs are computed from are one snapshot."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import psycopg

from toolgate.schemas.errors import ToolgateError
from toolgate.settings import Settings
from toolgate.store import evidence as store
from toolgate.store import evidence_archive
from toolgate.workers.reconciliation.evidence import PublicKeys, assemble

T = TypeVar("T")
PAGE = 50  # calls exported per transaction (one stream of the log's leaves for their proofs)
WAIT_EVERY_S = 1.0
# A call is live while its binding or its decisions are: retention prunes them with its approval,
# and once they are gone the archive holds the bundle as it was before (its key and observations
# may outlive them for a while; the archived bundle has them too).
LIVE = ("proposal", "decisions")


class NoEvidence(ToolgateError):
    """No call of that id (of that tenant), live or archived; or several tenants have one."""


async def _snapshot(database_url: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        await conn.set_read_only(True)
        async with conn.transaction():
            return await work(conn)


def has_rows(bundle: dict[str, Any]) -> bool:
    """Whether a live bundle found the call's binding or decisions (else: pruned, or unknown)."""
    return any(bundle.get(name) for name in LIVE)


async def _bundle(conn: psycopg.AsyncConnection[Any], keys: PublicKeys, tenant: str | None, call_id: str) -> Any:
    if tenant is None:
        tenants = await store.tenants_of(conn, call_id)
        if len(tenants) != 1:
            which = f"the tenants {', '.join(tenants)} each have" if tenants else "no tenant has"
            raise NoEvidence(f"{which} a call {call_id}" + (": name one with --tenant" if tenants else ""))
        tenant = tenants[0]
    (live,) = await assemble(conn, keys, [(tenant, call_id)])
    if has_rows(live):
        return live
    kept = await evidence_archive.archived(conn, tenant, call_id)
    if kept is not None:
        return kept
    if live["audit"]["rows"] or live["execution"] or live["observations"]:
        return live  # only these are left, and no archive: what there is
    raise NoEvidence(f"no call {call_id} of tenant {tenant}, live or archived")


def bundle(settings: Settings, call_id: str, tenant: str | None = None, wait_s: float = 0.0) -> dict[str, Any]:
    """The call's bundle; with `wait_s`, waits that long at most for a tree head that covers all
    its audit rows (the reconciliation worker takes one every TOOLGATE_AUDIT_TREE_SECONDS)."""
    keys = PublicKeys.of(settings)
    deadline = time.monotonic() + wait_s
    while True:
        found: dict[str, Any] = asyncio.run(
            _snapshot(settings.database_url, lambda conn: _bundle(conn, keys, tenant, call_id))
        )
        if not found["audit"]["uncovered"] or time.monotonic() >= deadline:
            return found
        time.sleep(WAIT_EVERY_S)


def file_name(tenant_id: str, call_id: str) -> str:
    """A bundle's file in an export: tenant and call, each escaped so that no id makes a path."""
    return f"{quote(tenant_id, safe='')}.{quote(call_id, safe='')}.json"


def export(settings: Settings, since: datetime, out: Path, tenant: str | None = None) -> int:
    """Write the bundle of every call made since `since` (of `tenant`) into `out`, one file each:
    live calls assembled, archived ones as kept. Returns how many were written."""
    keys = PublicKeys.of(settings)
    out.mkdir(parents=True, exist_ok=True)
    after: tuple[datetime, str, str] = (datetime.fromtimestamp(0, UTC), "", "")
    written = 0

    async def page(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str, datetime, bool]]:
        calls = await evidence_archive.since(conn, since, tenant, after, PAGE)
        live = [(t, c) for t, c, _, archived in calls if not archived]
        bundles = {(b["tenant_id"], b["call_id"]): b for b in await assemble(conn, keys, live)} if live else {}
        for t, c, _, _ in calls:
            found = bundles.get((t, c))
            if found is None or not has_rows(found):
                found = await evidence_archive.archived(conn, t, c) or found
            if found is not None:
                (out / file_name(t, c)).write_text(json.dumps(found, sort_keys=True) + "\n")
        return calls

    while calls := asyncio.run(_snapshot(settings.database_url, page)):
        written += len(calls)
        last_tenant, last_call, last_at, _ = calls[-1]
        after = (last_at, last_tenant, last_call)
        if len(calls) < PAGE:
            break
    return written
