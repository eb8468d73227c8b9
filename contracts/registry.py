"""The contract registry: load one document per tool version, admit it (contracts/admission.py),
resolve versions. A document that fails admission is refused at start (`ContractRefused`), never
silently degraded.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from importlib import resources
from pathlib import Path

from toolgate.contracts.admission import ContractRefused, admit
from toolgate.contracts.contract import VERSION, Contract
from toolgate.schemas.errors import PermanentError
from toolgate.schemas.models import TaxonomyClass

MAJOR_X = re.compile(r"^(0|[1-9]\d*)\.x$")


class Resolution(PermanentError):
    """A tool or version spec that does not resolve; `code` says why."""

    taxonomy_class = TaxonomyClass.STRUCTURAL_VIOLATION

    def __init__(self, code: str, message: str, field: str, expected: str = "a registered tool and version") -> None:
        super().__init__(message)
        self.code = code
        self.field = field
        self.expected = expected  # what the caller should name instead


class Registry:
    def __init__(self, contracts: Iterable[Contract]) -> None:
        self._by_name: dict[str, dict[str, Contract]] = {}
        # Resolutions are pure functions of the (immutable) registry: remembered, boundedly.
        self._resolved: dict[tuple[str, str], Contract | Resolution] = {}
        for contract in contracts:
            versions = self._by_name.setdefault(contract.name, {})
            if contract.version in versions:
                raise ContractRefused(f"{contract.source}: duplicate {contract.name} {contract.version}")
            versions[contract.version] = contract

    def __iter__(self) -> Iterator[Contract]:
        for versions in self._by_name.values():
            yield from versions.values()

    @functools.cached_property
    def digest(self) -> str:
        """The contracts' version, as a decision names it: a sha256 over every registered document
        (canonical JSON, by name and version), so the same contracts are the same version wherever
        they were loaded from."""
        contracts = sorted(self, key=lambda c: (c.name, c.version_tuple))
        text = json.dumps([c.document for c in contracts], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def compile_validators(self) -> None:
        """Every contract's (a stage that checks arguments or results does it as it starts)."""
        for contract in self:
            contract.compile_validators()

    def versions(self, name: str) -> list[Contract]:
        """Every registered version of `name`, oldest first."""
        return sorted(self._by_name.get(name, {}).values(), key=lambda c: c.version_tuple)

    def get(self, name: str, version: str) -> Contract:
        return self._by_name[name][version]

    def resolve(self, name: str, spec: str) -> Contract:
        """Exact `1.2.0`, `1.x` (newest active of major 1) or `latest` (newest active)."""
        key = (name, spec)
        outcome = self._resolved.get(key)
        if outcome is None:
            outcome = self._resolve(name, spec)
            if len(self._resolved) < 10_000:  # agents choose the names: do not grow without bound
                self._resolved[key] = outcome
        if isinstance(outcome, Resolution):
            raise outcome
        return outcome

    def _resolve(self, name: str, spec: str) -> Contract | Resolution:
        try:
            return self._resolve_or_raise(name, spec)
        except Resolution as refused:
            return refused

    def _resolve_or_raise(self, name: str, spec: str) -> Contract:
        versions = self._by_name.get(name)
        if not versions:
            raise Resolution("unknown_tool", f"no tool named {name!r} is registered", "tool_name")
        if VERSION.match(spec):
            contract = versions.get(spec)
            if contract is None:
                raise Resolution("unknown_version", f"{name} has no version {spec}", "tool_version")
        else:
            major = MAJOR_X.match(spec)
            if spec != "latest" and not major:
                raise Resolution(
                    "bad_version_spec",
                    f"version spec {spec!r} is not MAJOR.MINOR.PATCH, MAJOR.x or latest",
                    "tool_version",
                )
            candidates = [
                c
                for c in versions.values()
                if c.lifecycle == "active" and (not major or c.version_tuple[0] == int(major[1]))
            ]
            if not candidates:
                raise Resolution("unknown_version", f"{name} has no active {spec} version", "tool_version")
            contract = max(candidates, key=lambda c: c.version_tuple)
        if contract.lifecycle == "sunsetted":
            raise Resolution("version_sunsetted", contract.sunset_notice(), "tool_version", contract.instead())
        return contract


def load_documents(directory: Path) -> list[Contract]:
    contracts = []
    for path in sorted(directory.glob("*/*.json")):
        try:
            document = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ContractRefused(f"{path}: not JSON: {exc}") from exc
        contract = admit(document, str(path))
        if (path.parent.name, path.stem) != (contract.name, contract.version):
            raise ContractRefused(f"{path}: file path must be {contract.name}/{contract.version}.json")
        contracts.append(contract)
    return contracts


def load_registry(extra_dir: Path | None = None) -> Registry:
    """The shipped contracts plus those under `extra_dir` (TOOLGATE_CONTRACTS_DIR)."""
    shipped = Path(str(resources.files("toolgate.contracts").joinpath("tools")))
    contracts = load_documents(shipped)
    if extra_dir is not None:
        contracts += load_documents(extra_dir)
    return Registry(contracts)
