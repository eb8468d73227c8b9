"""SQL lives in the store (store/, docs/architecture.md "The store") and the migrations
(ops/migrations/, applied by ops/migrate.py), nowhere else in the package: a module outside the
store that writes a statement (a string literal that begins with one, an f-string's text
included) fails."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.test_layers import FLOORS, REPO

STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT|UPDATE|DELETE\s+FROM|WITH|LOCK|LISTEN|UNLISTEN|NOTIFY|CREATE|ALTER|DROP|GRANT|REVOKE|"
    r"SET|RESET|TRUNCATE|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SHOW|COPY|VACUUM|ANALYZE|DO|CALL|"
    r"PREPARE|EXECUTE|EXPLAIN)\b"
)
# The store, the migrations' runner, and the demo provider's ledger: its own SQLite file, a stand-in
# for a payment or email provider's system, not one of toolgate's tables.
ALLOWED = ("store/", "ops/migrate.py", "ops/stack/provider.py")


def statements(source: str) -> int:
    """How many string literals of `source`, docstrings aside, begin with a SQL statement."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    in_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = node.values[0].value  # an f-string is read by its first text
        elif isinstance(node, ast.Constant) and id(node) not in docstrings | in_fstrings:
            text = node.value
        else:
            continue
        count += isinstance(text, str) and STATEMENT.match(text) is not None
    return count


def with_sql() -> set[str]:
    return {
        relative
        for folder in FLOORS
        for path in sorted((REPO / folder).rglob("*.py"))
        if not (relative := str(path.relative_to(REPO))).startswith(ALLOWED) and statements(path.read_text())
    }


def test_no_module_outside_the_store_writes_sql() -> None:
    assert with_sql() == set()


def test_the_check_sees_a_statement() -> None:
    assert statements('Q = """\nSELECT 1 FROM toolgate.calls\n"""') == 1
    assert statements('q = f"UPDATE toolgate.{table} SET x = 1"') == 1
    assert statements('"""SELECT in a docstring is prose."""\nx = "selected"') == 0
    assert all(Path(REPO / folder).is_dir() for folder in FLOORS)
