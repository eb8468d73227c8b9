"""Model-facing tool definitions for agents, built from the registry's contracts.

Advisory only (`NOTE`). What `export` returns is what a model is *shown*: a name it may call, a
description with when to use the tool and when not to, the input JSON Schema and examples. None of
it is enforced here, and a model is free to ignore it. Enforcement uses the system-facing contract:
every proposal is still validated against the registered contract version, checked by policy, held
for approval and executed by toolgate, whatever the model was told.

Each definition has the shape LLM tool-calling APIs take (`name`, `description`, `input_schema`)
plus toolgate's own fields:

  name               model-safe: the tool name with '.' replaced by '_', plus '_v' and the major version
                     ("invoice_fetch_v1"); tool-calling APIs accept only ^[a-zA-Z0-9_-]{1,64}$, so
                     "invoice.fetch" itself cannot be a name. Unique in the list.
  tool, version      the registered tool and exact contract version, to propose the call under
  description        the affordance's model_description, then "Use for: ..." and "Do not use for: ..."
                     lines from the allowed and forbidden use cases; a deprecated version's starts with
                     a DEPRECATED line naming its sunset date and replacement
  input_schema       the enforced input JSON Schema (a copy)
  examples           the contract's examples (a copy)
  side_effect_class  the contract's transactional side-effect class
  requires_approval  whether a call is held for human approval (Contract.required_approvals > 0)
  deprecated         {"sunset_date", "replacement"}, only on deprecated versions

By default one definition per tool: the version `latest` resolves to (the newest active one). With
`include_deprecated`, also the newest deprecated version of each other major version (a deprecated
version of the same major as the exported active one is superseded by it, and would share its name).
Sunsetted versions are never exported.
"""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry

NOTE = (
    "Advisory: these definitions are what a model is shown. Enforcement uses the system-facing contract: "
    "every proposed call is validated against its registered contract version, checked by policy, held for "
    "approval and executed by toolgate, whatever the model was told."
)
MODEL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def model_name(tool: str, major: int, *, disambiguate: bool = False) -> str:
    """invoice.fetch, 1 -> invoice_fetch_v1 (shortened with a digest of the name when too long)."""
    base, suffix = _UNSAFE.sub("_", tool), f"_v{major}"
    if disambiguate or len(base) + len(suffix) > 64:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        base = f"{base[: 64 - len(suffix) - len(digest) - 1]}_{digest}"
    return base + suffix


def describe(contract: Contract) -> str:
    affordance = contract.document["affordance"]
    lines = [str(affordance["model_description"]).strip()]
    if contract.lifecycle == "deprecated":
        lifecycle = contract.document["identity"]["lifecycle"]
        notes = [f"sunset {lifecycle['sunset_date']}"] if lifecycle.get("sunset_date") else []
        if lifecycle.get("replacement"):
            notes.append(f"use {lifecycle['replacement']} instead")
        lines.insert(0, "DEPRECATED" + (f" ({'; '.join(notes)})." if notes else "."))
    if affordance["allowed_use_cases"]:
        lines.append("Use for: " + "; ".join(affordance["allowed_use_cases"]))
    if affordance["forbidden_use_cases"]:
        lines.append("Do not use for: " + "; ".join(affordance["forbidden_use_cases"]))
    if contract.required_approvals > 0:
        lines.append("Held for human approval before it runs.")
    return "\n".join(lines)


def _selected(versions: list[Contract], include_deprecated: bool) -> list[Contract]:
    """The versions to show for one tool, newest first."""
    active = [c for c in versions if c.lifecycle == "active"]
    chosen = [max(active, key=lambda c: c.version_tuple)] if active else []
    if include_deprecated:
        majors = {c.version_tuple[0] for c in chosen}
        for contract in sorted(versions, key=lambda c: c.version_tuple, reverse=True):
            if contract.lifecycle == "deprecated" and contract.version_tuple[0] not in majors:
                majors.add(contract.version_tuple[0])
                chosen.append(contract)
    return sorted(chosen, key=lambda c: c.version_tuple, reverse=True)


def definition(contract: Contract, name: str) -> dict[str, Any]:
    """One contract version as a model-facing tool definition named `name`."""
    shown: dict[str, Any] = {
        "name": name,
        "tool": contract.name,
        "version": contract.version,
        "description": describe(contract),
        "input_schema": copy.deepcopy(dict(contract.input_schema)),
        "examples": copy.deepcopy(list(contract.document["affordance"]["examples"])),
        "side_effect_class": contract.side_effect_class,
        "requires_approval": contract.required_approvals > 0,
    }
    if contract.lifecycle == "deprecated":
        lifecycle = contract.document["identity"]["lifecycle"]
        shown["deprecated"] = {"sunset_date": lifecycle["sunset_date"], "replacement": lifecycle["replacement"]}
    return shown


def export(registry: Registry, include_deprecated: bool = False) -> list[dict[str, Any]]:
    """Model-facing definitions of the registry's tools (advisory: see `NOTE`)."""
    definitions: list[dict[str, Any]] = []
    taken: set[str] = set()
    for tool in registry.names():
        for contract in _selected(registry.versions(tool), include_deprecated):
            name = model_name(tool, contract.version_tuple[0])
            if name in taken:  # e.g. "a.b" and "a_b": both would be a_b_v1
                name = model_name(tool, contract.version_tuple[0], disambiguate=True)
            taken.add(name)
            definitions.append(definition(contract, name))
    return definitions


def export_document(registry: Registry, include_deprecated: bool = False) -> dict[str, Any]:
    """`export` under the advisory note, as `toolgate contracts export` writes it."""
    return {"note": NOTE, "tools": export(registry, include_deprecated)}
