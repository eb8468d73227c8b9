"""Repair-loop control: a model that keeps sending invalid arguments is stopped.

Attempts are counted per logical operation. The loop ends, with a typed, non-repairable
BUDGET_EXHAUSTED (repair_loop_exhausted), when the model sends the same invalid payload
fingerprint twice, gets the same error fingerprint twice, reaches the operation's attempt
limit, or spends the run's repair budget. Pure: the earlier attempts come in.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from toolgate.schemas.models import FieldError, TaxonomyClass, ToolProposal

REPAIRABLE = {
    TaxonomyClass.SYNTACTIC_PARSE_FAIL,
    TaxonomyClass.STRUCTURAL_VIOLATION,
    TaxonomyClass.TYPE_MISMATCH,
    TaxonomyClass.OUT_OF_BOUNDS,
    TaxonomyClass.SEMANTIC_INVALIDITY,
}


def payload_fingerprint(proposal: ToolProposal) -> str:
    material = f"{proposal.tool_name}\x00{proposal.tool_version}\x00{proposal.arguments.strip()}"
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def error_fingerprint(errors: Iterable[FieldError]) -> str:
    material = "\x00".join(sorted(f"{e.field}\x01{e.code}" for e in errors))
    return hashlib.sha256(material.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Earlier:
    payload_fingerprints: frozenset[str]
    error_fingerprints: frozenset[str]
    attempts: int  # failed attempts of this operation before this one
    run_failures: int  # failed validations of the whole run before this one


def exhausted(payload_fp: str, error_fp: str, earlier: Earlier, max_attempts: int, run_budget: int) -> str | None:
    """Why the repair loop ends here, or None while the model may still repair."""
    if payload_fp in earlier.payload_fingerprints:
        return "the same invalid arguments were sent again"
    if error_fp in earlier.error_fingerprints:
        return "the same validation errors came back again"
    if earlier.attempts + 1 >= max_attempts:
        return f"{max_attempts} invalid attempts at this operation"
    if earlier.run_failures + 1 >= run_budget:
        return f"the run's repair budget of {run_budget} is spent"
    return None


def exhaustion_errors(reason: str, errors: Sequence[FieldError]) -> tuple[FieldError, ...]:
    head = FieldError(
        field=None, code="repair_loop_exhausted", message=f"repair loop ended: {reason}; escalate to a human or re-plan"
    )
    return (head, *errors)
