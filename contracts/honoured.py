"""What the runtime can honour of a contract, checked at admission: every field of the reference
contract is either enforced by a stage or, set to a value this runtime cannot keep, refused here,
naming the field. Nothing is admitted to be silently ignored. Field by field, what honours it and
when it is refused:

* `identity.owner`: `toolgate contracts list` names it beside each version.
* `identity.lifecycle`: validation refuses a call of a sunsetted version, or of a deprecated one
  whose sunset date has come, naming its replacement. Refused: a sunset date that is no date.
* `runtime.sandbox_isolated`: true runs a python tool's process in a sandbox: no network, no
  filesystem but a scratch directory (workers/execution/runner.py, landlock.py). Refused: true on
  a postgres or http binding (a statement runs in the worker's own transaction, a request from
  the worker's own process: neither has a sandbox to run in), and true with a
  `security.egress_policy` other than none (the sandbox has no network at all, and no way
  through it to an allowlist).
* `security.secrets_boundary`: `gateway_injected` is what the runtime does (execution resolves an
  http binding's `auth.secret_ref` and sends the secret; the tool never sees the reference).
  `execution_sandbox`: a sandboxed python tool is handed the secrets its binding's
  `executor.secrets` names, resolved at call time, as `context["secrets"]` (never in its
  environment or its files). Refused: `execution_sandbox` for any other tool (it has no sandbox
  to hand a secret to), a python binding naming secrets under any other boundary, and `none`
  with a binding that names a secret.
* `security.tenant_scoped`: every stage scopes a call by its proven tenant, and an http request
  of a tenant-scoped tool names it to the provider (`X-Toolgate-Tenant-Id`). Refused: true with a
  postgres statement that never binds `%(ctx.tenant_id)s`.
* `transactional.side_effect_class`: READ_ONLY is enforced where the executor can be held to
  it: a postgres statement runs read-only (workers/execution/bounds.py), and a write is refused,
  answered POLICY_VIOLATION and the version quarantined. Refused: READ_ONLY on an http binding
  with a writing method (POST, PUT, PATCH, DELETE), which nothing could stop from writing.
* `transactional.semantics`: `idempotent_write` and `irreversible_pivot` are the MCP front door's
  hints (door/tools.py), a compatibility finding when they change (compat.py). Refused:
  `read_only` on any class but READ_ONLY (or READ_ONLY with another), and `saga_step` and
  `retryable_post_pivot`, which nothing here gives a behaviour.
* `idempotency.supported` and `key_header`: the header carries the key to the provider
  (workers/execution/http.py); execution keys every mutation whatever the provider supports.
  Refused: false with a key header.
* `idempotency.required`: every mutation is keyed, by the caller's key or the seeds' derived one
  (schemas/hashing.py). Refused: true on a READ_ONLY tool, whose call is answered once per call
  id and never keyed by its operation.
* `idempotency.payload_hash_required`: always honoured: every key, and every read's outcome, is
  bound to the call's request hash.
* `observability.trace_attributes`: every stage's span carries every name in `CALL_ATTRIBUTES`.
  Refused: a name no span carries.
* `transactional.compensation_tool` with a binding whose `parts` are `steps`: a step failing after
  one committed is answered COMPENSATION_REQUIRED naming the tool (workers/execution/parts.py).
  Refused: steps with no compensation tool, or no `compensation` template to derive its arguments.
* `error_contract.*`: normalization judges each error by the tool's lists
  (contracts/error_contract.py). Refused: a name that is no taxonomy class, or SUCCESS; a class
  listed repairable or retryable that the taxonomy never lets be; a class both retried and
  escalated.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolgate.contracts.contract import Contract
from toolgate.contracts.error_contract import LISTS, ErrorContract
from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import vector
from toolgate.telemetry.call_attributes import CALL_ATTRIBUTES

# Semantics this runtime gives no behaviour, and why.
UNSUPPORTED_SEMANTICS = {
    "saga_step": "no saga coordinator runs a tool as one step of a larger transaction; declare its effect "
    "(idempotent_write, compensable_write, irreversible_pivot) and let the agent's plan be the saga",
    "retryable_post_pivot": "nothing here orders a tool after another's pivot; declare idempotent_write",
}


def problems(contract: Contract) -> list[str]:
    """Every field of `contract` set to what this runtime cannot honour, each named."""
    where = f"{contract.name} {contract.version}"
    return [f"{field} of {where}: {why}" for field, why in _refused(contract)]


def _refused(contract: Contract) -> Iterator[tuple[str, str]]:
    yield from _lifecycle(contract)
    yield from _runtime(contract)
    yield from _security(contract)
    yield from _side_effect_class(contract)
    yield from _semantics(contract)
    yield from _idempotency(contract)
    yield from _observability(contract)
    yield from _error_contract(contract)
    yield from _parts(contract)


def _lifecycle(contract: Contract) -> Iterator[tuple[str, str]]:
    try:
        contract.sunset_date  # noqa: B018 - admission check
    except ValueError:
        sunset = contract.document["identity"]["lifecycle"]["sunset_date"]
        yield "identity.lifecycle.sunset_date", f"{sunset!r} is not a date (YYYY-MM-DD)"


def _runtime(contract: Contract) -> Iterator[tuple[str, str]]:
    if not contract.document["runtime"].get("sandbox_isolated"):
        return
    kind = contract.executor["kind"]
    if kind != "python":
        yield (
            "runtime.sandbox_isolated",
            f"true, but a {kind} binding runs in the execution worker's own process (a statement in its "
            "transaction, a request from its connections): only a python tool runs in a sandbox; set it false",
        )
    egress = contract.document["security"]["egress_policy"]
    if egress != "none":
        yield (
            "security.egress_policy",
            f"{egress}, but runtime.sandbox_isolated is true: the sandbox has no network at all, and no way "
            "through to an allowlist; set it none",
        )


def _security(contract: Contract) -> Iterator[tuple[str, str]]:
    security = contract.document["security"]
    boundary = security["secrets_boundary"]
    secret = (contract.executor.get("auth") or {}).get("secret_ref")
    sandboxed = bool(contract.document["runtime"].get("sandbox_isolated")) and contract.executor["kind"] == "python"
    if boundary == "execution_sandbox" and not sandboxed:
        yield (
            "security.secrets_boundary",
            "execution_sandbox hands secrets to a sandbox, and only a python tool with "
            "runtime.sandbox_isolated true runs in one; use gateway_injected",
        )
    if contract.executor.get("secrets") and boundary != "execution_sandbox":
        yield (
            "binding.executor.secrets",
            f"names secrets to hand the tool, but security.secrets_boundary is {boundary}: a python tool is "
            "given secrets only in its sandbox; set execution_sandbox (and runtime.sandbox_isolated true)",
        )
    elif boundary == "none" and secret:
        yield (
            "security.secrets_boundary",
            f"none, but the binding's executor.auth names the secret {secret!r}; use gateway_injected",
        )
    statement = contract.executor.get("statement")
    if security["tenant_scoped"] and statement is not None and "%(ctx.tenant_id)s" not in statement:
        yield (
            "security.tenant_scoped",
            "true, but the binding's statement never binds %(ctx.tenant_id)s: it could act on any tenant's rows",
        )


# HTTP methods that may change state at the provider (RFC 9110's unsafe methods among those the
# binding allows).
WRITING_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _side_effect_class(contract: Contract) -> Iterator[tuple[str, str]]:
    executor = contract.executor
    if contract.is_mutation or executor["kind"] != "http" or executor["method"] not in WRITING_METHODS:
        return
    yield (
        "binding.executor.method",
        f"{executor['method']} is a writing method, and transactional.side_effect_class is READ_ONLY: "
        "a READ_ONLY HTTP tool may only use GET",
    )


def _semantics(contract: Contract) -> Iterator[tuple[str, str]]:
    semantics = contract.document["transactional"]["semantics"]
    if semantics in UNSUPPORTED_SEMANTICS:
        yield "transactional.semantics", f"{semantics}: {UNSUPPORTED_SEMANTICS[semantics]}"
    elif (semantics == "read_only") != (not contract.is_mutation):
        yield (
            "transactional.semantics",
            f"{semantics}, but transactional.side_effect_class is {contract.side_effect_class}: "
            "read_only semantics is the READ_ONLY class's, and only its",
        )


def _idempotency(contract: Contract) -> Iterator[tuple[str, str]]:
    idempotency = contract.document["idempotency"]
    if not idempotency["supported"] and idempotency.get("key_header"):
        yield (
            "idempotency.key_header",
            f"{idempotency['key_header']!r} names a header for keys, but idempotency.supported is false",
        )
    if idempotency["required"] and not contract.is_mutation:
        yield (
            "idempotency.required",
            "true on a READ_ONLY tool: a read is answered once per call id and never keyed by its "
            "operation; set it false",
        )


def _observability(contract: Contract) -> Iterator[tuple[str, str]]:
    unknown = [a for a in contract.document["observability"]["trace_attributes"] if a not in CALL_ATTRIBUTES]
    if unknown:
        yield (
            "observability.trace_attributes",
            f"no span carries {', '.join(map(repr, unknown))}; "
            f"a call's spans carry {', '.join(sorted(CALL_ATTRIBUTES))}",
        )


def _error_contract(contract: Contract) -> Iterator[tuple[str, str]]:
    lists = contract.document["error_contract"]
    for name in LISTS:
        unknown = [c for c in lists[name] if c not in TaxonomyClass.__members__]
        if unknown:
            yield f"error_contract.{name}", f"{', '.join(map(repr, unknown))} is not a taxonomy class"
    for name in LISTS:
        if TaxonomyClass.SUCCESS.value in lists[name]:
            yield f"error_contract.{name}", "SUCCESS is not an error"
    errors = ErrorContract.of(lists)
    never_repairable = sorted(t.value for t in errors.repairable if not vector(t).repairable)
    if never_repairable:
        yield "error_contract.repairable_errors", f"the taxonomy never lets {', '.join(never_repairable)} be repaired"
    never_retryable = sorted(t.value for t in errors.retryable if not vector(t).retryable)
    if never_retryable:
        yield "error_contract.retryable_errors", f"the taxonomy never lets {', '.join(never_retryable)} be retried"
    both = sorted(t.value for t in errors.retryable & errors.escalated)
    if both:
        yield (
            "error_contract.escalation_errors",
            f"{', '.join(both)} is also retryable: a class is retried or escalated",
        )


def _parts(contract: Contract) -> Iterator[tuple[str, str]]:
    spec = contract.binding.get("parts") or {}
    if spec.get("kind") != "steps":
        return
    if not contract.document["transactional"]["compensation_tool"]:
        yield (
            "transactional.compensation_tool",
            "null, but the binding's parts are steps: a step failing after one committed needs a compensation to name",
        )
    if "compensation" not in contract.binding:
        yield (
            "transactional.compensation_tool",
            "the binding's parts are steps, but it has no compensation template to derive the compensation's arguments",
        )
