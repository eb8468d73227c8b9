"""Statements get a key bound to the tenant, never the caller's raw key (N9): the execution
context, admission of statements, the shipped create_draft versions, and what a refused
statement tells the caller."""

from __future__ import annotations

import copy
import re
from typing import Any

import psycopg
import pytest

from tests.unit.factories import changed, contracts, registry, stage_record
from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.binding_rules import CONTEXT, context_problems
from toolgate.contracts.compat import check_registry
from toolgate.contracts.registry import Resolution
from toolgate.schemas.hashing import provider_key
from toolgate.workers.execution.effects import Job
from toolgate.workers.execution.executors import refusal_text, statement_params


def test_a_statement_is_given_the_tenant_bound_key_and_never_the_callers() -> None:
    draft = registry().resolve("invoice.create_draft", "latest")
    record = stage_record(draft, idempotency_key="order-2026-0001")
    job = Job(record, draft, "order-2026-0001", 0)
    assert tuple(job.context) == CONTEXT
    assert job.context["operation_key"] == provider_key("acme", draft.name, draft.version, "order-2026-0001")
    assert "order-2026-0001" not in job.context.values()
    params = statement_params(job)
    assert "ctx.idempotency_key" not in params and "order-2026-0001" not in params.values()
    other = Job(changed(record, tenant_id="globex"), draft, "order-2026-0001", 0)
    assert other.context["operation_key"] != job.context["operation_key"]


def test_every_shipped_statement_names_only_the_context_a_call_gives() -> None:
    for c in contracts():
        assert context_problems(c.name, c.version, c.binding) == [], c.source


def _draft_naming(name: str) -> dict[str, Any]:
    c = registry().resolve("invoice.create_draft", "latest")
    doc = copy.deepcopy({"contract": dict(c.document), "binding": dict(c.binding)})
    doc["binding"]["executor"]["statement"] = doc["binding"]["executor"]["statement"].replace(
        "%(ctx.operation_key)s", f"%(ctx.{name})s"
    )
    return doc


def test_admission_refuses_a_statement_that_reads_the_callers_key() -> None:
    with pytest.raises(ContractRefused) as refused:
        admit(_draft_naming("idempotency_key"), "custom.json")
    message = str(refused.value)
    assert "binding.executor.statement of invoice.create_draft 1.0.1 names ctx.idempotency_key" in message
    assert "derive ids from ctx.operation_key" in message
    with pytest.raises(ContractRefused, match=r"names ctx\.secret_sauce: a call's context is tenant_id"):
        admit(_draft_naming("secret_sauce"), "custom.json")


def test_the_draft_that_read_the_callers_key_is_sunsetted_for_its_patch() -> None:
    old, new = registry().get("invoice.create_draft", "1.0.0"), registry().get("invoice.create_draft", "1.0.1")
    assert (old.lifecycle, new.lifecycle) == ("sunsetted", "active")
    assert old.document["identity"]["lifecycle"]["replacement"] == "invoice.create_draft@1.0.1"
    assert registry().resolve("invoice.create_draft", "latest") is new
    with pytest.raises(Resolution, match=re.escape("was sunset on 2026-11-28; use invoice.create_draft@1.0.1")):
        registry().resolve("invoice.create_draft", "1.0.0")
    # The binding is all that changed: a PATCH, as `toolgate contracts check --all` holds.
    [report] = [r for r in check_registry(registry()) if r.name == "invoice.create_draft"]
    assert (report.old_version, report.new_version, report.findings, report.ok) == ("1.0.0", "1.0.1", (), True)
    assert old.input_schema == new.input_schema and old.output_schema == new.output_schema


def test_an_integrity_violation_is_told_by_its_condition_not_the_servers_text() -> None:
    unique = psycopg.errors.UniqueViolation('duplicate key value violates unique constraint "invoices_pkey"')
    told = refusal_text(unique)
    assert "UniqueViolation" in told and "invoices_pkey" not in told and "duplicate key" not in told
    assert "ForeignKeyViolation" in refusal_text(psycopg.errors.ForeignKeyViolation('violates "invoices_fkey"'))
    # Anything else is about the statement and the caller's own arguments: the server's words
    # (a bare error made here has none, so its name stands in).
    assert refusal_text(psycopg.errors.DivisionByZero()).endswith("refused: DivisionByZero")
