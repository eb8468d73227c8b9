"""Validation's refusals as their records (issue 51, part 3; store/call_decisions.py). Pure.

A call validation passes is recorded by the policy stage, with the policy's decision on it, from
the StageDecision validation wrote (`passed`: its detail names the contracts that decided); a
call it refuses never reaches policy, so validation records it, in the round's refusal
transaction. The record names the contracts' digest, the outcome (taxonomy class and code) and
who asked; not the arguments: a refused call's are the model's text as it came, which no gate
admitted, and may hold anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolgate.schemas.models import StageDecision, ToolProposal
from toolgate.states import StageOutcome
from toolgate.store.rows import Decided
from toolgate.workers.validation.decision import Decision, Reject

STAGE = "validation"
CONTRACTS = "contracts:"  # read back by workers/policy/witness.py (`validation_row`)


def passed(contracts_digest: str, now_ms: int) -> StageDecision:
    """Validation's StageDecision on a call it passes, naming the contracts that decided."""
    return StageDecision(stage=STAGE, outcome=StageOutcome.PASS, detail=CONTRACTS + contracts_digest, at_ms=now_ms)


def refusals(
    proposals: Sequence[ToolProposal], decisions: Sequence[Decision], contracts_digest: str, now_ms: int
) -> list[Decided]:
    """The records of the round's refused calls."""
    return [
        Decided(
            p.tenant_id,
            p.call_id,
            STAGE,
            now_ms,
            p.tool_name,
            d.tool_version or p.tool_version,
            contracts_digest,
            None,
            "refuse",
            taxonomy_class=str(d.taxonomy_class),
            code=d.errors[0].code if d.errors else None,
            call={
                "agent_id": p.principal.agent_id,
                "user_id": p.principal.user_id,
                "run_id": p.run_id,
                "logical_operation_id": p.logical_operation_id,
                "dry_run": p.dry_run,
            },
        )
        for p, d in zip(proposals, decisions, strict=True)
        if isinstance(d, Reject)
    ]
