"""The validation worker: tool.proposals -> tool.validated (or a typed refusal on tool.results)."""

from __future__ import annotations

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import FieldError, StageDecision, StageRecord, ToolProposal
from toolgate.taxonomy import Taxonomy
from toolgate.topics.headers import CALL_ID, TENANT_ID, TRACEPARENT, header, new_traceparent
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.results import anonymous_proposal, reject
from toolgate.workers.runtime.rounds import Handler, Inbound, now_ms
from toolgate.workers.validation.decision import Reject, decide

STAGE = "validation"


class ValidationHandler(Handler[ToolProposal]):
    stage = STAGE
    source = "proposals"
    model = ToolProposal

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    async def handle(self, calls: list[Inbound[ToolProposal]], out: Emit) -> None:
        now = now_ms()
        for call in calls:
            proposal, home = call.model, call.origin.partition
            decision = decide(proposal, self.registry)
            if isinstance(decision, Reject):
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
