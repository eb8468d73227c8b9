"""A policy set's version: one digest over its Cedar files and budgets.json, and the contracts'."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from tests.unit.factories import registry
from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.cedar_policy import PolicyRefused
from toolgate.contracts.policy_set import load_policy_set
from toolgate.contracts.registry import Registry, load_registry


def shipped_copy(into: Path) -> Path:
    source = Path(str(resources.files("toolgate.contracts").joinpath("cedar")))
    shutil.copytree(source, into)
    return into


def test_the_same_files_anywhere_are_the_same_version_and_a_budget_changed_is_another(tmp_path: Path) -> None:
    shipped = load_policy_set(registry())
    copy = load_policy_set(registry(), shipped_copy(tmp_path / "elsewhere"))
    assert len(shipped.digest) == 64 and copy.digest == shipped.digest
    budgets = json.loads((tmp_path / "elsewhere" / "budgets.json").read_text())
    budgets["budgets"]["per_run"]["read"] = 1
    (tmp_path / "elsewhere" / "budgets.json").write_text(json.dumps(budgets))
    changed = load_policy_set(registry(), tmp_path / "elsewhere")
    assert changed.digest != shipped.digest and changed.cedar.digest == shipped.cedar.digest
    assert changed.budgets.limit("acme", "per_run", "read") == 1


def test_a_set_with_bad_policies_and_no_budgets_is_refused_naming_both(tmp_path: Path) -> None:
    (tmp_path / "a.cedar").write_text('@id("x") permit (principal, action, resource) when { context.nope };')
    with pytest.raises(ContractRefused) as refused:
        load_policy_set(registry(), tmp_path)
    assert "policy x" in str(refused.value) and "budgets.json" in str(refused.value)
    shipped_copy(tmp_path / "ok")
    (tmp_path / "ok" / "budgets.json").unlink()
    with pytest.raises(ContractRefused, match=r"holds its budgets\.json") as missing:
        load_policy_set(registry(), tmp_path / "ok")
    assert not isinstance(missing.value, PolicyRefused)


def test_the_contracts_digest_names_their_documents_not_where_they_were_loaded() -> None:
    loaded = load_registry()
    assert loaded.digest == load_registry().digest and len(loaded.digest) == 64
    fewer = Registry(c for c in loaded if c.name != "payment.charge_card")
    assert fewer.digest != loaded.digest
