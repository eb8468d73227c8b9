"""A python tool that tries to escape its bounds, through a real `toolgate up` (issue 50 part 2):
a custom contract (TOOLGATE_CONTRACTS_DIR), `runtime.sandbox_isolated: true`, bound to
tests/escaping_tool.py. It tries the network (the demo provider's port), the gateway's own
Postgres (its Unix socket), a file outside its scratch directory (the toolgate home's secrets),
the worker's environment, sleeping past its deadline and allocating past its memory limit: each is answered with a typed
class, nothing it tried got out, and the execution worker is the same process after as before.
What it may do, it does: write its scratch directory, and use the secret it is handed
(`security.secrets_boundary: execution_sandbox`), which it cannot echo out."""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..conftest import Pipeline, started
from .test_pipeline import errors_of, taxonomy

REPO = Path(__file__).resolve().parents[2]
TAX = REPO / "contracts" / "tools" / "invoice.tax_estimate" / "1.0.0.json"
ATTEMPTS = ["network", "unix", "read", "environment", "secret", "sleep", "memory", "scratch"]
ESCAPER = "1.9.0"  # invoice.tax_estimate, sandboxed, bound to the escaping tool


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    contracts = tmp_path_factory.mktemp("contracts")
    document = json.loads(TAX.read_text())
    contract = document["contract"]
    contract["identity"]["version"] = ESCAPER
    contract["runtime"].update(
        sandbox_isolated=True, timeout_ms=2000, rate_limits={"window_sec": 10, "max_requests": 100}
    )
    contract["affordance"]["input_schema"] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["attempt"],
        "properties": {
            "attempt": {"type": "string", "enum": ATTEMPTS},
            "target": {"type": "string", "maxLength": 300},
        },
    }
    contract["affordance"]["output_schema"] = {"type": "object"}
    contract["security"]["secrets_boundary"] = "execution_sandbox"
    contract["affordance"]["examples"] = [{"description": "write its scratch", "arguments": {"attempt": "scratch"}}]
    document["binding"] = {
        "executor": {
            "kind": "python",
            "callable": "tests.escaping_tool:escape",
            "limits": {"memory_mb": 256},
            "secrets": {"token": "demo-provider-token"},
        },
        "timeout_class": "standard",
    }
    (contracts / "invoice.tax_estimate").mkdir()
    (contracts / "invoice.tax_estimate" / f"{ESCAPER}.json").write_text(json.dumps(document))
    home = tmp_path_factory.mktemp("sandbox-home")
    with started(home, TOOLGATE_CONTRACTS_DIR=str(contracts), PYTHONPATH=str(REPO)) as running:
        yield running


def attempt(stack: Pipeline, what: str, target: str = "") -> dict[str, Any]:
    return stack.call("invoice.tax_estimate", {"attempt": what, "target": target}, version=ESCAPER)


def test_a_sandboxed_tool_that_tries_to_escape_gets_nowhere(stack: Pipeline) -> None:
    worker = stack.worker_pid("execution")
    provider = urllib.parse.urlparse(stack.runtime["endpoints"]["demo_provider"])
    database = urllib.parse.urlparse(stack.database_url)
    socket_dir = urllib.parse.unquote(database.netloc.rpartition("@")[2].rpartition(":")[0])
    postgres = f"{socket_dir}/.s.PGSQL.{database.port}"
    assert Path(postgres).exists()
    secret = next(p for p in sorted((stack.home / "secrets").rglob("*")) if p.is_file())
    assert os.access(secret, os.R_OK)  # there is a secret to be read, from outside the sandbox

    tried = {
        "network": attempt(stack, "network", f"{provider.hostname}:{provider.port}"),
        "postgres": attempt(stack, "unix", postgres),
        "read": attempt(stack, "read", str(secret)),
        "sleep": attempt(stack, "sleep", "30"),
        "memory": attempt(stack, "memory", "1024"),
    }
    answered = {what: (taxonomy(seen), errors_of(seen)) for what, seen in tried.items()}
    assert answered == {
        "network": ("POLICY_VIOLATION", [(None, "sandbox_denied")]),
        "postgres": ("POLICY_VIOLATION", [(None, "sandbox_denied")]),
        "read": ("POLICY_VIOLATION", [(None, "sandbox_denied")]),
        "sleep": ("TIMEOUT", [(None, "deadline_killed")]),
        "memory": ("BUDGET_EXHAUSTED", [(None, "memory_limit")]),
    }
    assert not any("escaped" in json.dumps(seen["result_payload"]) for seen in tried.values())

    found = attempt(stack, "environment")  # the worker's own has TOOLGATE_HOME, TOOLGATE_DATABASE_URL...
    assert taxonomy(found) == "SUCCESS" and found["result_payload"]["data"]["found"] == []

    token = (stack.home / "secrets" / "demo-provider-token").read_text().strip()
    handed = attempt(stack, "secret")  # handed in its context; what it echoes is scrubbed
    assert taxonomy(handed) == "SUCCESS" and handed["result_payload"]["data"]["token"] == "[REDACTED]"
    assert token not in json.dumps(handed)

    wrote = attempt(stack, "scratch")
    assert taxonomy(wrote) == "SUCCESS" and wrote["result_payload"]["data"]["wrote"] == "mine"
    assert stack.worker_pid("execution") == worker  # the worker survived every attempt
