"""How big a proposal may be, field by field and as a whole, and what its idempotency key may
hold: what enters is bounded, so what comes out of every stage can always be delivered.

Pure. A proposal that breaks a limit is refused with OUT_OF_BOUNDS, answered where it can be:
its call_id and run_id (what an answer is routed by) must themselves be within limits, or the
proposal names no call that could be answered and is only dead-lettered. The answer carries
none of the oversized text.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.schemas.hashing import CALLER_KEY
from toolgate.schemas.models import FieldError, ToolProposal
from toolgate.store.audit_entry import bounded

MAX_PROPOSAL_BYTES = 512 * 1024  # the whole Avro record, arguments included
MAX_SCOPES = 64
# Characters per field. The arguments have their own limit (decision.MAX_ARGUMENTS_BYTES).
FIELD_LIMITS: dict[str, int] = {
    "call_id": 128,
    "run_id": 256,
    "tenant_id": 63,
    "principal.user_id": 256,
    "principal.agent_id": 63,
    "principal.scopes[]": 128,
    "workflow_id": 256,
    "logical_operation_id": 256,
    "tool_name": 128,
    "tool_version": 32,
    "idempotency_key": 255,
    "compensation_of": 128,
    "key_id": 64,
}
ROUTING = ("call_id", "run_id")  # an answer names these: without them there is nobody to answer


@dataclass(frozen=True)
class Oversized:
    errors: tuple[FieldError, ...]
    answerable: bool  # the call_id and run_id are within limits


def _fields(p: ToolProposal) -> list[tuple[str, str | None]]:
    return [
        ("call_id", p.call_id),
        ("run_id", p.run_id),
        ("tenant_id", p.tenant_id),
        ("principal.user_id", p.principal.user_id),
        ("principal.agent_id", p.principal.agent_id),
        ("workflow_id", p.workflow_id),
        ("logical_operation_id", p.logical_operation_id),
        ("tool_name", p.tool_name),
        ("tool_version", p.tool_version),
        ("idempotency_key", p.idempotency_key),
        ("compensation_of", p.compensation_of),
        ("key_id", p.key_id),
        *(("principal.scopes[]", s) for s in p.principal.scopes),
    ]


def check(proposal: ToolProposal, record_bytes: int) -> Oversized | None:
    errors = []
    if record_bytes > MAX_PROPOSAL_BYTES:
        message = f"the proposal is {record_bytes} bytes; at most {MAX_PROPOSAL_BYTES} are accepted"
        errors.append(_over(None, "too_large", message, MAX_PROPOSAL_BYTES, "bytes", f"{record_bytes} bytes"))
    if len(proposal.principal.scopes) > MAX_SCOPES:
        message = f"at most {MAX_SCOPES} scopes may be requested"
        actual = f"{len(proposal.principal.scopes)} items"
        errors.append(_over("principal.scopes", "too_many", message, MAX_SCOPES, "items", actual))
    long = sorted({name for name, value in _fields(proposal) if value is not None and len(value) > FIELD_LIMITS[name]})
    for name in long:
        message = f"{name} may be at most {FIELD_LIMITS[name]} characters"
        errors.append(_over(name, "too_long", message, FIELD_LIMITS[name], "characters", "longer"))
    key = proposal.idempotency_key
    if key is not None and "idempotency_key" not in long and not CALLER_KEY.fullmatch(key):
        errors.append(
            FieldError(
                field="idempotency_key",
                code="bad_characters",
                message="an idempotency key is 1-255 of A-Z, a-z, 0-9 and . _ : @ + = -",
                expected=CALLER_KEY.pattern,
                actual="other characters",
            )
        )
    if not errors:
        return None
    return Oversized(tuple(errors), answerable=not set(ROUTING) & set(long))


def _over(field: str | None, code: str, message: str, limit: int, unit: str, actual: str) -> FieldError:
    """A limit broken: at most `limit` of `unit` may come, and `actual` came."""
    return FieldError(field=field, code=code, message=message, expected=f"<= {limit} {unit}", actual=actual)


def routable(call_id: str) -> str | None:
    """A call_id that may be named in a dead letter or the audit log: None when it is too long."""
    return bounded(call_id, FIELD_LIMITS["call_id"])


def trimmed(proposal: ToolProposal) -> ToolProposal:
    """The proposal with every field beyond its limit emptied: what a refusal may carry back."""

    def fit(name: str, value: str) -> str:
        return value if len(value) <= FIELD_LIMITS[name] else ""

    p = proposal.principal
    principal = p.model_copy(
        update={
            "user_id": fit("principal.user_id", p.user_id),
            "agent_id": fit("principal.agent_id", p.agent_id),
            "scopes": [s for s in p.scopes[:MAX_SCOPES] if len(s) <= FIELD_LIMITS["principal.scopes[]"]],
        }
    )
    update = {
        name: fit(name, getattr(proposal, name))
        for name in ("tenant_id", "workflow_id", "logical_operation_id", "tool_name", "tool_version")
    }
    return proposal.model_copy(update={**update, "principal": principal, "arguments": ""})
