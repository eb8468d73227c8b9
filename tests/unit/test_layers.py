"""The folders' floors (docs/architecture.md, "The layers"): a folder imports only the folders below
it. The edges that still point up are listed, file by file, and each must still exist: the house's
next floor (issue 49) removes them and this list with them, and any other edge up fails."""

from __future__ import annotations

import ast
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Bottom to top.
FLOORS = ("schemas", "topics", "toolgate", "contracts", "store", "client", "workers", "ops", "door", "console", "cli")
# (file, the folder it imports above its own): the package's root names its public API (the
# clients), imported when first asked for.
UPWARD = {
    ("toolgate/__init__.py", "client"),
}


def folder_of(module: str) -> str | None:
    """The folder a `toolgate...` module lives in (the package-dir map of pyproject.toml)."""
    parts = module.split(".")
    if parts[0] != "toolgate":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in FLOORS else "toolgate"


def imported(path: Path) -> set[str]:
    """Every module `path` imports by absolute name, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def edges_up() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for floor, folder in enumerate(FLOORS):
        for path in sorted((REPO / folder).rglob("*.py")):
            for module in imported(path):
                target = folder_of(module)
                if target is not None and FLOORS.index(target) > floor:
                    found.add((str(path.relative_to(REPO)), target))
    return found


def test_no_folder_imports_one_above_it_but_the_listed_edges() -> None:
    up = edges_up()
    assert up - UPWARD == set(), f"imports of a folder above: {sorted(up - UPWARD)}"
    assert UPWARD - up == set(), f"gone, so off the list: {sorted(UPWARD - up)}"


def imports_by_folder() -> dict[str, Counter[str]]:
    """For each folder, how many import statements name each other folder (docs/architecture.md
    prints this graph)."""
    counts: dict[str, Counter[str]] = {}
    for folder in FLOORS:
        counted: Counter[str] = Counter()
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    modules = [node.module]
                elif isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                else:
                    continue
                counted.update(t for m in modules if (t := folder_of(m)) is not None and t != folder)
        counts[folder] = counted
    return counts


def test_the_map_prints_the_import_graph_as_it_is() -> None:
    """The map's table of imports is the code's, so it cannot go stale."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for folder, counted in imports_by_folder().items():
        cells = ", ".join(f"`{t}/` {n}" for t, n in sorted(counted.items(), key=lambda kv: (-kv[1], kv[0])))
        row = f"| `{folder}/` | {cells or 'nothing of toolgate'} |"
        assert row in doc, f"docs/architecture.md, section 8, should read: {row}"


def test_the_floors_are_every_package_folder() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(project["tool"]["setuptools"]["package-dir"].values()) == set(FLOORS)


def test_the_check_sees_an_import_from_above() -> None:
    assert folder_of("toolgate.workers.runtime.app") == "workers"
    assert folder_of("toolgate.schemas.errors") == "schemas"
    assert folder_of("toolgate.settings") == "toolgate"
    assert folder_of("psycopg") is None


def test_the_independent_verifier_imports_nothing_of_toolgate() -> None:
    """verifier/ is the second opinion on an evidence bundle (issue 53): outside the package, on the
    standard library and `cryptography` only, and the map says so."""
    modules = {m for path in (REPO / "verifier").rglob("*.py") for m in imported(path)}
    assert modules, "verifier/ holds its module"
    assert {m for m in modules if folder_of(m) is not None or m.split(".")[0] in FLOORS} == set()
    assert (
        "verifier"
        not in tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
            "package-dir"
        ].values()
    )
    assert "| `verifier/` | nothing of toolgate |" in (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
