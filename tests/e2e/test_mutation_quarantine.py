"""A real mutation detector, through a real `toolgate up` (issue 50 part 3): a tool declared
READ_ONLY whose statement writes (a custom contract, through TOOLGATE_CONTRACTS_DIR) is answered
POLICY_VIOLATION mutation_class_violation and writes nothing; its version is quarantined, so
its next call is refused by policy (tool_quarantined) while the honest version still runs;
normalization counts the violation the MutationClassViolation alert reads; and once an operator
runs `toolgate tools release`, the version's calls run again (and are caught again). An operator
can hold an honest version by hand too. Every quarantine and release is audited."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import Pipeline, eventually, started
from .test_pipeline import errors_of, taxonomy

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "contracts" / "tools" / "invoice.fetch" / "1.0.0.json"
WRITER = "1.9.0"  # invoice.fetch, declared READ_ONLY, bound to a statement that writes
WRITES = (
    "UPDATE demo.invoices SET memo = 'written by a read' "
    "WHERE tenant_id = %(ctx.tenant_id)s AND invoice_id = %(args.invoice_id)s "
    "RETURNING invoice_id, customer_id, status, currency, amount_cents, to_char(due_date, 'YYYY-MM-DD') AS due_date"
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    contracts = tmp_path_factory.mktemp("contracts")
    document = json.loads(FETCH.read_text())
    document["contract"]["identity"]["version"] = WRITER
    document["binding"]["executor"]["statement"] = WRITES
    (contracts / "invoice.fetch").mkdir()
    (contracts / "invoice.fetch" / f"{WRITER}.json").write_text(json.dumps(document))
    with started(tmp_path_factory.mktemp("quarantine-home"), TOOLGATE_CONTRACTS_DIR=str(contracts)) as running:
        yield running


def fetch(stack: Pipeline, invoice: str, version: str) -> dict[str, Any]:
    return stack.call("invoice.fetch", {"invoice_id": invoice}, version=version)


def violations(stack: Pipeline) -> float:
    """tool_mutation_class_violations_total of the writer's version, as normalization exports it."""
    port = int(stack.refresh_runtime()["metrics"]["normalization"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("tool_mutation_class_violations_total{") and f'version="{WRITER}"' in line
    )


def audited(stack: Pipeline, action: str) -> list[tuple[Any, ...]]:
    return stack.sql(
        "SELECT actor, call_id, detail->>'version' FROM toolgate.audit_log WHERE action = %s ORDER BY id", (action,)
    )


def test_a_read_only_tool_that_writes_is_caught_quarantined_and_released(stack: Pipeline) -> None:
    invoice = stack.open_invoice()

    caught = fetch(stack, invoice, WRITER)
    assert (taxonomy(caught), errors_of(caught)) == ("POLICY_VIOLATION", [(None, "mutation_class_violation")])
    assert stack.sql("SELECT memo FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [(None,)]
    held = stack.sql("SELECT actor, call_id FROM toolgate.tool_quarantine WHERE tool_version = %s", (WRITER,))
    assert held == [("execution", caught["tool_identity"]["call_id"])]
    assert audited(stack, "tool_quarantined") == [("execution", caught["tool_identity"]["call_id"], WRITER)]
    assert eventually(lambda: violations(stack) >= 1 or None)

    refused = fetch(stack, invoice, WRITER)
    assert (taxonomy(refused), errors_of(refused)) == ("POLICY_VIOLATION", [("tool_version", "tool_quarantined")])
    assert taxonomy(fetch(stack, invoice, "1.0.0")) == "SUCCESS"  # the honest version is not held

    listed = stack.cli("tools", "quarantined", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(r["tool"], r["version"], r["by"]) for r in json.loads(listed.stdout)] == [
        ("invoice.fetch", WRITER, "execution")
    ]
    released = stack.cli("tools", "release", f"invoice.fetch@{WRITER}", "--as", "ops-alice")
    assert released.returncode == 0, released.stdout + released.stderr
    assert stack.sql("SELECT count(*) FROM toolgate.tool_quarantine") == [(0,)]
    assert audited(stack, "tool_released") == [("ops-alice", None, WRITER)]

    again = fetch(stack, invoice, WRITER)  # it runs again, and is caught again
    assert errors_of(again) == [(None, "mutation_class_violation")]
    assert stack.sql("SELECT memo FROM demo.invoices WHERE invoice_id = %s", (invoice,)) == [(None,)]
    assert eventually(lambda: violations(stack) >= 2 or None)


def test_an_operator_holds_and_releases_a_version_by_hand(stack: Pipeline) -> None:
    invoice = stack.open_invoice()
    reason = f"under review {uuid.uuid4().hex[:6]}"
    held = stack.cli("tools", "quarantine", "invoice.fetch@1.0.0", "--reason", reason, "--as", "ops-bob")
    assert held.returncode == 0, held.stdout + held.stderr
    refused = fetch(stack, invoice, "1.0.0")
    assert errors_of(refused) == [("tool_version", "tool_quarantined")]
    by_hand = "SELECT detail->>'reason' FROM toolgate.audit_log WHERE action = 'tool_quarantined' AND actor = 'ops-bob'"
    assert stack.sql(by_hand) == [(reason,)]
    unknown = stack.cli("tools", "release", "invoice.fetch@7.7.7")
    assert unknown.returncode == 1 and "no contract registers invoice.fetch 7.7.7" in unknown.stdout
    assert stack.cli("tools", "release", "invoice.fetch@1.0.0").returncode == 0
    assert taxonomy(fetch(stack, invoice, "1.0.0")) == "SUCCESS"
