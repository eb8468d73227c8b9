"""The reconciler: resolves idempotency keys a crash left PENDING, and expires.

Every pass, in three steps, so no provider's answer is awaited while a row is locked:
  1. read the keys whose lease expired (a short transaction; FOR UPDATE SKIP LOCKED leaves out
     keys a stage holds at that moment);
  2. decide each with no transaction open (decision.py), asking the provider's status query
     where there is one;
  3. in one transaction, lock each key again (SKIP LOCKED) only if it is still as read, and
     apply what was decided; a key another reconciler or the execution stage settled or took
     over in the meantime is left as they left it.
It also marks keys past their deduplication window EXPIRED and, as a backstop for
approval-wait, AUTO_DENIES approvals past their expiry. Every decision is audited. The keys'
statements are store/keys_reconciliation.py's. What it
forgets, and when, is retention.py's (run by pruner.py on its own timer).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import fingerprint, usage_events
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.settings import Settings
from toolgate.states import KeyStatus
from toolgate.store import approvals, audit, values
from toolgate.store import keys_reconciliation as stuck_keys
from toolgate.store import outbox as outbox_rows
from toolgate.store.db import make_pool
from toolgate.store.keys_reconciliation import LeaseExpired
from toolgate.store.outbox import OutboxRow
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import Address
from toolgate.workers.approval.decision import ticket_of
from toolgate.workers.approval.sweep import expire_approvals
from toolgate.workers.execution import pending as execution
from toolgate.workers.execution.performer import Performer
from toolgate.workers.reconciliation import decision
from toolgate.workers.reconciliation.decision import STAGE, PendingKey, Resolution
from toolgate.workers.runtime import deadletters, outbox

log = logging.getLogger("toolgate.reconciliation")
# What a pass reports, in this order (`toolgate reconcile` prints it).
Conn = AsyncConnection[Any]
Rows = list[OutboxRow]  # what a decision publishes, through the outbox
COUNTS = ("redriven", "completed", "failed_final", "unresolved", "expired", "approvals_expired")


@dataclass(frozen=True)
class Stuck:
    """A PENDING key whose lease expired, as step 1 read it, and its call."""

    row: LeaseExpired
    call: execution.Pending
    pending: PendingKey

    def audited(self, resolution: Resolution) -> audit.Entry:
        row = self.row
        detail = {
            "key": fingerprint(row.idempotency_key),
            "executor": self.pending.executor,
            "detail": resolution.detail,
        }
        return audit.Entry(STAGE, resolution.action, "toolgate", row.call_id, row.tenant_id, detail)


def scrubbed(effect: execution.Effect) -> execution.Effect:
    """The provider's status answer, as the decision reads it (its result scrubbed)."""
    return execution.Done(SCRUBBER.obj(effect.data)) if isinstance(effect, execution.Done) else effect


class Reconciler:
    def __init__(self, registry: Registry, settings: Settings, batch: int = 200) -> None:
        self.registry = registry
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.batch = batch
        self.pool = make_pool(settings.database_url, STAGE, max_size=2)
        self.performer = Performer.of(settings)
        self.http = self.performer.http
        self._opened = False
        self.verification_window_ms = int(settings.verification_window_seconds * 1000)
        # A re-driven call waits this long for an execution worker before it is re-driven
        # again: longer than a worker's restart and group rejoin.
        self.redrive_grace_s = max(settings.lease_seconds, 30.0)

    async def open(self) -> None:
        if not self._opened:
            await self.pool.open()
            await self.http.open()
            self._opened = True

    async def reconcile_once(self) -> dict[str, int]:
        """One pass; returns how many keys it resolved each way."""
        await self.open()
        counts = dict.fromkeys(COUNTS, 0)
        now = int(time.time() * 1000)
        decided = [(stuck, await self._decide(stuck, now)) for stuck in await self._stuck(now)]
        async with self.pool.connection() as conn, conn.transaction():
            rows: Rows = []
            entries: list[audit.Entry] = []
            for stuck, resolution in decided:
                if not await stuck_keys.still_stuck(conn, stuck.row):
                    continue  # settled, re-driven or taken over since step 1: theirs now
                counts[resolution.action] += 1
                entries.append(stuck.audited(resolution))
                rows += await self._apply(conn, stuck, resolution, now)
            counts["expired"] = await stuck_keys.expire(conn)
            # A backstop for approval-wait's own sweep: expired tickets AUTO_DENY even while it is down.
            counts["approvals_expired"] = await expire_approvals(conn, self.topics, STAGE)
            await outbox_rows.enqueue(conn, rows, self.topics)
            await audit.append(conn, entries)
        if any(v for k, v in counts.items() if k != "unresolved"):
            log.info("reconciled", extra={"stage": STAGE, "action": "reconciled", "count": sum(counts.values())})
        return counts

    async def _stuck(self, now: int) -> list[Stuck]:
        """Step 1: the keys whose lease expired; the transaction ends before anyone is asked."""
        async with self.pool.connection() as conn, conn.transaction():
            return [self._read(row, now) for row in await stuck_keys.lease_expired(conn, self.batch)]

    def _read(self, row: LeaseExpired, now: int) -> Stuck:
        record = codec().decode(row.request, StageRecord)
        contract = self.registry.get(record.call.tool_name, record.call.tool_version)
        pending = PendingKey(row.executor, bool(contract.executor.get("status_query")), row.created_at_ms)
        return Stuck(row, execution.pending(record, contract, row.idempotency_key, now), pending)

    async def _decide(self, stuck: Stuck, now: int) -> Resolution:
        """Step 2, with no transaction open: the provider is asked only here."""
        first = decision.triage(stuck.pending)
        if not isinstance(first, decision.Ask):
            return first
        answer = scrubbed(await self.performer.drive(None, execution.status(stuck.call, now)))
        return decision.resolve(stuck.pending, answer, now_ms=now, window_ms=self.verification_window_ms)

    async def _apply(self, conn: Conn, stuck: Stuck, resolution: Resolution, now: int) -> Rows:
        """Step 3, under the key's row lock: settle or hand over the key; what to publish."""
        row, record = stuck.row, stuck.call.record
        match resolution:
            case decision.Redrive():
                grace = self.redrive_grace_s
                await stuck_keys.hand_over(conn, row.tenant_id, row.idempotency_key, execution.REDRIVE_OWNER, grace)
                return [outbox.item("executable", record.call.home_partition, record)]
            case decision.Complete(data):
                done = await self.performer.drive(conn, execution.complete(stuck.call, data, STAGE, now))
                if done.status is KeyStatus.FAILED_FINAL:  # the provider says it failed: its value is freed
                    await values.release(conn, usage_events(record.call), ended=True)
                return await _settle(conn, stuck, done)
            case decision.FailFinal():
                if resolution.detail == decision.PROVIDER_FAILED:  # no effect, says the provider: its value is freed
                    await values.release(conn, usage_events(record.call), ended=True)
                failed = execution.fail_closed(stuck.call, resolution.message, STAGE, now)
                letter = deadletters.for_request(
                    record,
                    row.request,
                    stage=STAGE,
                    taxonomy=TaxonomyClass.UNKNOWN_ERROR,
                    reason=resolution.detail,
                    now_ms=now,
                )
                address = Address.of(record.call, record.traceparent, key=record.call.call_id)
                dead = outbox.record("deadletter", letter, address)
                return [*await _settle(conn, stuck, failed), dead]
            case decision.Leave():
                return []


async def _settle(conn: Conn, stuck: Stuck, settled: execution.Settled) -> Rows:
    """The key's end, the ticket that released its operation (if one did) spent; its result."""
    row = stuck.row
    await stuck_keys.settle(
        conn, row.tenant_id, row.idempotency_key, settled.status, settled.response, settled.error_code
    )
    approval_id = ticket_of(stuck.call.record)  # an edited call's ticket is named by its payload too
    await approvals.spend_operation(conn, approval_id, row.tenant_id, row.idempotency_key)
    return [outbox.item("results", stuck.call.record.call.home_partition, settled.result)]
