"""The validation worker: tool.proposals -> tool.validated (or a typed refusal on tool.results)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from toolgate.contracts.policy import Policy, load_policy
from toolgate.contracts.registry import Registry, Resolution
from toolgate.schemas.models import FieldError, StageDecision, StageRecord, ToolProposal
from toolgate.settings import Settings
from toolgate.taxonomy import Taxonomy
from toolgate.topics.headers import CALL_ID, TENANT_ID, TRACEPARENT, header, new_traceparent
from toolgate.workers.runtime import facts
from toolgate.workers.runtime.db import make_pool
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.results import anonymous_proposal, reject
from toolgate.workers.runtime.rounds import Handler, Inbound, now_ms
from toolgate.workers.validation import repair, semantic
from toolgate.workers.validation.decision import Decision, Pass, Reject, decide

STAGE = "validation"


REPAIRS = """
SELECT tenant_id, run_id, logical_operation_id, call_id, payload_fingerprint, error_fingerprint
FROM toolgate.repair_attempts
WHERE (tenant_id, run_id) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""
RECORD_REPAIRS = """
INSERT INTO toolgate.repair_attempts (tenant_id, run_id, logical_operation_id, call_id, payload_fingerprint,
    error_fingerprint)
SELECT r.tenant_id, r.run_id, r.logical_operation_id, r.call_id, r.payload_fingerprint, r.error_fingerprint
FROM jsonb_to_recordset(%s::jsonb) AS r(tenant_id text, run_id text, logical_operation_id text, call_id text,
    payload_fingerprint text, error_fingerprint text)
ON CONFLICT DO NOTHING
"""


class ValidationHandler(Handler[ToolProposal]):
    """The pure gates first (parse, structure, types, bounds, date and cross-field rules);
    then, only when some call needs it, one Postgres round: the facts semantic rules compare
    against, and the repair-loop record of the round's invalid proposals."""

    stage = STAGE
    source = "proposals"
    model = ToolProposal

    def __init__(self, registry: Registry, settings: Settings | None = None, policy: Policy | None = None) -> None:
        self.registry = registry
        self.policy = policy or load_policy(settings.policy_file if settings else None)
        self.pool = make_pool(settings.database_url, STAGE) if settings and settings.database_url else None

    async def start(self) -> None:
        if self.pool is not None:
            await self.pool.open()

    async def handle(self, calls: list[Inbound[ToolProposal]], out: Emit) -> None:
        now = now_ms()
        today = dt.datetime.fromtimestamp(now / 1000, dt.UTC).date()
        decisions = [decide(call.model, self.registry) for call in calls]
        wanted = facts.needed(
            r for d in decisions if isinstance(d, Pass) for r in semantic.refs(d.arguments, d.contract)
        )
        rejected = any(isinstance(d, Reject) and d.taxonomy in repair.REPAIRABLE for d in decisions)
        if self.pool is None or not (wanted or rejected):
            decisions = [self._semantic(d, {}, today) for d in decisions]
            self._emit(calls, decisions, now, out)
            return
        async with self.pool.connection() as conn, conn.transaction():
            known = await facts.fetch(conn, wanted)
            decisions = [self._semantic(d, known, today) for d in decisions]
            decisions = await self._repair_loop(conn, calls, decisions)
        self._emit(calls, decisions, now, out)

    def _semantic(self, decision: Decision, known: facts.Facts, today: dt.date) -> Decision:
        if not isinstance(decision, Pass):
            return decision
        found = semantic.findings(decision.arguments, decision.contract, known, today)
        if not found:
            return decision
        return Reject(Taxonomy.SEMANTIC_INVALIDITY, tuple(found), decision.contract.version, decision.warnings)

    async def _repair_loop(
        self, conn: Any, calls: list[Inbound[ToolProposal]], decisions: list[Decision]
    ) -> list[Decision]:
        failing = [
            (c, d)
            for c, d in zip(calls, decisions, strict=True)
            if isinstance(d, Reject) and d.taxonomy in repair.REPAIRABLE
        ]
        if not failing:
            return decisions
        runs = sorted({(c.model.tenant_id, c.model.run_id) for c, _ in failing})
        cur = await conn.execute(REPAIRS, ([t for t, _ in runs], [r for _, r in runs]))
        history = await cur.fetchall()
        limits = self.policy.repair
        recorded, updated = [], {}
        for call, decision in failing:
            p = call.model
            payload_fp = repair.payload_fingerprint(p)
            error_fp = repair.error_fingerprint(decision.errors)
            in_run = [h for h in history if (h[0], h[1]) == (p.tenant_id, p.run_id) and h[3] != p.call_id]
            in_op = [h for h in in_run if h[2] == p.logical_operation_id]
            earlier = repair.Earlier(
                frozenset(h[4] for h in in_op), frozenset(h[5] for h in in_op), len(in_op), len(in_run)
            )
            contract_limit = self._contract_limit(p)
            reason = repair.exhausted(
                payload_fp,
                error_fp,
                earlier,
                contract_limit or limits["max_attempts_per_operation"],
                limits["budget_per_run"],
            )
            if reason is not None:
                updated[id(call)] = Reject(
                    Taxonomy.BUDGET_EXHAUSTED,
                    repair.exhaustion_errors(reason, decision.errors),
                    decision.tool_version,
                    decision.warnings,
                )
            row = (p.tenant_id, p.run_id, p.logical_operation_id, p.call_id, payload_fp, error_fp)
            history.append(row)
            recorded.append(
                dict(
                    zip(
                        (
                            "tenant_id",
                            "run_id",
                            "logical_operation_id",
                            "call_id",
                            "payload_fingerprint",
                            "error_fingerprint",
                        ),
                        row,
                        strict=True,
                    )
                )
            )
        await conn.execute(RECORD_REPAIRS, (json.dumps(recorded),))
        return [updated.get(id(c), d) for c, d in zip(calls, decisions, strict=True)]

    def _contract_limit(self, proposal: ToolProposal) -> int | None:
        try:
            contract = self.registry.resolve(proposal.tool_name, proposal.tool_version)
        except Resolution:
            return None
        limit = contract.binding.get("repair", {}).get("max_attempts_per_operation")
        return int(limit) if limit else None

    def _emit(self, calls: list[Inbound[ToolProposal]], decisions: list[Decision], now: int, out: Emit) -> None:
        for call, decision in zip(calls, decisions, strict=True):
            proposal, home = call.model, call.origin.partition
            if isinstance(decision, Reject):
                exhausted = decision.taxonomy is Taxonomy.BUDGET_EXHAUSTED
                out.item(
                    "results",
                    home,
                    reject(
                        proposal,
                        decision.taxonomy,
                        decision.errors,
                        stage=STAGE,
                        traceparent=call.traceparent,
                        home_partition=home,
                        now_ms=now,
                        warnings=decision.warnings,
                        tool_version=decision.tool_version or proposal.tool_version,
                        **({"next_action": "escalate_to_human"} if exhausted else {}),
                    ),
                )
                continue
            out.item(
                "validated",
                home,
                StageRecord(
                    call_id=proposal.call_id,
                    traceparent=call.traceparent,
                    home_partition=home,
                    tenant_id=proposal.tenant_id,
                    principal=proposal.principal,
                    workflow_id=proposal.workflow_id,
                    run_id=proposal.run_id,
                    logical_operation_id=proposal.logical_operation_id,
                    tool_name=decision.contract.name,
                    tool_version=decision.contract.version,
                    arguments=decision.arguments,
                    payload_hash=decision.payload_hash,
                    idempotency_key=proposal.idempotency_key,
                    deadline_ms=proposal.deadline_ms,
                    repair_attempt=proposal.repair_attempt,
                    dry_run=proposal.dry_run,
                    created_at_ms=proposal.created_at_ms,
                    compensation_of=proposal.compensation_of,
                    warnings=list(decision.warnings),
                    decisions=[StageDecision(stage=STAGE, outcome="pass", at_ms=now)],
                ),
            )

    def on_failure(self, call: Inbound[ToolProposal], error: str, out: Emit) -> None:
        home = call.origin.partition
        out.item(
            "results",
            home,
            reject(
                call.model,
                Taxonomy.UNKNOWN_ERROR,
                [
                    FieldError(
                        field=None,
                        code="internal_error",
                        message="validation failed inside toolgate; an operator has it",
                    )
                ],
                stage=STAGE,
                traceparent=call.traceparent,
                home_partition=home,
                now_ms=now_ms(),
            ),
        )

    def on_undecodable(self, origin: Origin, value: bytes, out: Emit) -> None:
        """Dead-letter the original bytes; if the headers name the call, answer it too."""
        call_id = header(origin.headers, CALL_ID)
        out.dead_letter(origin, value, Taxonomy.SYNTACTIC_PARSE_FAIL, "not a ToolProposal", call_id)
        if not call_id:
            return
        run_id = origin.key.decode("utf-8", "replace") if origin.key else ""
        proposal = anonymous_proposal(call_id, run_id, header(origin.headers, TENANT_ID) or "", now_ms())

        out.item(
            "results",
            origin.partition,
            reject(
                proposal,
                Taxonomy.SYNTACTIC_PARSE_FAIL,
                [
                    FieldError(
                        field=None,
                        code="undecodable_proposal",
                        expected="an Avro ToolProposal",
                        message="the proposal record could not be decoded; republish it with the toolgate client",
                    )
                ],
                stage=STAGE,
                traceparent=header(origin.headers, TRACEPARENT) or new_traceparent(),
                home_partition=origin.partition,
                now_ms=now_ms(),
            ),
        )
