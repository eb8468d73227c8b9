"""Normalization: an ExecutionResult becomes the agent's Observation.

The observation's JSON form satisfies the reference observation schema by construction: its
models carry the schema's types and required fields, and `build` clamps the latency and the
attempt number and writes the timestamp in RFC 3339. The one constraint a result can carry in
that the models do not hold is a verification delay below zero; such a result fails closed like
any other it cannot normalize. A property test of `normalize` checks every observation it builds
against the reference schema, so no run-time schema check costs each call its price. A
successful result's data (and a partly done effect in parts') must also satisfy the contract's
output schema; when it does not, the agent gets OBSERVATION_NORMALIZATION_FAIL (fail closed)
instead of the raw payload, and the result is dead-lettered for an operator. An error is judged
by the tool's own error contract (contracts/error_contract.py): its lists narrow what the agent
may repair or retry, add what fails closed, and name what to escalate, in the status and in the
feedback alike. Data and errors are scrubbed of registered secrets on the way out: the handler
passes the scrubber in (`Scrub`), so this module needs no telemetry and stays pure.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Protocol

from toolgate.contracts.contract import Contract
from toolgate.contracts.error_contract import Judged
from toolgate.contracts.registry import Registry
from toolgate.schemas.models import (
    ExecutionMetadata,
    ExecutionResult,
    Observation,
    ObservationError,
    ObservationStatus,
    ResultPayload,
    TaxonomyClass,
    ToolIdentity,
    Verification,
)
from toolgate.taxonomy import vector
from toolgate.topics.headers import trace_id_of


class Scrub(Protocol):
    """Replaces registered secret values (toolgate.scrubber's Scrubber is one)."""

    def text(self, value: str) -> str: ...

    def obj(self, value: Any) -> Any: ...


@dataclass(frozen=True)
class Normalized:
    observation: Observation
    problem: str | None = None  # set when the result could not be normalized as it was


def rfc3339(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build(
    res: ExecutionResult,
    data: dict[str, Any] | None,
    errors: list[ObservationError],
    scrub: Scrub,
    taxonomy: TaxonomyClass | None = None,
    contract: Contract | None = None,
) -> Observation:
    """The observation of `res`. Every value comes from models already validated (the result,
    a taxonomy class's vector) or is made here of their types, so the models are built without
    validating them again (`WireModel.built`), in less time
    (docs/performance.md, "Figures behind the code"); the property test of test_normalization.py
    holds that validating the same values gives the same observation, and that it satisfies the
    reference schema."""
    status = res.outcome
    if taxonomy is not None:
        v = vector(taxonomy)
        status_values: dict[str, Any] = {
            "code": v.code,
            "is_error": True,
            "taxonomy_class": taxonomy,
            "retryable": v.retryable,
            "repairable": v.repairable,
            "requires_approval": v.requires_approval,
            "fail_closed": True,
        }
    else:
        status_values = {
            "code": status.code,
            "is_error": status.is_error,
            "taxonomy_class": status.taxonomy_class,
            "retryable": status.retryable,
            "repairable": status.repairable,
            "requires_approval": status.requires_approval,
            "fail_closed": status.fail_closed,
        }
    if contract is not None and status_values["is_error"]:
        data = _as_the_tool_says(contract, status_values, data)
    metadata = {
        "timestamp": rfc3339(res.completed_at_ms),
        "latency_ms": max(0, res.completed_at_ms - res.created_at_ms),
        "idempotency_hit": res.idempotency_hit,
        "trace_id": trace_id_of(res.traceparent),
        "attempt_number": max(1, res.attempt_number),
    }
    payload = {"data": data, "errors": errors, "warnings": [scrub.text(w) for w in res.warnings]}
    return Observation.built(
        {
            "tool_identity": ToolIdentity.built(
                {"name": res.tool_name, "version": res.tool_version, "call_id": res.call_id}
            ),
            "execution_metadata": ExecutionMetadata.built(metadata),
            "status": ObservationStatus.built(status_values),
            "result_payload": ResultPayload.built(payload),
            "verification": res.verification if taxonomy is None else Verification(),
        }
    )


def _as_the_tool_says(contract: Contract, status: dict[str, Any], data: dict[str, Any] | None) -> dict[str, Any] | None:
    """An error as the tool's error contract reads it: `status`'s flags set in place, and the data
    returned with its feedback (when it has one) saying the same and the next action."""
    taxonomy = status["taxonomy_class"]
    feedback = data.get("feedback") if data is not None else None
    told = feedback if isinstance(feedback, dict) else {}
    said = Judged(
        status["repairable"],
        status["retryable"],
        status["fail_closed"],
        told.get("next_action") or vector(taxonomy).next_action,
    )
    judged = contract.errors.judge(taxonomy, said)
    status.update(repairable=judged.repairable, retryable=judged.retryable, fail_closed=judged.fail_closed)
    if data is None or not told:
        return data
    said_now = {"repairable": judged.repairable, "retryable": judged.retryable, "next_action": judged.next_action}
    return {**data, "feedback": {**told, **said_now}}


def _contract_of(res: ExecutionResult, registry: Registry) -> Contract | None:
    try:
        return registry.get(res.tool_name, res.tool_version)
    except KeyError:  # a call refused before its version was resolved
        return None


# An effect in parts of which some part was done (workers/execution/parts.py): its data is the
# tool's answer, as a success's is, besides the compensation execution names.
_PARTS_DONE = (TaxonomyClass.PARTIAL_SUCCESS, TaxonomyClass.COMPENSATION_REQUIRED)


def _tool_answer(res: ExecutionResult, contract: Contract | None, data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The tool's own answer in `res`, to check against its output schema (None: nothing to
    check): a success's data, not a dry run's preview; an effect in parts' when a part was
    done, without the compensation toolgate adds, unless the result was withheld for its size."""
    taxonomy = res.outcome.taxonomy_class
    if contract is None or (data or {}).get("dry_run"):
        return None
    if taxonomy is TaxonomyClass.SUCCESS:
        return data or {}
    if taxonomy in _PARTS_DONE and "parts" in contract.binding and data is not None and "withheld" not in data:
        return {k: v for k, v in data.items() if k != "compensation"}
    return None


def normalize(res: ExecutionResult, registry: Registry, scrub: Scrub) -> Normalized:
    data = scrub.obj(res.data) if res.data is not None else None
    errors = [
        ObservationError(
            field=scrub.text(e.field) if e.field is not None else None,
            code=scrub.text(e.code),
            message=scrub.text(e.message),
        )
        for e in res.errors
    ]
    problem = None
    contract = _contract_of(res, registry)
    answer = _tool_answer(res, contract, data)
    if answer is not None and contract is not None and not contract.accepts_output(answer):
        violations = [
            f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
            for e in contract.output_validator.iter_errors(answer)
        ]
        if violations:
            problem = "result does not satisfy the output schema: " + "; ".join(violations)[:1500]
    if problem is None and res.verification.delay_seconds < 0:
        problem = (
            "observation does not satisfy the reference schema: "
            f"verification/delay_seconds: {res.verification.delay_seconds} is less than the minimum of 0"
        )
    if problem is None:
        return Normalized(build(res, data, errors, scrub, contract=contract))
    failed = build(
        res,
        None,
        [
            ObservationError(
                field=None,
                code="normalization_failed",
                message="the tool's result could not be normalized; an operator has the raw result",
            )
        ],
        scrub,
        TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL,
        contract,
    )
    return Normalized(failed, problem)
