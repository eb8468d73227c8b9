"""What an effect is, as data: the call that runs (Job) and how it ended (Effect).

Done (the effect happened: COMPLETED), Failed (nothing happened: FAILED_RETRYABLE or
FAILED_FINAL) or Unknown (it may have happened: the key stays PENDING until a status query or
reconciliation settles it; never retried blindly). Pure: the executors (executors.py,
http.py) produce these, the decision (decision.py) reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.hashing import provider_key
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.scrubber import SCRUBBER


@dataclass(frozen=True)
class Job:
    record: StageRecord
    contract: Contract
    idempotency_key: str
    deadline_ms: int  # absolute, epoch ms: min(contract timeout, proposal deadline)

    @property
    def provider_key(self) -> str:
        """The key the provider sees: the call's key bound to its tenant, tool and version."""
        r = self.record
        return provider_key(r.call.tenant_id, r.call.tool_name, r.call.tool_version, self.idempotency_key)

    @property
    def context(self) -> dict[str, Any]:
        """What a statement (`%(ctx.NAME)s`) or a callable is given about the call
        (contracts/binding_rules.CONTEXT). Never the caller's raw idempotency key: ids a tool
        derives from a key come from `operation_key`, bound to the tenant, tool and version, so
        no two tenants' keys can make the same id."""
        r = self.record
        return {
            "tenant_id": r.call.tenant_id,
            "user_id": r.call.principal.user_id,
            "agent_id": r.call.principal.agent_id,
            "call_id": r.call.call_id,
            "run_id": r.call.run_id,
            "operation_key": self.provider_key,
        }


@dataclass(frozen=True)
class Done:
    data: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    taxonomy: TaxonomyClass
    errors: tuple[FieldError, ...]
    final: bool  # False: nothing happened and a retry is safe
    retry_after_ms: int | None = None


@dataclass(frozen=True)
class Unknown:
    reason: str


Effect = Done | Failed | Unknown


def failed(
    taxonomy: TaxonomyClass, code: str, message: str, *, final: bool, retry_after_ms: int | None = None
) -> Failed:
    """A failure with one error, its message scrubbed of credentials and cut to 500 characters."""
    return Failed(
        taxonomy, (FieldError(field=None, code=code, message=SCRUBBER.text(message)[:500]),), final, retry_after_ms
    )
