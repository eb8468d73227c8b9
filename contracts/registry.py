"""The contract registry: load one document per tool version, admit it, resolve versions.

A contract document is `{"contract": <reference tool contract>, "binding": <executor
binding>}`. It is admitted only if the contract validates against the reference
`tool-contract.schema.json`, the binding against `binding.schema.json`, its input and
output schemas are valid JSON Schemas, its examples satisfy its input schema, and its file
path names the same tool and version, and its binding cannot fail open (binding_rules.py:
every lookup selects tenant_id, every tenant-bound argument is required, every statement names
only the context a call gives). A document that fails is refused at start (`ContractRefused`),
never silently degraded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolgate.contracts import binding_rules
from toolgate.contracts.schema_work import MeteredValidator
from toolgate.schemas.errors import PermanentError
from toolgate.schemas.models import TaxonomyClass

VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
MAJOR_X = re.compile(r"^(0|[1-9]\d*)\.x$")


class ContractRefused(PermanentError):
    """A contract document failed admission."""


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(resources.files("toolgate.contracts").joinpath(name).read_text())
    return schema


REFERENCE_SCHEMA = _schema("reference/tool-contract.schema.json")
BINDING_SCHEMA = _schema("binding.schema.json")
_REFERENCE = Draft202012Validator(REFERENCE_SCHEMA)
_BINDING = Draft202012Validator(BINDING_SCHEMA)


def parse_version(text: str) -> tuple[int, int, int]:
    match = VERSION.match(text)
    if not match:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {text!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


@dataclass(frozen=True)
class Contract:
    """One admitted tool version: the reference contract plus its executor binding."""

    document: Mapping[str, Any]
    binding: Mapping[str, Any]
    source: str = field(compare=False)

    @cached_property
    def name(self) -> str:
        return str(self.document["identity"]["name"])

    @cached_property
    def version(self) -> str:
        return str(self.document["identity"]["version"])

    @cached_property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @cached_property
    def lifecycle(self) -> str:
        return str(self.document["identity"]["lifecycle"]["status"])

    @cached_property
    def side_effect_class(self) -> str:
        return str(self.document["transactional"]["side_effect_class"])

    @cached_property
    def is_mutation(self) -> bool:
        return self.side_effect_class != "READ_ONLY"

    @cached_property
    def required_scopes(self) -> tuple[str, ...]:
        return tuple(self.document["security"]["required_scopes"])

    @cached_property
    def input_schema(self) -> Mapping[str, Any]:
        return self.document["affordance"]["input_schema"]  # type: ignore[no-any-return]

    @cached_property
    def output_schema(self) -> Mapping[str, Any]:
        return self.document["affordance"]["output_schema"]  # type: ignore[no-any-return]

    @cached_property
    def executor(self) -> Mapping[str, Any]:
        return self.binding["executor"]  # type: ignore[no-any-return]

    @cached_property
    def required_approvals(self) -> int:
        approval = self.binding.get("approval")
        if approval:
            return int(approval["required_approvals"])
        return 1 if self.document["transactional"]["confirmation_required"] else 0

    @cached_property
    def approval(self) -> Mapping[str, Any]:
        return self.binding.get("approval") or {}

    @cached_property
    def timeout_ms(self) -> int:
        return int(self.document["runtime"]["timeout_ms"])

    @cached_property
    def max_retries(self) -> int:
        return int(self.document["runtime"]["max_retries"])

    @cached_property
    def idempotency_ttl_seconds(self) -> int:
        return int(self.document["idempotency"]["ttl_seconds"] or 86400)

    @cached_property
    def input_validator(self) -> Draft202012Validator:
        """Every finding, with paths (slow): for the feedback of a failed proposal. Its work is
        counted inside `schema_work.metered`, so validation can bound what a failure costs."""
        validator: Draft202012Validator = MeteredValidator(
            self.input_schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )
        return validator

    @cached_property
    def output_validator(self) -> Draft202012Validator:
        return Draft202012Validator(self.output_schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    @cached_property
    def _fast_input(self) -> Any:
        return fastjsonschema.compile(dict(self.input_schema))

    @cached_property
    def _fast_output(self) -> Any:
        return fastjsonschema.compile(dict(self.output_schema))

    def compile_validators(self) -> None:
        """Compile the yes/no validators now, not in the round of the first call that needs them
        (each takes milliseconds: docs/performance.md, "Figures behind the code")."""
        _ = self._fast_input, self._fast_output

    def accepts_input(self, arguments: Any) -> bool:
        """Yes/no against the input schema, compiled (far faster than collecting findings)."""
        return self.input_violation(arguments) is None

    def input_violation(self, arguments: Any) -> fastjsonschema.JsonSchemaException | None:
        """The first violation of the input schema the compiled validator meets, or None."""
        try:
            self._fast_input(arguments)
        except fastjsonschema.JsonSchemaException as violation:
            return violation
        return None

    def accepts_output(self, data: Any) -> bool:
        try:
            self._fast_output(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True


def admit(document: Mapping[str, Any], source: str) -> Contract:
    """Admit one contract document or raise ContractRefused saying every reason."""
    problems: list[str] = []
    if not isinstance(document, Mapping) or set(document) != {"contract", "binding"}:
        raise ContractRefused(f"{source}: a contract document has exactly 'contract' and 'binding'")
    for error in _REFERENCE.iter_errors(document["contract"]):
        problems.append(f"contract{_where(error.absolute_path)}: {error.message}")
    for error in _BINDING.iter_errors(document["binding"]):
        problems.append(f"binding{_where(error.absolute_path)}: {error.message}")
    if problems:
        raise ContractRefused(f"{source}: " + "; ".join(problems))
    contract = Contract(document["contract"], document["binding"], source)
    try:
        contract.version_tuple  # noqa: B018 - admission check
    except ValueError as exc:
        raise ContractRefused(f"{source}: {exc}") from exc
    for which in ("input_schema", "output_schema"):
        try:
            Draft202012Validator.check_schema(document["contract"]["affordance"][which])
        except SchemaError as exc:
            raise ContractRefused(f"{source}: {which} is not a JSON Schema: {exc.message}") from exc
    for i, example in enumerate(document["contract"]["affordance"]["examples"]):
        for error in contract.input_validator.iter_errors(example["arguments"]):
            raise ContractRefused(f"{source}: example {i} violates the input schema: {error.message}")
    fails_open = binding_rules.problems(contract.name, contract.version, contract.binding, contract.input_schema)
    if fails_open:
        raise ContractRefused(f"{source}: " + "; ".join(fails_open))
    return contract


def _where(path: Iterable[Any]) -> str:
    return "".join(f"[{p!r}]" for p in path)


class Resolution(PermanentError):
    """A tool or version spec that does not resolve; `code` says why."""

    taxonomy_class = TaxonomyClass.STRUCTURAL_VIOLATION

    def __init__(self, code: str, message: str, field: str) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


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
            raise Resolution("version_sunsetted", f"{name} {contract.version} is sunsetted", "tool_version")
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
