"""The execution worker: tool.executable -> effects, exactly once -> outbox -> tool.results.

A round, for all its calls at once:
  0. clearance (clearance.py), before anything: the arguments must hash to the validated
     payload hash; a call that needs approvals needs an APPROVED ticket in Postgres for exactly
     it, with enough valid approvers, not consumed by another operation.
  A. reserve: one transaction checks those tickets under FOR UPDATE (and, for an effect
     outside Postgres, its target's state, and consumes its ticket: the last transaction
     before that effect), inserts PENDING keys (leased to this process) and reads the
     existing ones under SELECT ... FOR UPDATE; the idempotency plan decides each call.
  E. external effects (http, python) run concurrently, outside any transaction; an unknown
     outcome is checked with the provider's status query at once.
  B. record: one transaction re-reads approved targets under FOR UPDATE (STALE_STATE if
     they moved since approval) and consumes their tickets, runs the Postgres effects (each
     in a savepoint), writes
     COMPLETED / FAILED / still-PENDING, every call's result as an outbox row, and the audit
     entries. A co-located effect therefore commits with its COMPLETED record and outbox row
     or not at all. B is retried on transient failures without re-running E.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.contracts.registry import Registry
from toolgate.faults import crash_point
from toolgate.hashing import fingerprint, idempotency_key_for, request_hash
from toolgate.schemas.codec import codec
from toolgate.schemas.models import ExecutionResult, FieldError, Outcome, StageRecord, TaxonomyClass, Verification
from toolgate.secrets import SecretProvider
from toolgate.settings import Settings
from toolgate.taxonomy import Taxonomy
from toolgate.telemetry import SCRUBBER
from toolgate.topics.catalog import Topics
from toolgate.workers.execution import clearance, compensation, tickets
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.executors import (
    Done,
    Effect,
    Failed,
    Job,
    Unknown,
    failed,
    run_after_effects,
    run_postgres_batch,
    run_python,
)
from toolgate.workers.execution.http import HttpExecutor
from toolgate.workers.execution.preview import preview
from toolgate.workers.execution.retry import deadline_for, policy_for, with_retries
from toolgate.workers.runtime import audit, deadletters, outbox
from toolgate.workers.runtime.db import is_transient, make_pool
from toolgate.workers.runtime.emit import Emit
from toolgate.workers.runtime.results import outcome, reject, result
from toolgate.workers.runtime.rounds import Handler, Inbound, now_ms

log = logging.getLogger("toolgate.execution")
STAGE = "execution"


@dataclass
class Attempt:
    call: Inbound[StageRecord]
    job: Job
    key: str | None = None  # None: read-only, no reservation
    plan: idem.Plan | None = None
    leader: Attempt | None = None  # an earlier call of this round with the same key
    effect: Effect | None = None
    result: ExecutionResult | None = None
    status: str | None = None  # the key's status after this round
    original: compensation.Original | None = None  # the call this one compensates
    ticket: clearance.Ticket | None = None  # the approval it runs under
    late: bool = False  # a mutation past its deadline: it runs nothing, but may replay

    @property
    def record(self) -> StageRecord:
        return self.call.model

    @property
    def operation(self) -> str:
        """What an approval ticket is consumed by: the idempotency key (a read: the call)."""
        return self.key or f"call:{self.record.call_id}"

    @property
    def in_postgres(self) -> bool:
        return self.job.contract.executor["kind"] == "postgres"


RESERVE = """
INSERT INTO toolgate.idempotency_keys (tenant_id, idempotency_key, request_hash, status, tool_name, tool_version,
    executor, call_id, home_partition, attempt, request, lease_owner, lease_until, expires_at)
SELECT k.tenant_id, k.idempotency_key, k.request_hash, 'PENDING', k.tool_name, k.tool_version, k.executor, k.call_id,
    k.home_partition, 1, decode(k.request, 'base64'), %(owner)s, now() + make_interval(secs => %(lease)s),
    now() + make_interval(secs => k.ttl)
FROM jsonb_to_recordset(%(rows)s::jsonb) AS k(tenant_id text, idempotency_key text, request_hash text, tool_name text,
    tool_version text, executor text, call_id text, home_partition int, request text, ttl int)
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING tenant_id, idempotency_key
"""
LOCK = """
SELECT tenant_id, idempotency_key, status, request_hash, call_id, attempt, lease_owner,
       (extract(epoch FROM lease_until) * 1000)::bigint, response, error_code,
       (extract(epoch FROM expires_at) * 1000)::bigint
FROM toolgate.idempotency_keys
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
ORDER BY tenant_id, idempotency_key
FOR UPDATE
"""
OUTCOMES = """
SELECT tenant_id, idempotency_key, status, request_hash, response FROM toolgate.idempotency_keys
WHERE (tenant_id, idempotency_key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""
REDRIVE = """
UPDATE toolgate.idempotency_keys k SET status = 'PENDING', attempt = r.attempt, call_id = r.call_id,
    request = decode(r.request, 'base64'), request_hash = r.request_hash, lease_owner = %(owner)s,
    lease_until = now() + make_interval(secs => %(lease)s), completed_at = NULL,
    expires_at = greatest(k.expires_at, now() + make_interval(secs => r.ttl))
FROM jsonb_to_recordset(%(rows)s::jsonb) AS r(tenant_id text, idempotency_key text, attempt int, call_id text,
    request text, request_hash text, ttl int)
WHERE k.tenant_id = r.tenant_id AND k.idempotency_key = r.idempotency_key
"""
SETTLE = """
UPDATE toolgate.idempotency_keys k SET status = s.status, response = s.response, error_code = s.error_code,
    completed_at = CASE WHEN s.status = 'PENDING' THEN NULL ELSE now() END,
    lease_until = CASE WHEN s.status = 'PENDING' THEN now() + make_interval(secs => %(lease)s) ELSE NULL END,
    lease_owner = CASE WHEN s.status = 'PENDING' THEN k.lease_owner ELSE NULL END
FROM jsonb_to_recordset(%(rows)s::jsonb) AS s(tenant_id text, idempotency_key text, status text, response jsonb,
    error_code text)
WHERE k.tenant_id = s.tenant_id AND k.idempotency_key = s.idempotency_key
"""


def stored_response(res: ExecutionResult) -> dict[str, Any]:
    return {
        "outcome": res.outcome.model_dump(mode="json"),
        "data": res.data,
        "errors": [e.model_dump(mode="json") for e in res.errors],
        "verification": res.verification.model_dump(mode="json"),
        "attempt_number": res.attempt_number,
    }


def _fill(template: str, values: dict[str, Any]) -> str:
    for name, value in values.items():
        template = template.replace("{" + name + "}", str(value))
    return template


def verification_for(job: Job, data: dict[str, Any]) -> Verification:
    spec = job.contract.binding.get("verification")
    required = bool(job.contract.document["transactional"]["post_action_verification_required"])
    if not spec:
        return Verification(post_action_verification_required=required)
    return Verification(
        post_action_verification_required=required,
        target_state_reference=_fill(spec["target_state_reference"], {**job.record.arguments, **data}),
        expected_state=spec.get("expected_state"),
        delay_seconds=int(spec.get("delay_seconds", 0)),
    )


class ExecutionHandler(Handler[StageRecord]):
    stage = STAGE
    source = "executable"
    model = StageRecord

    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.settings = settings
        self.topics = Topics(settings.topic_prefix)
        self.pool = make_pool(settings.database_url, STAGE, max_size=4)
        self.http = HttpExecutor(settings, SecretProvider(settings.secrets_path))
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_s = settings.lease_seconds

    async def start(self) -> None:
        await self.pool.open()
        await self.http.open()

    # --- the round -----------------------------------------------------------------------

    async def handle(self, calls: list[Inbound[StageRecord]], out: Emit) -> None:
        now = now_ms()
        attempts = [self._prepare(call, now) for call in calls]
        late = [a for a in attempts if a.late]
        held = [
            a
            for a in attempts
            if a.result is None and not a.late and clearance.approvals_needed(a.record, a.job.contract)
        ]
        keyed: list[Attempt] = []
        if held or any(a.result is None and a.key is not None for a in attempts):
            async with self.pool.connection() as conn, conn.transaction():
                await self._settle_late(conn, late, now)
                await self._clear(conn, held, now)
                keyed = [a for a in attempts if a.result is None and a.key is not None]
                await self._reserve(conn, keyed, now)
                await self._bind_remote(conn, attempts)
            for a in keyed:
                self._settle_without_effect(a, now)
        external = [a for a in attempts if self._runs(a) and not a.in_postgres and a.effect is None]
        await self._external_effects(external)
        if any(a.job.contract.executor["kind"] == "http" for a in external):
            crash_point("execution.after_http_effect")
        await self._record(attempts)
        for a in attempts:
            if a.result is not None:
                out.outcomes[a.record.call_id] = str(a.result.outcome.taxonomy_class)

    def _prepare(self, call: Inbound[StageRecord], now: int) -> Attempt:
        record = call.model
        contract = self.registry.get(record.tool_name, record.tool_version)
        deadline = deadline_for(contract, now, record.deadline_ms)
        key = idempotency_key_for(record) if contract.is_mutation else None
        a = Attempt(call, Job(record, contract, key or "", deadline), key)
        tampered = clearance.hash_intact(record)
        if tampered is not None:
            a.result = self._refuse(a, tampered.taxonomy, tampered.code, tampered.message, now)
        elif record.deadline_ms is not None and record.deadline_ms <= now:
            if key is None:
                a.result = self._deadline_passed(a, now)
            else:
                a.late = True
        elif record.dry_run:
            a.result = result(
                record,
                stage=STAGE,
                result_outcome=outcome(Taxonomy.SUCCESS),
                traceparent=call.traceparent,
                home_partition=record.home_partition,
                now_ms=now,
                warnings=record.warnings,
                data=preview(record, contract, key),
            )
        elif key is None:
            a.plan = idem.Execute(1)
        return a

    def _deadline_passed(self, a: Attempt, now: int) -> ExecutionResult:
        return self._refuse(
            a,
            Taxonomy.TIMEOUT,
            "deadline_passed",
            "the proposal's deadline passed before it could run; nothing was executed",
            now,
            retryable=False,
            next_action="repropose_with_new_deadline",
        )

    def _runs(self, a: Attempt) -> bool:
        return a.result is None and isinstance(a.plan, idem.Execute) and a.leader is None

    def _refuse(
        self, a: Attempt, taxonomy: Taxonomy, code: str, message: str, now: int, **overrides: Any
    ) -> ExecutionResult:
        r = a.record
        return reject(
            r,
            taxonomy,
            [FieldError(field=None, code=code, message=message)],
            stage=STAGE,
            traceparent=a.call.traceparent,
            home_partition=r.home_partition,
            now_ms=now,
            warnings=r.warnings,
            approval_id=r.approval_id,
            **overrides,
        )

    # --- A: reservation --------------------------------------------------------------------

    async def _settle_late(self, conn: AsyncConnection[Any], late: list[Attempt], now: int) -> None:
        """A mutation past its deadline runs nothing and reserves nothing. But an operation that
        already has an outcome gets that outcome again, as any repeat does (a re-published or
        re-driven call may arrive late): an agent never hears two different ends of one operation."""
        if not late:
            return
        cur = await conn.execute(OUTCOMES, ([a.record.tenant_id for a in late], [a.key or "" for a in late]))
        outcomes = {(r[0], r[1]): r[2:] for r in await cur.fetchall()}
        for a in late:
            status, hash_, response = outcomes.get((a.record.tenant_id, a.key or ""), (None, None, None))
            if status in ("COMPLETED", "FAILED_FINAL", "COMPENSATED") and hash_ == request_hash(a.record):
                a.result = self._replay(a, response or {}, now, compensated=status == "COMPENSATED")
            else:
                a.result = self._deadline_passed(a, now)

    async def _clear(self, conn: AsyncConnection[Any], held: list[Attempt], now: int) -> None:
        """Calls that need approvals run only under an APPROVED ticket for exactly them (read
        under FOR UPDATE); the others are refused before any key is reserved."""
        if not held:
            return
        found = await tickets.load(conn, [clearance.ticket_id(a.record) for a in held])
        for a in held:
            verdict = clearance.clear(a.record, a.job.contract, a.operation, found.get(clearance.ticket_id(a.record)))
            if isinstance(verdict, clearance.Blocked):
                a.result = self._refuse(a, verdict.taxonomy, verdict.code, verdict.message, now)
            else:
                a.ticket = verdict.ticket

    async def _bind_remote(self, conn: AsyncConnection[Any], attempts: list[Attempt]) -> None:
        """An approved effect outside Postgres that is about to run (not a replay: its own
        effect may be what changed its target) needs its target as the approver saw it, read
        now since no lock can span the effect, and consumes its ticket here, in the last
        transaction before it. What may not run fails like an effect, settling its key.
        (A Postgres effect does both in its own transaction, phase B.)"""
        remote = [a for a in attempts if self._runs(a) and not a.in_postgres and a.ticket is not None]
        versions = await tickets.state_now(conn, [(a.record, a.job.contract) for a in remote], for_update=False)
        for a, version in zip(remote, versions, strict=True):
            moved = clearance.stale(a.ticket, version)
            if moved is not None:
                a.effect = failed(moved.taxonomy, moved.code, moved.message, final=True)
        for a in await self._unconsumed(conn, [a for a in remote if a.effect is None]):
            a.effect = _consumed_elsewhere(a)

    async def _reserve(self, conn: AsyncConnection[Any], keyed: list[Attempt], now: int) -> None:
        """Inside the round's first transaction: reserve keys, lock the existing ones, plan."""
        if not keyed:
            return
        await self._check_compensations(conn, keyed, now)
        first: dict[tuple[str, str], Attempt] = {}
        for a in keyed:
            if a.result is not None:
                continue
            ident = (a.record.tenant_id, a.key or "")
            if ident in first:
                a.leader = first[ident]
            else:
                first[ident] = a
        if not first:
            return
        rows = [
            {
                "tenant_id": a.record.tenant_id,
                "idempotency_key": a.key,
                "request_hash": request_hash(a.record),
                "tool_name": a.record.tool_name,
                "tool_version": a.record.tool_version,
                "executor": a.job.contract.executor["kind"],
                "call_id": a.record.call_id,
                "home_partition": a.record.home_partition,
                "request": _b64(a.call.raw),  # the bytes as received: no re-encoding
                "ttl": a.job.contract.idempotency_ttl_seconds,
            }
            for a in first.values()
        ]
        cur = await conn.execute(RESERVE, {"rows": json.dumps(rows), "owner": self.owner, "lease": self.lease_s})
        fresh = {(r[0], r[1]) for r in await cur.fetchall()}
        cur = await conn.execute(LOCK, ([k[0] for k in first], [k[1] for k in first]))
        existing = {
            (r[0], r[1]): idem.KeyRow(r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10])
            for r in await cur.fetchall()
        }
        redrive = []
        for ident, a in first.items():
            row = None if ident in fresh else existing.get(ident)
            a.plan = idem.plan(
                row,
                request_hash=request_hash(a.record),
                call_id=a.record.call_id,
                owner=self.owner,
                now_ms=now,
                max_attempts=a.job.contract.max_retries + 1,
                resend_safe=self._resend_safe(a),
                reject_expired=a.job.contract.binding.get("expired_key") == "reject",
            )
            if isinstance(a.plan, idem.Execute) and row is not None:
                redrive.append(
                    {
                        "tenant_id": ident[0],
                        "idempotency_key": ident[1],
                        "attempt": a.plan.attempt,
                        "call_id": a.record.call_id,
                        "request": _b64(a.call.raw),  # the bytes as received: no re-encoding
                        "request_hash": request_hash(a.record),
                        "ttl": a.job.contract.idempotency_ttl_seconds,
                    }
                )
        if redrive:
            await conn.execute(REDRIVE, {"rows": json.dumps(redrive), "owner": self.owner, "lease": self.lease_s})

    async def _check_compensations(self, conn: AsyncConnection[Any], keyed: list[Attempt], now: int) -> None:
        """Lock the earlier calls that compensations undo, and refuse those that may not run."""
        compensating = [a for a in keyed if a.record.compensation_of]
        originals = await compensation.load(conn, [a.record for a in compensating])
        for a in compensating:
            a.original = originals.get((a.record.tenant_id, a.record.compensation_of or ""))
            refusal = compensation.check(a.record, a.key or "", a.original, self.registry)
            if refusal is not None:
                taxonomy, error = refusal
                a.result = reject(
                    a.record,
                    taxonomy,
                    [error],
                    stage=STAGE,
                    traceparent=a.call.traceparent,
                    home_partition=a.record.home_partition,
                    now_ms=now,
                    warnings=a.record.warnings,
                )

    def _resend_safe(self, a: Attempt) -> bool:
        kind = a.job.contract.executor["kind"]
        return kind == "postgres" or (kind == "http" and bool(a.job.contract.document["idempotency"].get("key_header")))

    def _settle_without_effect(self, a: Attempt, now: int) -> None:
        """After the reservation committed: answer what runs no effect (replays, conflicts)."""
        if a.result is not None:
            return
        if a.leader is not None:
            a.plan = idem.Mismatch() if request_hash(a.leader.record) != request_hash(a.record) else a.leader.plan
        plan, r = a.plan, a.record
        if isinstance(plan, idem.Replay):
            a.result = self._replay(a, plan.response, now, compensated=plan.status == "COMPENSATED")
        elif isinstance(plan, idem.Mismatch):
            a.result = self._refuse(
                a,
                Taxonomy.SIGNATURE_MISMATCH,
                "key_reused",
                "this idempotency key was used with different arguments; refusing (fail closed)",
                now,
            )
        elif isinstance(plan, idem.Expired):
            a.result = self._refuse(
                a,
                Taxonomy.STALE_STATE,
                "key_expired",
                "this operation's idempotency key outlived its deduplication window; propose it as a new "
                "logical operation if it should still happen",
                now,
            )
        elif isinstance(plan, idem.Conflict):
            a.result = self._refuse(
                a,
                Taxonomy.IDEMPOTENCY_CONFLICT,
                "in_progress",
                "the same operation is in progress; retry after the delay",
                now,
                retry_after_ms=plan.retry_after_ms,
            )
        elif isinstance(plan, idem.Hold):
            log.info("held: key in flight", extra={"stage": STAGE, "action": "hold", "call_id": r.call_id})

    def _replay(self, a: Attempt, stored: dict[str, Any], now: int, compensated: bool = False) -> ExecutionResult:
        r = a.record
        warnings = list(r.warnings)
        verification = Verification.model_validate(stored["verification"]) if stored.get("verification") else None
        if compensated:
            # Seeds: return the compensated state and require post-action verification.
            warnings.append("this call's effect was compensated (undone) by a later call; verify the target's state")
            verification = (verification or Verification()).model_copy(
                update={"post_action_verification_required": True}
            )
        return result(
            r,
            stage=STAGE,
            result_outcome=Outcome.model_validate(stored["outcome"]),
            traceparent=a.call.traceparent,
            home_partition=r.home_partition,
            now_ms=now,
            data=stored.get("data"),
            errors=[FieldError.model_validate(e) for e in stored.get("errors", [])],
            warnings=warnings,
            idempotency_hit=True,
            attempt_number=int(stored.get("attempt_number", 1)),
            verification=verification,
            approval_id=r.approval_id,
        )

    # --- E: external effects ---------------------------------------------------------------

    async def _external_effects(self, attempts: list[Attempt]) -> None:
        async def one(a: Attempt) -> None:
            policy = policy_for(a.job.contract)
            if a.job.contract.executor["kind"] == "http":
                effect = await with_retries(lambda: self.http.run(a.job, now_ms()), policy, a.job.deadline_ms)
                if isinstance(effect, Unknown):
                    checked = await self.http.status(a.job, now_ms())
                    if not isinstance(checked, Unknown):
                        effect = checked
            else:
                effect = await with_retries(lambda: run_python(a.job, now_ms()), policy, a.job.deadline_ms)
            # Whatever a provider or tool answered may echo a credential: scrub it here, in the
            # only process that resolved one, before it is stored or published.
            a.effect = Done(SCRUBBER.obj(effect.data)) if isinstance(effect, Done) else effect

        await asyncio.gather(*(one(a) for a in attempts))

    # --- B: record -------------------------------------------------------------------------

    async def _record(self, attempts: list[Attempt]) -> None:
        delay = 0.2
        while True:
            try:
                async with self.pool.connection() as conn, conn.transaction():
                    concluded = await self._record_once(conn, attempts)
                break
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("recording failed; retrying", extra={"stage": STAGE, "action": "retry", "error": repr(exc)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        for a, (res, status) in zip(attempts, concluded, strict=True):
            a.result, a.status = res, status

    async def _record_once(
        self, conn: AsyncConnection[Any], attempts: list[Attempt]
    ) -> list[tuple[ExecutionResult | None, str | None]]:
        """Everything of phase B inside one transaction; returns each call's result and key
        status, which take effect only once the transaction committed."""
        now = now_ms()
        concluded: list[tuple[ExecutionResult | None, str | None]] = []
        by_attempt: dict[int, ExecutionResult] = {}
        settle, rows, entries = [], [], []
        local_effects = await self._local_effects(conn, [a for a in attempts if self._runs(a) and a.in_postgres])
        after_failed = await self._after_effects(conn, attempts)
        compensated, compensation_failed = [], []
        for a in attempts:
            res, status = a.result, a.status
            if self._runs(a):
                res, status = self._conclude(a, local_effects.get(id(a), a.effect), now)
                if id(a) in after_failed:
                    note = f"the effect happened, but recording it here failed: {after_failed[id(a)]}"
                    res = res.model_copy(update={"warnings": [*res.warnings, note]})
                if a.original is not None and status == "COMPLETED":
                    compensated.append((a.key, a.original.tenant_id, a.original.key))
                elif a.original is not None and status in ("FAILED_FINAL", "FAILED_RETRYABLE"):
                    compensation_failed.append((a.original.tenant_id, a.original.key))
                    letter = deadletters.for_request(
                        a.record,
                        codec().encode(a.record),
                        stage=STAGE,
                        taxonomy=TaxonomyClass.COMPENSATION_FAILED,
                        now_ms=now,
                        reason=f"compensation of {a.record.compensation_of} failed",
                    )
                    rows.append(
                        outbox.record(
                            "deadletter",
                            letter,
                            key=a.record.call_id,
                            traceparent=a.call.traceparent,
                            call_id=a.record.call_id,
                            tenant_id=a.record.tenant_id,
                        )
                    )
                if a.key is not None:
                    settle.append(
                        {
                            "tenant_id": a.record.tenant_id,
                            "idempotency_key": a.key,
                            "status": status,
                            "response": stored_response(res) if status != "PENDING" else None,
                            "error_code": None if status == "COMPLETED" else str(res.outcome.taxonomy_class),
                        }
                    )
            elif (
                res is None
                and a.leader is not None
                and id(a.leader) in by_attempt
                and not isinstance(a.plan, idem.Mismatch)
            ):
                res = self._replay(a, stored_response(by_attempt[id(a.leader)]), now)
            concluded.append((res, status))
            if res is None:
                continue
            by_attempt[id(a)] = res
            rows.append(outbox.item("results", a.record.home_partition, res))
            if a.job.contract.document["observability"]["audit_required"] or _action(res, status) == "refused":
                entries.append(
                    audit.Entry(
                        STAGE,
                        _action(res, status),
                        a.record.principal.user_id,
                        a.record.call_id,
                        a.record.tenant_id,
                        {
                            "tool": a.record.tool_name,
                            "version": a.record.tool_version,
                            "key": fingerprint(a.key) if a.key else None,
                            "taxonomy": str(res.outcome.taxonomy_class),
                            "status": status,
                            "idempotency_hit": res.idempotency_hit,
                            "approval_id": a.record.approval_id,
                        },
                    )
                )
        if settle:
            await conn.execute(SETTLE, {"rows": json.dumps(settle), "lease": self.lease_s})
        if compensated:
            await conn.cursor().executemany(compensation.MARK_COMPENSATED, compensated)
        if compensation_failed:
            await conn.cursor().executemany(compensation.MARK_FAILED, compensation_failed)
        await outbox.enqueue(conn, rows, self.topics)
        await audit.append(conn, entries)
        return concluded

    async def _local_effects(self, conn: AsyncConnection[Any], local: list[Attempt]) -> dict[int, Effect]:
        """Run the Postgres effects in the recording transaction; an approved one only while its
        target, locked now, is still in the state the approver saw, consuming its ticket here."""
        bound = [a for a in local if a.ticket is not None and a.ticket.state_version is not None]
        versions = await tickets.state_now(conn, [(a.record, a.job.contract) for a in bound], for_update=True)
        effects: dict[int, Effect] = {}
        for a, version in zip(bound, versions, strict=True):
            moved = clearance.stale(a.ticket, version)
            if moved is not None:
                effects[id(a)] = failed(moved.taxonomy, moved.code, moved.message, final=True)
        for a in await self._unconsumed(conn, [a for a in local if id(a) not in effects]):
            effects[id(a)] = _consumed_elsewhere(a)
        run = [a for a in local if id(a) not in effects]
        effects.update(zip(map(id, run), await run_postgres_batch(conn, [a.job for a in run]), strict=True))
        return effects

    async def _unconsumed(self, conn: AsyncConnection[Any], attempts: list[Attempt]) -> list[Attempt]:
        """Consume the tickets these approved attempts run under; those another operation
        consumed meanwhile may not run."""
        approved = {a.ticket.approval_id: a for a in attempts if a.ticket is not None}
        consumed = await tickets.consume(conn, {ticket: a.operation for ticket, a in approved.items()})
        return [a for ticket, a in approved.items() if ticket not in consumed]

    async def _after_effects(self, conn: AsyncConnection[Any], attempts: list[Attempt]) -> dict[int, str]:
        """The binding's after_effect of each external effect that completed now, in the
        transaction that records it: which failed, and why."""
        done = [
            a
            for a in attempts
            if self._runs(a) and isinstance(a.effect, Done) and "after_effect" in a.job.contract.binding
        ]
        errors = await run_after_effects(conn, [(a.job, a.effect.data) for a in done if isinstance(a.effect, Done)])
        return {id(a): error for a, error in zip(done, errors, strict=True) if error is not None}

    def _conclude(self, a: Attempt, effect: Effect | None, now: int) -> tuple[ExecutionResult, str]:
        r = a.record
        attempt = a.plan.attempt if isinstance(a.plan, idem.Execute) else 1
        common = {
            "stage": STAGE,
            "traceparent": a.call.traceparent,
            "home_partition": r.home_partition,
            "now_ms": now,
            "warnings": r.warnings,
            "attempt_number": attempt,
            "approval_id": r.approval_id,
        }
        if isinstance(effect, Done):
            return result(
                r,
                result_outcome=outcome(Taxonomy.SUCCESS),
                data=effect.data,
                verification=verification_for(a.job, effect.data),
                **common,
            ), "COMPLETED"
        if isinstance(effect, Failed) and a.original is not None:
            # A failed compensation leaves the earlier effect in place: an operator decides.
            res = result(r, result_outcome=outcome(Taxonomy.COMPENSATION_FAILED), errors=effect.errors, **common)
            return res, "FAILED_FINAL" if effect.final else "FAILED_RETRYABLE"
        if isinstance(effect, Failed):
            status = "FAILED_FINAL" if effect.final else "FAILED_RETRYABLE"
            res = result(
                r,
                result_outcome=outcome(
                    effect.taxonomy, retryable=not effect.final, retry_after_ms=effect.retry_after_ms
                ),
                errors=effect.errors,
                **common,
            )
            return res, status
        reason = effect.reason if isinstance(effect, Unknown) else "no outcome"
        return result(
            r,
            result_outcome=outcome(
                Taxonomy.TIMEOUT, code=202, retryable=False, fail_closed=False, next_action="await_verification"
            ),
            errors=[
                FieldError(
                    field=None,
                    code="outcome_unknown",
                    message=f"{reason}; the outcome is being "
                    "verified with the provider and will be reported on this call",
                )
            ],
            **common,
        ), "PENDING"


def _consumed_elsewhere(a: Attempt) -> Effect:
    ticket = a.ticket.approval_id if a.ticket is not None else "?"
    return failed(
        Taxonomy.CONFIRMATION_MISSING,
        "approval_consumed",
        f"approval {ticket} released another operation meanwhile",
        final=True,
    )


def _action(res: ExecutionResult, status: str | None) -> str:
    if res.idempotency_hit:
        return "replayed"
    if status is None:
        return "refused"
    return {"COMPLETED": "executed", "PENDING": "outcome_unknown"}.get(status, "failed")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
