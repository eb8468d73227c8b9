"""docs/architecture.md, the map of the house: every path it names exists, and every stage, topic and
table it must name (or does name) is a real one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from toolgate.topics.catalog import CATALOG
from toolgate.workers.stages import STAGES

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
MIGRATIONS = REPO / "ops" / "migrations"
SUFFIXES = (".py", ".sql", ".avsc", ".json", ".yml", ".yaml", ".md", ".toml")
# Folders mapped into the namespace (pyproject.toml, package-dir): `toolgate.<name>` is a module, not a table.
PACKAGE_DIR = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
PACKAGES = {name.split(".")[1] for name in PACKAGE_DIR if "." in name}
TABLE_STATEMENT = re.compile(
    r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<created>\w+\.\w+)"
    r"|DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?P<dropped>\w+\.\w+)"
    r"|ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?P<renamed>\w+\.\w+)\s+RENAME\s+TO\s+(?P<to>\w+)",
    re.IGNORECASE,
)


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def backticked() -> list[str]:
    return re.findall(r"`([^`\n]+)`", doc_text())


def path_of(token: str) -> str | None:
    """The repository path a backticked token names (a `:LINE` or `:Name` after it dropped), or None."""
    path = token.split(":", 1)[0]
    if " " in path or not path:
        return None
    return path if "/" in path or path.endswith(SUFFIXES) else None


def existing_tables() -> set[str]:
    """`schema.table` of every table the migrations leave, applied in order: created, dropped, renamed."""
    tables: set[str] = set()
    for migration in sorted(MIGRATIONS.glob("*.sql")):
        sql = re.sub(r"--[^\n]*", "", migration.read_text(encoding="utf-8"))
        for m in TABLE_STATEMENT.finditer(sql):
            if m["created"]:
                tables.add(m["created"].lower())
            elif m["dropped"]:
                tables.discard(m["dropped"].lower())
            else:
                tables.discard(m["renamed"].lower())
                tables.add(f"{m['renamed'].split('.')[0]}.{m['to']}".lower())
    return tables


def test_the_doc_exists() -> None:
    assert DOC.is_file(), "docs/architecture.md is missing"


def test_every_path_the_doc_names_exists() -> None:
    paths = sorted({p for p in map(path_of, backticked()) if p is not None})
    assert paths, "the doc names no path at all"
    missing = [p for p in paths if not (any(REPO.glob(p)) if "*" in p else (REPO / p).exists())]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_is_named(stage: str) -> None:
    assert re.search(rf"(?<![\w-]){re.escape(stage)}(?![\w-])", doc_text()), f"stage {stage} is not in the doc"


@pytest.mark.parametrize("topic", [spec.name for spec in CATALOG])
def test_every_topic_is_named(topic: str) -> None:
    assert f"`{topic}`" in doc_text() or f"`{topic}." in doc_text(), f"topic {topic} is not in the doc"


def test_the_migrations_are_read() -> None:
    tables = existing_tables()
    assert {"toolgate.idempotency_keys", "toolgate.outbox", "toolgate.audit_log"} <= tables
    assert "toolgate.usage" not in tables  # dropped by 0004
    assert "toolgate.usage_events" in tables and "toolgate.usage_operations" not in tables  # 0017's rename


def test_every_table_the_doc_names_exists() -> None:
    # `toolgate.settings` is a module; a name that is both (`toolgate.agent_keys`) passes as either.
    modules = (
        PACKAGES
        | {p.stem for p in (REPO / "toolgate").glob("*.py")}
        | {p.name for p in (REPO / "toolgate").iterdir() if p.is_dir()}
    )
    named = {
        token
        for token in backticked()
        if re.fullmatch(r"(toolgate|demo)\.[a-z_]+", token) and token.split(".")[1] not in modules
    }
    assert "toolgate.idempotency_keys" in named, "the doc names no toolgate.<table>"
    missing = sorted(named - existing_tables())
    assert not missing, f"docs/architecture.md names tables no migration leaves: {missing}"


def test_the_readme_sends_readers_to_the_map() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "(docs/architecture.md)" in readme and "DESIGN.md" not in readme
