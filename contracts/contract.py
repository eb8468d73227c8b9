"""One admitted version of a tool contract: its document and executor binding, what the stages
read of it, and its input and output validators, compiled once (contracts/admission.py admits
it, contracts/registry.py resolves versions)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar, cast

import fastjsonschema
from jsonschema import Draft202012Validator

from toolgate.contracts.error_contract import ErrorContract
from toolgate.contracts.schema_work import MeteredValidator

VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")
T = TypeVar("T")


def parse_version(text: str) -> tuple[int, int, int]:
    match = VERSION.match(text)
    if not match:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {text!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def _from_document(kind: Callable[[Any], T], *path: str) -> cached_property[T]:
    """A contract's value at `path` in its document, as `kind`, read once (admission has checked
    that it is there)."""

    def value(contract: Contract) -> T:
        found: Any = contract.document
        for key in path:
            found = found[key]
        return kind(found)

    return cached_property(value)


def _schema(value: Any) -> Mapping[str, Any]:
    return cast(Mapping[str, Any], value)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(value)


@dataclass(frozen=True)
class Contract:
    """One admitted tool version: the reference contract plus its executor binding."""

    document: Mapping[str, Any]
    binding: Mapping[str, Any]
    source: str = field(compare=False)

    name = _from_document(str, "identity", "name")
    version = _from_document(str, "identity", "version")
    owner = _from_document(str, "identity", "owner")  # who answers for the tool (`toolgate contracts list`)
    lifecycle = _from_document(str, "identity", "lifecycle", "status")
    side_effect_class = _from_document(str, "transactional", "side_effect_class")
    required_scopes = _from_document(_strings, "security", "required_scopes")
    input_schema = _from_document(_schema, "affordance", "input_schema")
    output_schema = _from_document(_schema, "affordance", "output_schema")
    timeout_ms = _from_document(int, "runtime", "timeout_ms")
    max_retries = _from_document(int, "runtime", "max_retries")

    @cached_property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @cached_property
    def sunset_date(self) -> dt.date | None:
        """When a deprecated version stops running (admission refuses one that is not a date)."""
        text = self.document["identity"]["lifecycle"].get("sunset_date")
        return dt.date.fromisoformat(text) if text else None

    def sunset_by(self, today: dt.date) -> bool:
        """Sunsetted, or deprecated with its sunset date come: it runs no more."""
        if self.lifecycle == "sunsetted":
            return True
        return self.lifecycle == "deprecated" and self.sunset_date is not None and self.sunset_date <= today

    def instead(self) -> str:
        """What to call instead of this version once it is sunset."""
        return str(self.document["identity"]["lifecycle"].get("replacement") or "an active version")

    def sunset_notice(self) -> str:
        """What a call of a sunset version is told: when, and what to use instead."""
        lifecycle = self.document["identity"]["lifecycle"]
        when = f" on {lifecycle['sunset_date']}" if lifecycle.get("sunset_date") else ""
        instead = f"; use {lifecycle['replacement']}" if lifecycle.get("replacement") else ""
        return f"{self.name} {self.version} was sunset{when}{instead}"

    @cached_property
    def is_mutation(self) -> bool:
        return self.side_effect_class != "READ_ONLY"

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
    def errors(self) -> ErrorContract:
        """What its error contract's lists make of each taxonomy class (contracts/error_contract.py)."""
        return ErrorContract.of(self.document["error_contract"])

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
