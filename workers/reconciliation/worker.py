"""The reconciliation worker: resolves idempotency keys a crash left PENDING, and expires.

Every pass, for keys whose lease expired (FOR UPDATE SKIP LOCKED, so passes never collide):
  postgres executor  PENDING means the effect's transaction never committed: re-drive the
                     stored request onto tool.executable; the key is handed to whichever
                     execution worker receives it.
  http with a status query  ask the provider: completed -> COMPLETED with the provider's
                     result; never received -> re-drive; still unknown -> ask again next
                     pass, until the verification window closes.
  no status query, or the window closed  -> FAILED_FINAL: the agent gets a fail-closed
                     observation and the request is dead-lettered for an operator.
It also marks keys past their deduplication window EXPIRED and, as a backstop for
approval-wait, AUTO_DENIES approvals past their expiry. Every decision is audited. What it
forgets, and when, is retention.py's (run by pruner.py on its own timer).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from psycopg.types.json import Jsonb

from toolgate.contracts.registry import Registry
from toolgate.hashing import fingerprint
from toolgate.schemas.codec import codec
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.taxonomy import Taxonomy
from toolgate.telemetry import SCRUBBER
from toolgate.topics.catalog import Topics
from toolgate.workers.approval.sweep import expire_approvals
from toolgate.workers.execution.answers import stored_response, verification_for
from toolgate.workers.execution.executors import Done, Failed, Job, run_after_effects
from toolgate.workers.execution.http import HttpExecutor
from toolgate.workers.execution.idempotency import REDRIVE_OWNER
from toolgate.workers.runtime import audit, deadletters, outbox
from toolgate.workers.runtime.db import make_pool
from toolgate.workers.runtime.results import outcome, result

log = logging.getLogger("toolgate.reconciliation")
STAGE = "reconciliation"

STUCK = """
SELECT tenant_id, idempotency_key, executor, request, attempt, call_id, (extract(epoch FROM created_at) * 1000)::bigint
FROM toolgate.idempotency_keys
WHERE status = 'PENDING' AND lease_until < now()
ORDER BY lease_until LIMIT %s FOR UPDATE SKIP LOCKED
"""
HAND_OVER = """
UPDATE toolgate.idempotency_keys SET lease_owner = %s, lease_until = now() + make_interval(secs => %s)
WHERE tenant_id = %s AND idempotency_key = %s
"""
SETTLE = """
UPDATE toolgate.idempotency_keys SET status = %s, response = %s, error_code = %s, completed_at = now(),
    lease_owner = NULL, lease_until = NULL
WHERE tenant_id = %s AND idempotency_key = %s
"""
EXPIRE = """
UPDATE toolgate.idempotency_keys SET status = 'EXPIRED'
WHERE (tenant_id, idempotency_key) IN (
    SELECT tenant_id, idempotency_key FROM toolgate.idempotency_keys
    WHERE expires_at < now() AND status IN ('COMPLETED', 'FAILED_RETRYABLE', 'FAILED_FINAL', 'COMPENSATED')
    LIMIT 5000 FOR UPDATE SKIP LOCKED)
"""


class Reconciler:
    def __init__(self, registry: Registry, settings: Settings, batch: int = 200) -> None:
        self.registry = registry
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.batch = batch
        self.pool = make_pool(settings.database_url, STAGE, max_size=2)
        self.http = HttpExecutor(settings, SecretProvider(settings.secrets_path))
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
        counts = {
            "redriven": 0,
            "completed": 0,
            "failed_final": 0,
            "unresolved": 0,
            "expired": 0,
            "approvals_expired": 0,
        }
        now = int(time.time() * 1000)
        async with self.pool.connection() as conn, conn.transaction():
            cur = await conn.execute(STUCK, (self.batch,))
            rows: list[outbox.OutboxRow] = []
            entries: list[audit.Entry] = []
            for tenant_id, key, executor, request, _attempt, call_id, created_ms in await cur.fetchall():
                record = codec().decode(bytes(request), StageRecord)
                contract = self.registry.get(record.tool_name, record.tool_version)
                job = Job(record, contract, key, now + contract.timeout_ms)
                decision, detail = "failed_final", "the outcome cannot be verified: no status query"
                effect: Any = None
                if executor == "postgres":
                    decision, detail = "redriven", "no committed effect: re-driven"
                elif executor == "http" and contract.executor.get("status_query"):
                    effect = await self.http.status(job, now)
                    if isinstance(effect, Done):
                        effect = Done(SCRUBBER.obj(effect.data))
                        decision, detail = "completed", "the provider reports the call completed"
                    elif isinstance(effect, Failed) and not effect.final:
                        decision, detail = "redriven", "the provider never received the call: re-driven"
                    elif isinstance(effect, Failed):
                        decision, detail = "failed_final", "the provider reports the call failed"
                    elif now - created_ms < self.verification_window_ms:
                        decision, detail = "unresolved", f"still unknown: {getattr(effect, 'reason', '')}"
                counts[decision] += 1
                key_fp = fingerprint(key)
                entries.append(
                    audit.Entry(
                        STAGE,
                        decision,
                        "toolgate",
                        call_id,
                        tenant_id,
                        {"key": key_fp, "executor": executor, "detail": detail},
                    )
                )
                if decision == "redriven":
                    await conn.execute(HAND_OVER, (REDRIVE_OWNER, self.redrive_grace_s, tenant_id, key))
                    rows.append(outbox.item("executable", record.home_partition, record))
                elif decision == "completed":
                    warnings = list(record.warnings)
                    if "after_effect" in contract.binding:  # recorded once, with COMPLETED
                        [error] = await run_after_effects(conn, [(job, effect.data)])
                        if error is not None:
                            warnings.append(f"the effect happened, but recording it here failed: {error}")
                    res = result(
                        record,
                        stage=STAGE,
                        result_outcome=outcome(Taxonomy.SUCCESS),
                        data=effect.data,
                        traceparent=record.traceparent,
                        home_partition=record.home_partition,
                        now_ms=now,
                        warnings=warnings,
                        attempt_number=record.attempt,
                        approval_id=record.approval_id,
                        verification=verification_for(job, effect.data),
                    )
                    await conn.execute(SETTLE, ("COMPLETED", Jsonb(stored_response(res)), None, tenant_id, key))
                    rows.append(outbox.item("results", record.home_partition, res))
                elif decision == "failed_final":
                    res = result(
                        record,
                        stage=STAGE,
                        traceparent=record.traceparent,
                        home_partition=record.home_partition,
                        now_ms=now,
                        warnings=record.warnings,
                        approval_id=record.approval_id,
                        result_outcome=outcome(
                            Taxonomy.UNKNOWN_ERROR, fail_closed=True, next_action="escalate_to_operator"
                        ),
                        errors=[
                            FieldError(
                                field=None,
                                code="outcome_unverifiable",
                                message=f"{detail}; whether the effect happened is unknown and an "
                                "operator must verify it. Do not retry.",
                            )
                        ],
                    )
                    await conn.execute(
                        SETTLE, ("FAILED_FINAL", Jsonb(stored_response(res)), "UNKNOWN_ERROR", tenant_id, key)
                    )
                    rows.append(outbox.item("results", record.home_partition, res))
                    letter = deadletters.for_request(
                        record,
                        bytes(request),
                        stage=STAGE,
                        taxonomy=TaxonomyClass.UNKNOWN_ERROR,
                        reason=detail,
                        now_ms=now,
                    )
                    rows.append(
                        outbox.record(
                            "deadletter",
                            letter,
                            key=call_id,
                            traceparent=record.traceparent,
                            call_id=call_id,
                            tenant_id=tenant_id,
                        )
                    )
            cur = await conn.execute(EXPIRE)
            counts["expired"] = cur.rowcount
            # A backstop for approval-wait's own sweep: expired tickets AUTO_DENY even while it is down.
            counts["approvals_expired"] = await expire_approvals(conn, self.topics, STAGE)
            await outbox.enqueue(conn, rows, self.topics)
            await audit.append(conn, entries)
        if any(v for k, v in counts.items() if k != "unresolved"):
            log.info("reconciled", extra={"stage": STAGE, "action": "reconciled", "count": sum(counts.values())})
        return counts
