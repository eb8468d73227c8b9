"""Admission of a tool contract document (the registry, contracts/registry.py, admits each it loads).

A contract document is `{"contract": <reference tool contract>, "binding": <executor
binding>}`. It is admitted only if the contract validates against the reference
`tool-contract.schema.json`, the binding against `binding.schema.json`, its input and
output schemas are valid JSON Schemas, its examples satisfy its input schema, and its file
path names the same tool and version, and its binding cannot fail open (binding_rules.py:
every lookup selects tenant_id, every tenant-bound argument is required, every statement names
only the context a call gives), and it asks nothing of the runtime the runtime cannot honour
(honoured.py: a sandbox, a secret where none may be, a span attribute no span carries, an error
contract the taxonomy forbids). A document that fails is refused at start (`ContractRefused`),
never silently degraded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolgate.contracts import binding_rules, honoured, values
from toolgate.contracts.contract import Contract
from toolgate.schemas.errors import PermanentError


class ContractRefused(PermanentError):
    """A contract document failed admission."""


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(resources.files("toolgate.contracts").joinpath(name).read_text())
    return schema


REFERENCE_SCHEMA = _schema("reference/tool-contract.schema.json")
BINDING_SCHEMA = _schema("binding.schema.json")
_REFERENCE = Draft202012Validator(REFERENCE_SCHEMA)
_BINDING = Draft202012Validator(BINDING_SCHEMA)


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
    fails_open += values.problems(contract.name, contract.version, contract.binding, contract.input_schema)
    unhonoured = honoured.problems(contract)
    if fails_open or unhonoured:
        raise ContractRefused(f"{source}: " + "; ".join(fails_open + unhonoured))
    return contract


def _where(path: Iterable[Any]) -> str:
    return "".join(f"[{p!r}]" for p in path)
