"""The command line is the top floor: it calls ops/ and the client library, never a worker."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[2] / "cli"
MODULES = sorted(CLI.glob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=[p.name for p in MODULES])
def test_cli_imports_no_worker(path: Path) -> None:
    reached = sorted(n for n in imported(path) if n == "toolgate.workers" or n.startswith("toolgate.workers."))
    assert not reached, f"{path.name} reaches into {reached}; call an ops/ function instead"


def test_the_app_lists_every_group() -> None:
    from toolgate.cli.main import app

    groups = [g.name for g in app.registered_groups]
    assert groups == [
        "approvals",
        "approvers",
        "tenants",
        "agents",
        "dlq",
        "audit",
        "evidence",
        "secret",
        "contracts",
        "policy",
        "tools",
        "webhooks",
        "witness",
    ]
