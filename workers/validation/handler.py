"""The validation handler: tool.proposals -> tool.validated (or a typed refusal on tool.results).

A round's Postgres work, for all its calls at once: admitting its proposals (admitting.py: the
registered agents they name, whose signatures are checked before anything else, the call_ids
they use, the validation work their agents may spend), the facts semantic rules compare against,
and, when a call failed repairably or was refused at the door, the repair-loop record
(repair_log.py) and the audit entries in one transaction. A proposal that proves nobody
(admission.Drop, undecodable bytes) is audited by the runtime instead, collapsed into counts
(workers/runtime/refusals.py); a proven caller's refusal is audited here, one row each.
A refused call's decision is recorded (recorded.py, toolgate.call_decisions) in the round trip
of the round's audit write, or alone when the round has none; a passed call's is recorded by the
policy stage, from the StageDecision that names the contracts that decided.

The reads and the call_ids' registration are statements of their own (the pool is in
autocommit mode): two round trips for a round whose calls all pass, instead of four with BEGIN
and COMMIT around them. Nothing needs them in one transaction: under READ COMMITTED each
statement reads its own snapshot anyway, and a round retried after a crash between them
registers nothing new (a call_id bound to the same digest is the same call) and writes the same
repair records (skipped if present) and audit entries as the first try would have.
"""

from __future__ import annotations

import datetime as dt
import json

from toolgate.contracts.budgets import Budgets, load_budgets
from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.hashing import idempotency_key_for, request_hash
from toolgate.schemas.identity import identity_of
from toolgate.schemas.models import Call, FieldError, StageDecision, StageRecord, TaxonomyClass, ToolProposal
from toolgate.settings import Settings
from toolgate.states import StageOutcome
from toolgate.store import audit, call_decisions
from toolgate.topics.headers import CALL_ID, header
from toolgate.workers.runtime import fact_loader, facts
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.freshness import Bound
from toolgate.workers.runtime.handler import Handler, Inbound
from toolgate.workers.runtime.refusals import Refusal
from toolgate.workers.validation import admission, admission_rate, recorded, repair_log, semantic
from toolgate.workers.validation.admitting import Admitted, Admitting, Round, refuse
from toolgate.workers.validation.decision import Decision, Pass, Reject, decide
from toolgate.workers.validation.tally import tally

STAGE = admission.STAGE
LENIENT = frozenset({"arguments"})  # the model's text; every identity field must be UTF-8


class ValidationHandler(Handler[ToolProposal]):
    """Who asked, first: a signature by a registered agent. Then, within the validation work
    its agent may spend (admission_rate.py), the pure gates (parse, structure, types, bounds,
    date and cross-field rules), the facts semantic rules compare against, and the repair loop."""

    stage = STAGE
    source = "proposals"
    model = ToolProposal

    def __init__(self, registry: Registry, settings: Settings, policy: Budgets | None = None) -> None:
        super().__init__(registry, settings, autocommit=True)
        self.policy = policy or load_budgets(settings.policy_dir)
        self.window = Bound.for_proposals(settings)
        # The validation work each agent may still spend, in this worker's memory.
        rate = admission_rate.AdmissionRate(settings.admission_work_per_second, settings.admission_work_burst)
        self.admitting = Admitting(self.window, rate)
        # This round's proven calls (by id of their Inbound): only they are answered.
        self._proven: dict[int, Admitted] = {}

    async def start(self) -> None:
        await super().start()
        self.registry.compile_validators()

    async def handle(self, calls: list[Inbound[ToolProposal]], out: Emit) -> None:
        self._proven = {}
        now = now_ms()
        today = dt.datetime.fromtimestamp(now / 1000, dt.UTC).date()
        async with self.pool.connection() as conn:
            entries: list[audit.Entry] = []
            at = Round(conn, now, out, entries)
            admitted = await self.admitting.admit(at, calls)
            self._proven = {id(a.call): a for a in admitted}
            admitted, decisions = self.admitting.decide_within_rate(
                at, admitted, lambda proposal: decide(proposal, self.registry, today)
            )
            wanted = facts.needed(
                r for d in decisions if isinstance(d, Pass) for r in semantic.refs(d.arguments, d.contract)
            )
            known = await fact_loader.fetch(conn, wanted) if wanted else {}
            decisions = [
                self._semantic(d, known, today, a.proposal.tenant_id) for a, d in zip(admitted, decisions, strict=True)
            ]
            proposals = [a.proposal for a in admitted]
            gated = decisions
            if entries or repair_log.failing(proposals, decisions):
                async with conn.transaction():
                    decisions = await repair_log.apply(conn, proposals, decisions, self.policy.repair, self.registry)
                    refused = recorded.refusals(proposals, decisions, self.registry.digest, now)
                    await call_decisions.record_with_audit(conn, entries, refused)
            elif any(isinstance(d, Reject) for d in decisions):  # refusals no repair or audit row needed
                await call_decisions.record_with_audit(
                    conn, [], recorded.refusals(proposals, decisions, self.registry.digest, now)
                )
        for a, gate, final in zip(admitted, gated, decisions, strict=True):
            out.facts[a.proposal.call_id] = tally(a.proposal, gate, final)
        self._emit(admitted, decisions, now, out)

    def _semantic(self, decision: Decision, known: facts.Facts, today: dt.date, tenant_id: str) -> Decision:
        if not isinstance(decision, Pass):
            return decision
        found = semantic.findings(decision.arguments, decision.contract, known, today, tenant_id)
        if not found:
            return decision
        return Reject(TaxonomyClass.SEMANTIC_INVALIDITY, tuple(found), decision.contract.version, decision.warnings)

    def _emit(self, admitted: list[Admitted], decisions: list[Decision], now: int, out: Emit) -> None:
        for a, decision in zip(admitted, decisions, strict=True):
            call, proposal, digest = a.call, a.proposal, a.digest
            home = call.origin.partition
            if isinstance(decision, Reject):
                exhausted = decision.taxonomy_class is TaxonomyClass.BUDGET_EXHAUSTED
                refuse(
                    call,
                    proposal,
                    digest,
                    decision.taxonomy_class,
                    decision.errors,
                    now,
                    out,
                    warnings=[*decision.warnings, *([a.edit.note] if a.edit else [])],
                    tool_version=decision.tool_version or proposal.tool_version,
                    **({"next_action": "escalate_to_human"} if exhausted else {}),
                )
                continue
            record = StageRecord(
                traceparent=call.traceparent,
                warnings=list(decision.warnings) + ([a.edit.note] if a.edit else []),
                decisions=[recorded.passed(self.registry.digest, now), *edited(a, now)],  # the contracts that decided
                call=admitted_call(proposal, decision, home, digest),
            )
            out.item("validated", home, record)

    def decode(self, value: bytes) -> ToolProposal:
        """Argument text that is not UTF-8 does not hide the call: it is read leniently, so the
        signature can still prove who asked and the answer say what was wrong."""
        return codec().decode_lenient(value, ToolProposal, LENIENT)

    def on_failure(self, call: Inbound[ToolProposal], error: str, out: Emit) -> None:
        """UNKNOWN_ERROR, fail closed; but only to a caller whose signature was proven."""
        admitted = self._proven.get(id(call))
        if admitted is None:
            return
        inside = FieldError(
            field=None, code="internal_error", message="validation failed inside toolgate; an operator has it"
        )
        refuse(call, admitted.proposal, admitted.digest, TaxonomyClass.UNKNOWN_ERROR, [inside], now_ms(), out)

    def on_undecodable(self, origin: Origin, value: bytes, out: Emit) -> None:
        """Bytes that are no ToolProposal prove nobody: dead-letter them and audit it (collapsed)."""
        call_id = header(origin.headers, CALL_ID)
        out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, "not a ToolProposal", call_id)
        out.refusals.append(Refusal(admission.undecodable_entry(call_id), self.source))


def edited(admitted: Admitted, now: int) -> list[StageDecision]:
    """An approver's edit, recorded for approval-wait (its own ticket, the editor counted once)
    and execution (the edited call's ticket): workers/approval/decision.py `edit_of`."""
    e = admitted.edit
    if e is None:
        return []
    detail = json.dumps({"approval_id": e.approval_id, "edited_by": e.edited_by, "decision_id": e.decision_id})
    return [StageDecision(stage=STAGE, outcome=StageOutcome.EDITED, detail=detail, at_ms=now)]


def admitted_call(proposal: ToolProposal, decision: Pass, home_partition: int, digest: str) -> Call:
    """The call as every later stage reads it: the proposal's identity and request, the contract
    it resolved to, its canonical arguments and the facts derived from them here, once (the
    payload hash, the idempotency key, the request hash). Execution recomputes the payload hash
    from the arguments on purpose (clearance.py): it is what the approvers signed."""
    fields = {
        **identity_of(proposal),
        "home_partition": home_partition,
        "tool_name": decision.contract.name,
        "tool_version": decision.contract.version,
        "dry_run": proposal.dry_run,
        "logical_operation_id": proposal.logical_operation_id,
        "payload_hash": decision.payload_hash,
        "deadline_ms": proposal.deadline_ms,
        "repair_attempt": proposal.repair_attempt,
        "compensation_of": proposal.compensation_of,
        "proposal_digest": digest,
        "arguments": decision.arguments,
    }
    key = idempotency_key_for(proposal.idempotency_key, fields, proposal.principal.user_id)
    bound = request_hash(proposal.tenant_id, decision.contract.name, decision.contract.version, decision.payload_hash)
    return Call(**fields, idempotency_key=key, request_hash=bound)
