"""The seeds' span attributes of one call at one stage (AI-engineering chapter, "OpenTelemetry
and Context Propagation"), plus the contract version, auth profile and timeout class.

Every stage's span of a call carries all of them, so any one span of a trace answers what was
proposed, under which contract, and how it ended. An attribute that does not apply is an empty
string (`tool.approval_id` of a call that needed none), never left out. Never a secret: the
idempotency key is carried as its hash (`tool.idempotency_key_hash`), the auth profile names the
kind of credential (`bearer`), never its reference or value.

`trace.replayable` says whether what a replay of the call needs was captured (the seeds' meaning;
call_facts.py's `replayable` says what that is at each stage); it is known when the span ends.
`tool.idempotency_key_hash` is the hash of the call's key: the caller's, or the one validation
derives for a call that named none (from validation on; a result carries no key).

`tool.validation.status` per stage and outcome: validation passes (`passed`, or `repaired` for a
proposal that is a repair attempt) or fails (`failed`); a call held for (or refused for want of)
approval is `approval_pending`; policy and later stages refuse (`blocked`); a call any stage
forwards has `passed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from toolgate.schemas.hashing import fingerprint
from toolgate.schemas.models import ExecutionResult, TaxonomyClass
from toolgate.schemas.wire import field_of
from toolgate.taxonomy import VECTORS
from toolgate.workers.runtime.call_facts import replayable
from toolgate.workers.runtime.passages import Passage

if TYPE_CHECKING:
    from toolgate.contracts.contract import Contract
    from toolgate.contracts.registry import Registry

Attributes = dict[str, str | bool | int]
OPERATION = "execute_tool"
PASSING = frozenset({Passage.FORWARDED, TaxonomyClass.SUCCESS, TaxonomyClass.PARTIAL_SUCCESS})
PENDING = frozenset({Passage.HELD, TaxonomyClass.CONFIRMATION_MISSING})


class Contracts:
    """The contract a call names, looked up once per (name, version spec) the registry knows."""

    def __init__(self) -> None:
        self.registry: Registry | None = None
        self._found: dict[tuple[str, str], Contract] = {}

    def use(self, registry: Registry) -> None:
        self.registry = registry
        self._found.clear()

    def of(self, name: str, spec: str) -> Contract | None:
        found = self._found.get((name, spec))
        if found is None:
            found = self._resolve(name, spec)
            if found is not None:  # a name or spec the registry does not know is not kept:
                self._found[name, spec] = found  # any caller can make up as many as it likes
        return found

    def _resolve(self, name: str, spec: str) -> Contract | None:
        if self.registry is None or not name:
            return None
        try:
            return self.registry.resolve(name, spec or "latest")
        except Exception:  # an unknown tool or version: the call is refused elsewhere
            return None


CONTRACTS = Contracts()


def use_registry(registry: Registry) -> None:
    """The contracts this process runs with: what side-effect class and profile calls get."""
    CONTRACTS.use(registry)


def key_hash(tenant_id: str, key: str | None) -> str:
    """The idempotency key as the seeds want it on a span: hashed, scoped by tenant."""
    if not key:
        return ""
    return fingerprint(f"{tenant_id}\x00{key}", 32)


def contract_facts(contract: Contract | None) -> Attributes:
    if contract is None:
        return {
            "tool.contract.version": "",
            "tool.side_effect_class": "",
            "tool.auth_profile": "",
            "tool.timeout_class": "",
        }
    auth: Mapping[str, object] = contract.executor.get("auth") or {}
    return {
        "tool.contract.version": contract.version,
        "tool.side_effect_class": contract.side_effect_class,
        "tool.auth_profile": str(auth.get("profile", "none")),
        "tool.timeout_class": str(contract.binding.get("timeout_class", "")),
    }


def opened(stage: str, model: object, call_id: str) -> Attributes:
    """What a call's span carries from the start: who, which tool, under which contract."""
    name = str(field_of(model, "tool_name") or "")
    spec = str(field_of(model, "tool_version") or "")
    tenant = str(field_of(model, "tenant_id") or "")
    contract = CONTRACTS.of(name, spec)
    return {
        "toolgate.stage": stage,
        "gen_ai.operation.name": OPERATION,
        "tool.name": name,
        "tool.version": contract.version if contract is not None else spec,
        "tool.call_id": call_id,
        "tenant.id": tenant,
        "tool.idempotency_key_hash": key_hash(tenant, field_of(model, "idempotency_key")),
        "tool.approval_id": str(field_of(model, "approval_id") or ""),
        "trace.replayable": False,  # known when the span ends (`closed`)
        **contract_facts(contract),
    }


def validation_status(stage: str, label: str, failed: bool, model: object) -> str:
    if label in PENDING and not failed:
        return "approval_pending"
    if stage == "validation":
        if failed:
            return "failed"
        return "repaired" if int(field_of(model, "repair_attempt") or 0) > 0 else "passed"
    return "blocked" if failed else "passed"


def closed(
    stage: str, label: str, model: object, began: Mapping[str, str | bool | int] | None = None, key: str | None = None
) -> Attributes:
    """What a call's span carries at its end: how this stage left it. A call held for approval
    (its interim CONFIRMATION_MISSING) has not failed; a denied or expired approval has. `began`:
    what the span opened with (`opened`); `key`: the idempotency key of the call this stage passed on (the
    one validation derived for a call that named none), for a span that opened without it."""
    ended: Attributes = {}
    if key and began is not None and not began.get("tool.idempotency_key_hash"):
        ended["tool.idempotency_key_hash"] = key_hash(str(began.get("tenant.id", "")), key)
    ended.update(_how(stage, label, model))
    ended["trace.replayable"] = replayable(stage, label, model, {**(began or {}), **ended})
    return ended


def _how(stage: str, label: str, model: object) -> Attributes:
    shown = label
    if isinstance(model, ExecutionResult):  # normalization: how the call ended, at whichever stage
        outcome = model.outcome
        failed = outcome.is_error
        retryable, repairable = outcome.retryable, outcome.repairable
        stage, label = model.stage, outcome.taxonomy_class.value
    else:
        failed = label not in PASSING and label not in PENDING
        vector = VECTORS.get(TaxonomyClass(label)) if label in TaxonomyClass.__members__ else None
        retryable = vector.retryable if vector is not None and failed else False
        repairable = vector.repairable if vector is not None and failed else False
    return {
        "toolgate.outcome": shown,
        "tool.validation.status": validation_status(stage, label, failed, model),
        "tool.error_code": label if failed else "",
        "tool.retryable": retryable,
        "tool.repairable": repairable,
    }
