"""A policy set as it is deployed and stored (issue 51, part 4): its files by name, read from a
directory, and admitted again from them wherever they are taken (contracts/policy_set.py).

Pure of I/O but the directory's read: `files_of` reads a set's directory as `toolgate policy
deploy` stores it; `admit_files` admits stored files against a registry's contracts, and refuses
them when they are not the set their digest names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import BUDGETS_FILE, budgets_file
from toolgate.contracts.cedar_policy import policy_files
from toolgate.contracts.contract import Contract
from toolgate.contracts.policy_set import PolicySet, admit_set


def files_of(directory: Path) -> dict[str, str]:
    """A set's files by name: its `*.cedar` and its budgets.json (ContractRefused without one)."""
    found = {Path(source).name: text for source, text in policy_files(directory)}
    source, text = budgets_file(directory)
    found[Path(source).name] = text
    return found


def admit_files(files: Mapping[str, str], contracts: Iterable[Contract], digest: str | None = None) -> PolicySet:
    """The set made of stored `files`, or ContractRefused naming every problem (and a digest that
    is not the files' own: files changed after they were signed)."""
    if not isinstance(files, Mapping) or not all(isinstance(n, str) and isinstance(t, str) for n, t in files.items()):
        raise ContractRefused("policy set refused: its files are not a mapping of file names to texts")
    cedar = sorted((name, text) for name, text in files.items() if name.endswith(".cedar"))
    budgets: tuple[str, str] | ContractRefused
    if BUDGETS_FILE in files:
        budgets = (BUDGETS_FILE, files[BUDGETS_FILE])
    else:
        budgets = ContractRefused(f"{BUDGETS_FILE}: budgets refused: the set has none")
    others = sorted(name for name in files if name != BUDGETS_FILE and not name.endswith(".cedar"))
    if others:
        raise ContractRefused(f"policy set refused: files that are neither policies nor budgets: {', '.join(others)}")
    admitted = admit_set(cedar, budgets, contracts)
    if digest is not None and admitted.digest != digest:
        raise ContractRefused(f"policy set refused: its files' digest is {admitted.digest}, not the {digest} it names")
    return admitted
