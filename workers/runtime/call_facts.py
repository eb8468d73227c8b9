"""What one call's metrics and spans say about it, read from what a stage already holds: the
result it ended with, the record it came as, the attributes its span opened with. Pure: no
telemetry, no clock; `call_metrics`, `stage_metrics` and `round_telemetry` record the facts.

**Interim or final.** A call gets one final observation and, before it, perhaps interim ones
(status code 202, what a client's `wait` reads past): held for approval (CONFIRMATION_MISSING,
kind `approval_pending`) or run with an outcome not yet known (TIMEOUT `await_verification`,
kind `outcome_unverified`). A call's invocation metrics are counted at its final observation
only; an interim one counts in its own series, by kind.

**Retries** (seed 000's Retry Success and Unsafe Retry Block rates), of final results:

    result                                                   retry fact
    IDEMPOTENCY_CONFLICT (its operation is in flight: its    blocked (a duplicate refused)
      key PENDING, or the provider still processing it)
    executed, attempt_number > 1, not answered from its key  succeeded / failed
    anything else                                            none (a first attempt, or a replay)

An attempt is the operation's: the agent proposes it again under the same key after a retryable
failure. The attempts execution makes inside one effect (retry.py's backoff on a provider's 429
or 503) end as one result and are not seen here.

**Compensations** (Compensation Success), at execution, from the call's record and its result:
a call naming `compensation_of` that ran ends succeeded (SUCCESS), failed (COMPENSATION_FAILED)
or unverified (its outcome is being verified); one refused before it ran (nothing to undo, not
its compensation) or answered from its key is no attempt.

**Replayable** (the seeds' `trace.replayable`: "whether required replay fields were captured"),
per stage, from the span's attributes and the stage's record. A call is replayable when its
span names the call (call id, tenant), the exact version of a registered contract it was decided
under, and its record binds what was proposed: a proven proposal (validation answered or
forwarded it: its digest is registered), the call's payload hash (a StageRecord or its head),
or the proposal digest (a result). A mutation past validation must carry its idempotency key
(its hash on the span), and a call that needed approvals must name the approval it runs under
at execution. Not replayable: a proposal that named no registered contract, that proved no one
or was dead-lettered, a result that names no proposal digest, a call without its key or approval.

**Trace complete** (Trace Completeness), of a final result: it is replayable and its traceparent
is a valid, sampled one, so every stage it passed recorded a span of it in that trace (a stage
records a span for every call of a sampled trace, and ends it when the call's round ends).
Whether an exporter delivered those spans is not known here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from toolgate.schemas.models import ExecutionResult, StageHead, StageRecord, TaxonomyClass, ToolProposal
from toolgate.workers.runtime.passages import Passage

T = TaxonomyClass
INTERIM_CODE = 202
INTERIM_KINDS = {T.CONFIRMATION_MISSING: "approval_pending", T.TIMEOUT: "outcome_unverified"}
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_UNANSWERED = frozenset({Passage.HELD, Passage.DEAD_LETTERED})  # validation: proved no one, or no call at all
Values = Mapping[str, str | bool | int]


@dataclass(frozen=True)
class GateFacts:
    """What validation's gates found of one proposal (workers/validation/tally.py): whether it is
    a first attempt or a repair, the schema and semantic verdicts (valid, invalid, or unchecked
    when an earlier gate or the door refused it), and the repair-loop events it is (triggered,
    repaired, exhausted)."""

    attempt: str
    schema: str
    semantic: str
    loop: tuple[str, ...] = ()


def interim_kind(res: ExecutionResult) -> str | None:
    """The kind of an interim observation; None for a final one."""
    if res.outcome.code != INTERIM_CODE:
        return None
    taxonomy = res.outcome.taxonomy_class
    return INTERIM_KINDS.get(taxonomy, taxonomy.value.lower())


def retry_of(res: ExecutionResult) -> str | None:
    """A final result's part in the retry rates (the module's table)."""
    if res.outcome.taxonomy_class is T.IDEMPOTENCY_CONFLICT:
        return "blocked"
    if res.attempt_number <= 1 or res.idempotency_hit or res.stage == "validation":
        return None
    return "failed" if res.outcome.is_error else "succeeded"


def compensation_of(record: StageRecord, res: ExecutionResult | None) -> str | None:
    """How a compensation ended at execution, if it is one that ran."""
    if record.call.compensation_of is None or record.call.dry_run or res is None or res.idempotency_hit:
        return None
    if interim_kind(res) is not None:
        return "unverified"
    taxonomy = res.outcome.taxonomy_class
    if taxonomy is T.SUCCESS:
        return "succeeded"
    return "failed" if taxonomy is T.COMPENSATION_FAILED else None


def replayable(stage: str, label: str, model: object, span: Values) -> bool:
    """Whether the span and its record hold what a replay of the call needs (module docstring).
    `span`: the span's attributes (span_attributes' names), `label`: how the stage left the call."""
    named = bool(span.get("tool.call_id")) and bool(span.get("tenant.id")) and bool(span.get("tool.contract.version"))
    if not named:
        return False
    if isinstance(model, ToolProposal):
        return label not in _UNANSWERED and (label != Passage.FORWARDED or _keyed(span))
    if isinstance(model, ExecutionResult):
        return bool(model.proposal_digest)
    if isinstance(model, StageRecord | StageHead):
        needs_approval = stage == "execution" and model.required_approvals > 0
        return _keyed(span) and (not needs_approval or bool(model.approval_id))
    return False


def _keyed(span: Values) -> bool:
    """A read needs no key; a mutation's span carries its key's hash."""
    return span.get("tool.side_effect_class") == "READ_ONLY" or bool(span.get("tool.idempotency_key_hash"))


def sampled(traceparent: str) -> bool:
    """Whether `traceparent` is a valid W3C traceparent of a sampled trace."""
    found = _TRACEPARENT.fullmatch(traceparent)
    if found is None or found[1] == "0" * 32 or found[2] == "0" * 16:
        return False
    return bool(int(found[3], 16) & 1)


def trace_complete(res: ExecutionResult, contract_known: bool) -> bool:
    """A final result's trace is complete (module docstring): replayable, and sampled throughout."""
    named = bool(res.call_id) and bool(res.tenant_id) and contract_known
    return named and bool(res.proposal_digest) and sampled(res.traceparent)
