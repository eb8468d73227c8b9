"""A policy set as the policy stage runs it: the Cedar policies (contracts/cedar_policy.py) and the
budgets beside them (contracts/budgets.py), admitted together against the contracts, named by one
content digest.

The digest is what a decision names as the version that made it: a sha256 over every file of the
set (each `*.cedar` and `budgets.json`, by name, in name order), so two directories with the same
files are the same version wherever they are, and changing a budget is a new version as changing
a policy is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from toolgate.contracts.admission import ContractRefused
from toolgate.contracts.budgets import Budgets, admit_budgets_text, budgets_file
from toolgate.contracts.cedar_policy import CedarPolicy, PolicyRefused, admit_policies, policy_files
from toolgate.contracts.contract import Contract


@dataclass(frozen=True)
class PolicySet:
    cedar: CedarPolicy
    budgets: Budgets
    digest: str


def set_digest(files: Iterable[tuple[str, str]]) -> str:
    """The digest of a set's files ((name, text); only the file's own name counts, not its folder)."""
    named = sorted((Path(name).name, text) for name, text in files)
    return hashlib.sha256("\0".join(f"{n}\0{t}" for n, t in named).encode()).hexdigest()


def admit_set(
    cedar_files: list[tuple[str, str]], budgets: tuple[str, str] | ContractRefused, contracts: Iterable[Contract]
) -> PolicySet:
    """The set made of `cedar_files` and `budgets` ((source, text) each; or why there is none), or
    ContractRefused naming every problem of both (PolicyRefused when only the policies have some)."""
    problems: list[ContractRefused] = []
    cedar = budget = None
    try:
        cedar = admit_policies(cedar_files, contracts)
    except PolicyRefused as exc:
        problems.append(exc)
    try:
        if isinstance(budgets, ContractRefused):
            raise budgets
        budget = admit_budgets_text(*budgets)
    except ContractRefused as exc:
        problems.append(exc)
    if cedar is None or budget is None or isinstance(budgets, ContractRefused):
        raise problems[0] if len(problems) == 1 else ContractRefused("; ".join(map(str, problems)))
    return PolicySet(cedar, budget, set_digest([*cedar_files, budgets]))


def load_policy_set(contracts: Iterable[Contract], directory: Path | None = None) -> PolicySet:
    """The set in `directory` (the shipped `contracts/cedar/` by default)."""
    try:
        budgets: tuple[str, str] | ContractRefused = budgets_file(directory)
    except ContractRefused as missing:
        budgets = missing
    return admit_set(policy_files(directory), budgets, contracts)
