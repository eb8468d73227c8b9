"""The validation and policy gates are pure by construction: importing them (and everything
they import) loads no Kafka, Postgres, Faust, HTTP or OpenTelemetry client, and their source
reads no clock and no randomness (time comes in as an argument)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

FORBIDDEN = ("psycopg", "faust", "confluent_kafka", "aiohttp", "opentelemetry")
PURE = (
    "toolgate.workers.policy.decision",
    "toolgate.workers.policy.case",
    "toolgate.workers.policy.rules",
    "toolgate.workers.policy.budgets",
    "toolgate.workers.validation.decision",
    "toolgate.workers.validation.arguments",
    "toolgate.workers.validation.schema_findings",
    "toolgate.workers.validation.semantic",
    "toolgate.workers.validation.identity",
    "toolgate.workers.validation.limits",
    "toolgate.workers.validation.repair",
    "toolgate.workers.runtime.facts",
)
CLOCKS = {"now", "utcnow", "today", "time", "time_ns", "monotonic", "perf_counter"}


def test_importing_the_gates_loads_no_io_library() -> None:
    # One fresh interpreter imports them all: if none of the union is loaded, no gate loads one.
    probe = f"import sys, {', '.join(PURE)}; print(' '.join({{m.split('.')[0] for m in sys.modules}}))"
    run = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    loaded = set(run.stdout.split()) & set(FORBIDDEN)
    assert not loaded, f"the gates import {sorted(loaded)}"


@pytest.mark.parametrize("module", PURE)
def test_a_gate_reads_no_clock_and_no_randomness(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"time", "random", "secrets", "uuid"}, module
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not calls & CLOCKS, f"{module} calls {sorted(calls & CLOCKS)}"
