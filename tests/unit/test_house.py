"""The shape STYLE.md asks for, checked: decisions pure by construction, modules and functions of a
readable size. A decision that starts doing I/O, or a module that grows past its idea, fails here."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = {
    "workers": "toolgate.workers",
    "contracts": "toolgate.contracts",
    "schemas": "toolgate.schemas",
    "topics": "toolgate.topics",
    "ops": "toolgate.ops",
    "door": "toolgate.door",
    "cli": "toolgate.cli",
    "toolgate": "toolgate",
}
IO_PACKAGES = ("psycopg", "psycopg_pool", "confluent_kafka", "aiohttp", "opentelemetry")
CLOCK_CALLS = {
    ("time", "time"),
    ("time", "monotonic"),
    ("time", "time_ns"),
    ("time", "perf_counter"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}
MAX_FUNCTION_LINES = 60
MAX_WORKERS_MODULE_LINES = 300


def sources() -> list[Path]:
    return sorted(p for folder in PACKAGES if (REPO / folder).is_dir() for p in (REPO / folder).rglob("*.py"))


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = [PACKAGES[rel.parts[0]], *rel.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


DECISIONS = sorted(module_name(p) for p in (REPO / "workers").rglob("decision.py"))
# The pure modules decisions are built from, held to the same rule.
PURE_PARTS = (
    "toolgate.workers.policy.case",
    "toolgate.workers.policy.rules",
    "toolgate.workers.policy.budgets",
    "toolgate.workers.policy.cedar",
    "toolgate.workers.policy.round_decisions",
    "toolgate.workers.policy.shadow",
    "toolgate.workers.policy.witness",
    "toolgate.workers.validation.recorded",
    "toolgate.contracts.policy_view",
    "toolgate.ops.whatif",
    "toolgate.ops.evidence_checks.run",
    "toolgate.ops.evidence_checks.proposal",
    "toolgate.ops.evidence_checks.approval",
    "toolgate.ops.evidence_checks.outcome",
    "toolgate.ops.evidence_checks.audit_log",
    "toolgate.ops.evidence_checks.rederive",
    "toolgate.ops.evidence_checks.trust",
    "toolgate.ops.evidence_checks.verdict",
    "toolgate.store.audit_entry",
    "toolgate.workers.policy.values",
    "toolgate.contracts.values",
    "toolgate.contracts.cedar_schema",
    "toolgate.contracts.cedar_reads",
    "toolgate.workers.validation.arguments",
    "toolgate.workers.validation.schema_findings",
    "toolgate.workers.validation.semantic",
    "toolgate.workers.validation.identity",
    "toolgate.workers.validation.limits",
    "toolgate.workers.validation.repair",
    "toolgate.workers.validation.tally",
    "toolgate.workers.execution.answers",
    "toolgate.workers.execution.effects",
    "toolgate.workers.execution.bounds",
    "toolgate.workers.execution.machine",
    "toolgate.workers.execution.asks",
    "toolgate.workers.execution.reservation",
    "toolgate.workers.execution.recording",
    "toolgate.workers.execution.writes",
    "toolgate.workers.execution.keys",
    "toolgate.workers.execution.reads",
    "toolgate.workers.execution.compensation",
    "toolgate.workers.execution.clearance",
    "toolgate.workers.execution.idempotency",
    "toolgate.workers.execution.pending",
    "toolgate.workers.execution.parts",
    "toolgate.workers.execution.confinement",
    "toolgate.workers.approval.packet",
    "toolgate.workers.runtime.facts",
    "toolgate.workers.runtime.call_facts",
    "toolgate.schemas.identity",
    "toolgate.contracts.templates",
    "toolgate.contracts.json_types",
    "toolgate.door.tools",
    "toolgate.door.results",
    "toolgate.door.calls",
    "toolgate.console.editing",
)
PURE = (*DECISIONS, *PURE_PARTS)


def test_every_stage_with_choices_has_a_decision_module() -> None:
    stages = {p.parent.name for p in (REPO / "workers").rglob("decision.py")}
    assert {"validation", "policy", "approval", "execution", "normalization", "reconciliation"} <= stages


@pytest.mark.parametrize("module", PURE)
def test_a_decision_imports_no_io(module: str) -> None:
    """Imported alone in a fresh interpreter, a decision module (and all it imports) loads none of the
    libraries that talk to Kafka, Postgres, HTTP or telemetry."""
    probe = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(IO_PACKAGES)!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [], f"{module} imports I/O"


def clock_reads(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if (name, node.func.attr) in CLOCK_CALLS or name == "random":
                lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module in ("time", "random"):
            lines.append(node.lineno)
        if isinstance(node, ast.Import) and any(a.name in ("time", "random", "secrets", "uuid") for a in node.names):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("module", PURE)
def test_a_decision_reads_no_clock_and_no_randomness(module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    assert clock_reads(ast.parse(Path(spec.origin).read_text())) == [], "time comes in as an argument"


def test_the_clock_check_sees_a_clock() -> None:
    assert clock_reads(ast.parse("import time\nx = dt.datetime.now()\n")) == [1, 2]


def test_no_module_under_workers_is_over_300_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "workers").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_WORKERS_MODULE_LINES
    }
    assert long == {}


def test_no_module_of_the_package_is_over_300_lines() -> None:
    long = {
        str(path.relative_to(REPO)): n
        for path in sources()
        if (n := len(path.read_text().splitlines())) > MAX_WORKERS_MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
