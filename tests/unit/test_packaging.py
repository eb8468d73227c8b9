"""Packaging: every package and every runtime data file reaches an installed toolgate."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
PACKAGE_DIR: dict[str, str] = SETUPTOOLS["package-dir"]
TOP = {
    "toolgate": "toolgate",
    "cli": "toolgate.cli",
    "client": "toolgate.client",
    "contracts": "toolgate.contracts",
    "schemas": "toolgate.schemas",
    "store": "toolgate.store",
    "topics": "toolgate.topics",
    "workers": "toolgate.workers",
    "ops": "toolgate.ops",
    "door": "toolgate.door",
    "console": "toolgate.console",
}


def mapped_name(init: Path) -> str:
    rel = init.parent.relative_to(ROOT)
    return ".".join([TOP[rel.parts[0]], *rel.parts[1:]])


INITS = sorted(p for top in TOP for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts)


def test_package_dir_mapping() -> None:
    assert {name: folder for folder, name in TOP.items()} == PACKAGE_DIR
    for name in SETUPTOOLS["packages"]:
        assert (package_folder(name) / "__init__.py").is_file(), name


@pytest.mark.parametrize("init", INITS, ids=[str(p.parent.relative_to(ROOT)) for p in INITS])
def test_package_listed(init: Path) -> None:
    assert mapped_name(init) in SETUPTOOLS["packages"]


def test_listed_packages_exist() -> None:
    names = {mapped_name(p) for p in INITS}
    assert set(SETUPTOOLS["packages"]) <= names


def package_folder(name: str) -> Path:
    """Where a listed package lives: its longest mapped prefix in package-dir, then the rest."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if prefix in PACKAGE_DIR:
            return ROOT / PACKAGE_DIR[prefix] / Path(*parts[cut:])
    raise AssertionError(f"{name} has no package-dir entry")


def package_of(path: Path) -> tuple[str, Path]:
    """The deepest listed package holding a file, and the package's folder."""
    holders = [(name, package_folder(name)) for name in SETUPTOOLS["packages"]]
    holders = [(n, f) for n, f in holders if f in path.parents]
    assert holders, f"{path} is in no package"
    return max(holders, key=lambda h: len(h[1].parts))


def covered(path: Path) -> bool:
    name, folder = package_of(path)
    patterns = SETUPTOOLS.get("package-data", {}).get(name, [])
    return any(path in set(folder.glob(p)) for p in patterns)


CATEGORIES: dict[str, list[Path]] = {
    "schemas/avro/*.avsc": sorted((ROOT / "schemas" / "avro").glob("*.avsc")),
    "schemas/avro/released/*/*.avsc": sorted((ROOT / "schemas" / "avro" / "released").glob("*/*.avsc")),
    "schemas/reference/*.json": sorted((ROOT / "schemas" / "reference").glob("*.json")),
    "contracts/tools/*/*.json": sorted((ROOT / "contracts" / "tools").glob("*/*.json")),
    "contracts/*.json": sorted((ROOT / "contracts").glob("*.json")),
    "contracts/reference/*.json": sorted((ROOT / "contracts" / "reference").glob("*.json")),
    "contracts/cedar/*.json": sorted((ROOT / "contracts" / "cedar").glob("*.json")),
    "ops/**/*.sql": sorted((ROOT / "ops").rglob("*.sql")),
    "ops/grafana/dashboards/*.json": sorted((ROOT / "ops" / "grafana" / "dashboards").glob("*.json")),
    "console/templates/*.html": sorted((ROOT / "console" / "templates").glob("*.html")),
    "console/static/*": sorted((ROOT / "console" / "static").glob("*.*")),
}


def _param(category: str) -> object:
    return pytest.param(category, id=category)


@pytest.mark.parametrize("category", [_param(c) for c in CATEGORIES])
def test_data_files_in_package_data(category: str) -> None:
    files = CATEGORIES[category]
    assert files, f"no files match {category}"
    missing = [str(p.relative_to(ROOT)) for p in files if not covered(p)]
    assert not missing, f"not in package-data: {missing}"


def test_every_data_file_is_in_a_category() -> None:
    data = [
        p
        for top in TOP
        for p in (ROOT / top).rglob("*")
        if p.is_file()
        and p.suffix in (".avsc", ".json", ".sql", ".html", ".js", ".css")
        and "__pycache__" not in p.parts
    ]
    categorized = {p for files in CATEGORIES.values() for p in files}
    assert set(data) == categorized
