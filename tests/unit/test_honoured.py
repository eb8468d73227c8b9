"""A contract asks nothing of the runtime it cannot honour (contracts/honoured.py), and its error
contract narrows the taxonomy's vector as error_contract.py says."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.unit.test_registry import document
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.error_contract import ErrorContract, Judged
from toolgate.schemas.models import TaxonomyClass as T
from toolgate.taxonomy import vector

Doc = dict[str, Any]


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def change(doc: Doc) -> None:
        *parents, last = path.split(".")
        node = doc
        for part in parents:
            node = node[part]
        node[last] = value

    return change


def _no_tenant(doc: Doc) -> None:
    executor = doc["binding"]["executor"]
    executor["statement"] = executor["statement"].replace(
        "WHERE tenant_id = %(ctx.tenant_id)s AND invoice_id", "WHERE invoice_id"
    )
    doc["binding"]["tenant_binding"] = []


def _sandboxed_with_egress(doc: Doc) -> None:
    doc["contract"]["runtime"]["sandbox_isolated"] = True
    doc["contract"]["security"]["egress_policy"] = "allowlisted_domains"


REFUSED = [
    (
        "invoice.fetch",
        _set("contract.runtime.sandbox_isolated", True),
        "runtime.sandbox_isolated",
        "a postgres binding runs in the execution worker's own process",
    ),
    (
        "notify.send_email",
        _set("contract.runtime.sandbox_isolated", True),
        "runtime.sandbox_isolated",
        "a http binding runs in the execution worker's own process",
    ),
    (
        "invoice.tax_estimate",
        _sandboxed_with_egress,
        "security.egress_policy",
        "the sandbox has no network at all",
    ),
    ("invoice.fetch", _set("contract.security.secrets_boundary", "execution_sandbox"), "secrets_boundary", "sandbox"),
    (
        "notify.send_email",
        _set("contract.security.secrets_boundary", "none"),
        "secrets_boundary",
        "demo-provider-token",
    ),
    ("invoice.fetch", _no_tenant, "security.tenant_scoped", "%(ctx.tenant_id)s"),
    (
        "notify.send_email",
        _set("contract.idempotency.supported", False),
        "idempotency.key_header",
        "supported is false",
    ),
    ("invoice.fetch", _set("contract.idempotency.required", True), "idempotency.required", "READ_ONLY"),
    (
        "invoice.fetch",
        _set("contract.observability.trace_attributes", ["tool.name", "user.email"]),
        "trace_attributes",
        "'user.email'",
    ),
    (
        "invoice.fetch",
        _set("contract.error_contract.retryable_errors", ["TIMEOUTS"]),
        "retryable_errors",
        "'TIMEOUTS' is not a taxonomy class",
    ),
    (
        "invoice.fetch",
        _set("contract.error_contract.repairable_errors", ["PERMISSION_DENIED"]),
        "repairable_errors",
        "never lets PERMISSION_DENIED",
    ),
    (
        "invoice.fetch",
        _set("contract.error_contract.retryable_errors", ["SIGNATURE_MISMATCH"]),
        "retryable_errors",
        "never lets SIGNATURE_MISMATCH",
    ),
    (
        "invoice.fetch",
        _set("contract.error_contract.escalation_errors", ["TIMEOUT"]),
        "escalation_errors",
        "TIMEOUT is also retryable",
    ),
    ("invoice.fetch", _set("contract.transactional.semantics", "saga_step"), "semantics", "no saga coordinator"),
    ("invoice.fetch", _set("contract.transactional.semantics", "idempotent_write"), "semantics", "is READ_ONLY"),
    ("invoice.void_draft", _set("contract.transactional.semantics", "read_only"), "semantics", "MEDIUM_RISK_WRITE"),
    (
        "invoice.fetch",
        _set("contract.error_contract.fail_closed_errors", ["SUCCESS"]),
        "fail_closed_errors",
        "SUCCESS is not an error",
    ),
]


@pytest.mark.parametrize(("tool", "change", "field", "why"), REFUSED, ids=[r[2] + ":" + r[3] for r in REFUSED])
def test_a_field_the_runtime_cannot_honour_is_refused_naming_it(
    tool: str, change: Callable[[Doc], None], field: str, why: str
) -> None:
    doc = copy.deepcopy(document(tool))
    change(doc)
    with pytest.raises(ContractRefused) as info:
        admit(doc, "test")
    said = str(info.value)
    assert field in said and why in said and f"{tool} 1.0.0" in said


@pytest.mark.parametrize(
    "change",
    [
        _set("contract.security.secrets_boundary", "none"),  # a tool with no secret
        _set("contract.security.tenant_scoped", False),  # scoped anyway: never refused for it
        _set("contract.idempotency.payload_hash_required", True),
        _set("contract.observability.trace_attributes", ["tool.error_code", "trace.replayable"]),
        _set("contract.error_contract.escalation_errors", ["UNKNOWN_ERROR", "COMPENSATION_FAILED"]),
    ],
)
def test_what_the_runtime_honours_is_admitted(change: Callable[[Doc], None]) -> None:
    doc = copy.deepcopy(document("invoice.fetch"))
    change(doc)
    admit(doc, "test")


def test_a_python_tool_with_no_egress_may_ask_for_a_sandbox_and_limits() -> None:
    doc = copy.deepcopy(document("invoice.tax_estimate"))
    doc["contract"]["runtime"]["sandbox_isolated"] = True
    doc["binding"]["executor"]["limits"] = {"memory_mb": 128, "cpu_seconds": 2}
    admit(doc, "test")


def test_only_a_sandboxed_python_tool_is_handed_secrets() -> None:
    doc = copy.deepcopy(document("invoice.tax_estimate"))
    doc["contract"]["security"]["secrets_boundary"] = "execution_sandbox"
    doc["binding"]["executor"]["secrets"] = {"token": "demo-provider-token"}
    with pytest.raises(ContractRefused) as unsandboxed:
        admit(doc, "test")
    assert "security.secrets_boundary" in str(unsandboxed.value) and "sandbox_isolated true" in str(unsandboxed.value)
    doc["contract"]["runtime"]["sandbox_isolated"] = True
    admit(doc, "test")
    doc["contract"]["security"]["secrets_boundary"] = "gateway_injected"
    with pytest.raises(ContractRefused) as elsewhere:
        admit(doc, "test")
    assert "binding.executor.secrets" in str(elsewhere.value) and "gateway_injected" in str(elsewhere.value)


LISTS = ErrorContract.of(
    {
        "repairable_errors": ["TYPE_MISMATCH"],
        "retryable_errors": ["RATE_LIMITED"],
        "fail_closed_errors": ["TIMEOUT"],
        "escalation_errors": ["TIMEOUT", "UNKNOWN_ERROR"],
    }
)


@pytest.mark.parametrize(
    ("taxonomy", "expected"),
    [
        (T.TYPE_MISMATCH, Judged(True, False, False, "repair_arguments")),  # listed: repairable
        (T.OUT_OF_BOUNDS, Judged(False, False, False, "repair_arguments")),  # not listed: not repairable
        (T.RATE_LIMITED, Judged(False, True, False, "retry_after_delay")),
        (T.DEPENDENCY_UNAVAILABLE, Judged(False, False, False, "retry_after_recovery")),  # not listed
        (T.TIMEOUT, Judged(False, False, True, "escalate")),  # fail closed and escalated, not retried
        (T.PERMISSION_DENIED, Judged(False, False, True, "stop")),  # the taxonomy's fail-closed stays
        (T.UNKNOWN_ERROR, Judged(False, False, True, "escalate")),
    ],
)
def test_the_lists_narrow_the_taxonomys_vector(taxonomy: T, expected: Judged) -> None:
    v = vector(taxonomy)
    assert LISTS.judge(taxonomy, Judged(v.repairable, v.retryable, v.fail_closed, v.next_action)) == expected


def test_a_stage_that_narrowed_a_vector_is_not_widened_by_the_lists() -> None:
    """A TIMEOUT of a non-idempotent tool is not retryable, whatever the tool lists."""
    said = Judged(repairable=False, retryable=False, fail_closed=False, next_action="retry_with_same_key")
    assert (
        ErrorContract.of(
            {
                **{n: [] for n in ("repairable_errors", "fail_closed_errors", "escalation_errors")},
                "retryable_errors": ["TIMEOUT"],
            }
        )
        .judge(T.TIMEOUT, said)
        .retryable
        is False
    )
