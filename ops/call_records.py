"""The decisions' records as operators read them (issue 51, parts 3 and 6): `toolgate policy
decided CALL_ID` (every recorded decision on a call, with the versions that made it and its
inputs) and `toolgate whatif` (the recorded decisions replayed under a candidate set: ops/whatif.py).

Both only read: in a read-only transaction, so not a row of Postgres changes; neither touches Kafka.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg

from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.registry import load_registry
from toolgate.ops import whatif
from toolgate.scrubber import SCRUBBER
from toolgate.settings import Settings
from toolgate.store import call_decisions
from toolgate.store.rows import Decided
from toolgate.workers.policy import witness

T = TypeVar("T")


def read_only(database_url: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
    """Run `work` in one read-only transaction: Postgres refuses any write inside it."""

    async def run() -> T:
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await conn.set_read_only(True)
            async with conn.transaction():
                return await work(conn)

    return asyncio.run(run())


def decided(settings: Settings, call_id: str, tenant_id: str | None = None) -> list[Decided]:
    """Every recorded decision on `call_id`, in the order made."""
    return opened(read_only(settings.database_url, lambda conn: call_decisions.of_call(conn, call_id, tenant_id)))


def opened(rows: list[Decided]) -> list[Decided]:
    """The rows as their readers take them: each policy row's record opened into the call it judged
    and validation's pass of it (workers/policy/witness.py `opened`)."""
    return [seen for row in rows for seen in witness.opened(row, SCRUBBER.obj)]


def what_if(
    settings: Settings,
    policy_dir: Path,
    contracts_dir: Path | None = None,
    since_s: float = 86_400.0,
    tenant_id: str | None = None,
) -> whatif.Report:
    """The recorded decisions of the last `since_s` seconds (of `tenant_id`) replayed under the set in
    `policy_dir`, admitted against the deployed contracts, or the shipped ones plus `contracts_dir`'s
    (whose arguments' validation is then replayed too), read and replayed a part at a time.
    ContractRefused when the set is refused."""
    contracts = load_registry(contracts_dir if contracts_dir is not None else settings.contracts_dir)
    candidate = load_policy_set(contracts, policy_dir)
    since_ms = int((time.time() - since_s) * 1000)
    revalidate = contracts_dir is not None

    async def replayed(conn: psycopg.AsyncConnection[Any]) -> whatif.Report:
        report = whatif.report_for(candidate, revalidate)
        async for rows in call_decisions.since(conn, since_ms, tenant_id):  # the window a part at a time
            whatif.replay(opened(rows), contracts, candidate, revalidate, report)
        return report

    return read_only(settings.database_url, replayed)
