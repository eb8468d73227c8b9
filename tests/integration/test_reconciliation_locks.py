"""The reconciler asks a provider with no row lock held, and leaves alone a key that someone else
settled while it asked.

Against the session's real Postgres, in a database of this module's own (the Postgres-only
tier: no worker runs, so no other reconciler sees these keys), and a real HTTP provider on loopback whose status
query answers only when the test lets it: while the question is in flight, the test does what
another transaction would (lock the key, settle it), then lets the provider answer.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aiohttp import web
from psycopg.types.json import Jsonb

from tests.unit.factories import as_released_0_1, registry, stage_record
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult
from toolgate.trust import checkpoint_keys

from .conftest import Database
from .loopback_provider import reconciler_asking

TOOL = ("payment.charge_card", "1.0.0")  # an http contract with a status query
ANSWER = {"status": "completed", "response": {"charge_id": "ch_provider", "status": "succeeded"}}
Meanwhile = Callable[[psycopg.AsyncConnection[Any], str], Awaitable[None]]


@pytest.fixture
def url(database: Database) -> str:
    return database.database_url


@pytest.fixture(autouse=True)
def unsigned_audit(monkeypatch: pytest.MonkeyPatch) -> None:
    """This database's audit log needs no checkpoints signed with the host's deployment key."""
    monkeypatch.setattr(checkpoint_keys, "_source", None)


def stuck_key(url: str, released_0_1: bool = False) -> tuple[str, str]:
    """A PENDING key of the http contract whose execution worker died: its lease has expired.
    With `released_0_1`, its request as release 0.1.0 wrote it (a worker that died before an
    upgrade)."""
    contract = registry().get(*TOOL)
    key, call_id = f"key-{uuid.uuid4().hex}", f"call_{uuid.uuid4().hex}"
    record = stage_record(contract, call_id=call_id, idempotency_key=key)
    request = as_released_0_1(record) if released_0_1 else codec().encode(record)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, "
            "tool_version, executor, call_id, home_partition, request, lease_owner, lease_until, expires_at) "
            "VALUES ('acme', %s, 'h', 'PENDING', %s, %s, 'http', %s, 0, %s, 'execution:gone', "
            "now() - interval '1 second', now() + interval '1 day')",
            (key, *TOOL, call_id, request),
        )
    return key, call_id


async def _pass_while_asked(url: str, tmp_path: Path, key: str, meanwhile: Meanwhile) -> dict[str, int]:
    """One reconciliation pass; `meanwhile` runs on another connection while the provider's
    status query for `key` is in flight, and the provider answers ANSWER once it is done."""
    asked, release = asyncio.Event(), asyncio.Event()

    async def status(_: web.Request) -> web.Response:
        asked.set()
        await release.wait()
        return web.json_response(ANSWER)

    async with reconciler_asking(url, tmp_path, status) as reconciler:
        reconciling = asyncio.create_task(reconciler.reconcile_once())
        try:
            await asyncio.wait_for(asked.wait(), 20)
            async with await psycopg.AsyncConnection.connect(url) as other:
                await meanwhile(other, key)
        finally:
            release.set()
            counts = await asyncio.wait_for(reconciling, 30)  # the pass ends before its provider does
        return counts


def _rows(url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def test_the_provider_is_asked_with_the_key_unlocked(url: str, tmp_path: Path) -> None:
    key, call_id = stuck_key(url)

    async def lock_it(other: psycopg.AsyncConnection[Any], key: str) -> None:
        async with other.transaction():
            cur = await other.execute(
                "SELECT status FROM toolgate.idempotency_keys WHERE idempotency_key = %s FOR UPDATE NOWAIT", (key,)
            )
            assert await cur.fetchall() == [("PENDING",)]

    counts = asyncio.run(_pass_while_asked(url, tmp_path, key, lock_it))

    assert counts["completed"] == 1
    [(status, response)] = _rows(
        url, "SELECT status, response FROM toolgate.idempotency_keys WHERE idempotency_key = %s", key
    )
    assert status == "COMPLETED" and response["data"] == ANSWER["response"]
    assert _rows(url, "SELECT action FROM toolgate.audit_log WHERE call_id = %s", call_id) == [("completed",)]


def test_a_key_a_0_1_0_worker_left_pending_is_settled_after_the_upgrade(url: str, tmp_path: Path) -> None:
    """Release 0.2.0 nested the call in StageRecord: the request kept with a key by 0.1.0 is
    still read (schemas/upgrades.py), so a crash across the upgrade is still reconciled."""
    key, call_id = stuck_key(url, released_0_1=True)

    async def nothing(other: psycopg.AsyncConnection[Any], key: str) -> None:
        return None

    counts = asyncio.run(_pass_while_asked(url, tmp_path, key, nothing))

    assert counts["completed"] == 1
    [(status, response)] = _rows(
        url, "SELECT status, response FROM toolgate.idempotency_keys WHERE idempotency_key = %s", key
    )
    assert status == "COMPLETED" and response["data"] == ANSWER["response"]
    results = [codec().model_of(bytes(p)) for (p,) in _rows(url, "SELECT payload FROM toolgate.outbox")]
    [answer] = [r for r in results if isinstance(r, ExecutionResult) and r.call_id == call_id]
    assert answer.outcome.taxonomy_class == "SUCCESS"


def test_a_key_settled_while_the_provider_was_asked_is_left_as_settled(url: str, tmp_path: Path) -> None:
    key, call_id = stuck_key(url)
    theirs = {"data": {"settled_by": "execution"}}
    published = _rows(url, "SELECT count(*) FROM toolgate.outbox")

    async def settle_it(other: psycopg.AsyncConnection[Any], key: str) -> None:
        async with other.transaction():
            await other.execute("SET LOCAL lock_timeout = '2s'")
            await other.execute(
                "UPDATE toolgate.idempotency_keys SET status = 'COMPLETED', response = %s, completed_at = now(), "
                "lease_owner = NULL, lease_until = NULL WHERE idempotency_key = %s",
                (Jsonb(theirs), key),
            )

    counts = asyncio.run(_pass_while_asked(url, tmp_path, key, settle_it))

    assert counts["completed"] == 0
    assert _rows(url, "SELECT status, response FROM toolgate.idempotency_keys WHERE idempotency_key = %s", key) == [
        ("COMPLETED", theirs)
    ]
    assert _rows(url, "SELECT action FROM toolgate.audit_log WHERE call_id = %s", call_id) == []
    assert _rows(url, "SELECT count(*) FROM toolgate.outbox") == published
