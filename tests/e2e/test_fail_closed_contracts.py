"""A custom contract that would fail open is refused before toolgate uses it (N15), through the
real CLI and TOOLGATE_CONTRACTS_DIR: a lookup that does not select tenant_id, or a tenant-bound
argument the input schema lets a caller leave out. So is one that asks what the runtime cannot
honour (contracts/honoured.py): a sandbox for a postgres tool, a span attribute no span carries, an error contract the
taxonomy forbids. The message names the file, the contract and the field. (The gates fail closed
as well: tests/unit/test_fail_closed_contracts.py; every refusal: tests/unit/test_honoured.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
FETCH = REPO / "contracts" / "tools" / "invoice.fetch" / "1.0.0.json"


def _no_tenant(doc: dict[str, Any]) -> None:
    doc["binding"]["tenant_binding"][0]["lookup"] = (
        "SELECT invoice_id AS id, status FROM demo.invoices WHERE invoice_id = ANY(%(ids)s)"
    )


def _optional(doc: dict[str, Any]) -> None:
    doc["contract"]["affordance"]["input_schema"]["required"] = []


def _sandboxed(doc: dict[str, Any]) -> None:
    doc["contract"]["runtime"]["sandbox_isolated"] = True


def _unknown_attribute(doc: dict[str, Any]) -> None:
    doc["contract"]["observability"]["trace_attributes"] = ["tool.name", "user.email"]


def _retried_forgery(doc: dict[str, Any]) -> None:
    doc["contract"]["error_contract"]["retryable_errors"].append("SIGNATURE_MISMATCH")


@pytest.mark.parametrize(
    ("mutate", "said"),
    [
        (_no_tenant, "binding.tenant_binding[0].lookup of invoice.fetch 1.1.0 does not select tenant_id"),
        (_optional, "binding.tenant_binding[0].argument of invoice.fetch 1.1.0 names 'invoice_id'"),
        (_sandboxed, "runtime.sandbox_isolated of invoice.fetch 1.1.0: true, but a postgres binding runs in"),
        (_unknown_attribute, "observability.trace_attributes of invoice.fetch 1.1.0: no span carries 'user.email'"),
        (_retried_forgery, "the taxonomy never lets SIGNATURE_MISMATCH be retried"),
    ],
)
def test_a_contract_that_would_fail_open_is_refused(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], said: str
) -> None:
    doc = json.loads(FETCH.read_text())
    doc["contract"]["identity"]["version"] = "1.1.0"
    mutate(doc)
    (tmp_path / "contracts" / "invoice.fetch").mkdir(parents=True)
    (tmp_path / "contracts" / "invoice.fetch" / "1.1.0.json").write_text(json.dumps(doc))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_HOME=str(tmp_path / "home"), TOOLGATE_CONTRACTS_DIR=str(tmp_path / "contracts"))
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "contracts", "list", "--json"],
        env={**env, "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0, done.stdout
    shown = " ".join((done.stdout + done.stderr).split())
    assert "contract refused" in shown and "invoice.fetch/1.1.0.json" in shown
    assert said in shown
