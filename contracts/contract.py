"""One admitted version of a tool contract: its document and executor binding, what the stages
read of it, and its input and output validators, compiled once (contracts/admission.py admits
it, contracts/registry.py resolves versions)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator

from toolgate.contracts.error_contract import ErrorContract
from toolgate.contracts.schema_work import MeteredValidator

VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


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
    def owner(self) -> str:
        """Who answers for the tool (`toolgate contracts list` names it)."""
        return str(self.document["identity"]["owner"])

    @cached_property
    def version_tuple(self) -> tuple[int, int, int]:
        return parse_version(self.version)

    @cached_property
    def lifecycle(self) -> str:
        return str(self.document["identity"]["lifecycle"]["status"])

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
