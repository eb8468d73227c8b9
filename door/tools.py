"""tools/list: one MCP tool per exported contract, and the door's own two tools. Pure.

A contract's model-facing definition (`contracts/export.py`: model-safe name, description with the
deprecation line, input schema) becomes an MCP `Tool`. Its `outputSchema` is the reference
observation schema, because `structuredContent` is the observation; the contract's own output schema
is what `result_payload.data` holds when the call succeeds (a held call's interim answer or a dry
run's preview hold other objects there, so it is one branch of an `anyOf`).

The annotations come from the side-effect class, with two facts of the contract:

  side-effect class     readOnlyHint  destructiveHint                         idempotentHint
  READ_ONLY             true          false                                   true
  EPHEMERAL_WRITE,
  LOW_RISK_INTERNAL     false         false (true if irreversible_pivot)      semantics idempotent_write
  MEDIUM_RISK_WRITE     false         false (true if irreversible_pivot)      semantics idempotent_write
  HIGH_RISK_EXTERNAL,
  CRITICAL_MUTATION     false         true                                    semantics idempotent_write

  openWorldHint: the executor reaches outside toolgate's database (an `http` executor).

A retried write is one effect only with the same `_meta` operation id (`calls.py`), so no write is
marked idempotent by its class alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from mcp_types import Tool, ToolAnnotations

from toolgate.contracts.contract import Contract
from toolgate.contracts.export import export
from toolgate.contracts.registry import Registry

PREVIEW = "toolgate_preview"
CALL_STATUS = "toolgate_call_status"
DESTRUCTIVE_CLASSES = frozenset({"HIGH_RISK_EXTERNAL", "CRITICAL_MUTATION"})


def annotations_for(contract: Contract) -> ToolAnnotations:
    """The MCP hints for a contract (module docstring's table)."""
    transactional = contract.document["transactional"]
    read_only = contract.side_effect_class == "READ_ONLY"
    semantics = transactional["semantics"]
    return ToolAnnotations(
        title=title_of(contract),
        read_only_hint=read_only,
        destructive_hint=not read_only
        and (contract.side_effect_class in DESTRUCTIVE_CLASSES or semantics == "irreversible_pivot"),
        idempotent_hint=read_only or semantics == "idempotent_write",
        open_world_hint=contract.executor["kind"] == "http",
    )


def title_of(contract: Contract) -> str:
    """invoice.fetch 1.0.0 -> "Invoice fetch (1.0.0)"."""
    words = contract.name.replace(".", " ").replace("_", " ")
    return f"{words[:1].upper()}{words[1:]} ({contract.version})"


def output_schema(observation_schema: Mapping[str, Any], contract: Contract) -> dict[str, Any]:
    """The observation schema, with `result_payload.data` saying what a success holds."""
    schema = copy.deepcopy(dict(observation_schema))
    schema.pop("$id", None)
    data = schema["properties"]["result_payload"]["properties"]["data"]
    success = copy.deepcopy(dict(contract.output_schema))
    success.pop("$schema", None)
    success.pop("$id", None)
    schema["properties"]["result_payload"]["properties"]["data"] = {
        "description": "on SUCCESS, the tool's output; otherwise the approval awaited, the preview, or feedback",
        "anyOf": [success, data],
    }
    return schema


def contract_tools(registry: Registry, observation_schema: Mapping[str, Any]) -> dict[str, tuple[Tool, Contract]]:
    """Every exported contract (deprecated majors included, marked), by its MCP tool name."""
    tools: dict[str, tuple[Tool, Contract]] = {}
    for shown in export(registry, include_deprecated=True):
        contract = registry.get(shown["tool"], shown["version"])
        tool = Tool(
            name=shown["name"],
            title=title_of(contract),
            description=shown["description"],
            input_schema=shown["input_schema"],
            output_schema=output_schema(observation_schema, contract),
            annotations=annotations_for(contract),
            meta={"toolgate/tool": contract.name, "toolgate/version": contract.version},
        )
        tools[tool.name] = (tool, contract)
    return tools


def door_tools(tool_names: list[str], observation_schema: Mapping[str, Any]) -> list[Tool]:
    """The door's own tools: a dry run of any contract tool, and a held call's status."""
    schema = copy.deepcopy(dict(observation_schema))
    schema.pop("$id", None)
    preview = Tool(
        name=PREVIEW,
        title="Preview a call (dry run)",
        description=(
            "Run a tool call through every gate without its effect: which gates it passes, the effects it "
            "would have, the approvals it would need and where it would leave each budget. Use before an "
            "irreversible write."
        ),
        input_schema={
            "type": "object",
            "required": ["tool", "arguments"],
            "additionalProperties": False,
            "properties": {
                "tool": {"type": "string", "enum": sorted(tool_names), "description": "the tool to preview"},
                "arguments": {"type": "object", "description": "its arguments, as for the real call"},
            },
        },
        output_schema=schema,
        annotations=ToolAnnotations(
            title="Preview a call", read_only_hint=True, destructive_hint=False, idempotent_hint=True
        ),
    )
    status = Tool(
        name=CALL_STATUS,
        title="Status of a call",
        description=(
            "The latest answer to an earlier call of this agent, by its call_id: the final observation once "
            "there is one, else that it is still awaiting approval (approvers and deadline)."
        ),
        input_schema={
            "type": "object",
            "required": ["call_id"],
            "additionalProperties": False,
            "properties": {"call_id": {"type": "string", "description": "the call_id an earlier result named"}},
        },
        output_schema=schema,
        annotations=ToolAnnotations(
            title="Status of a call", read_only_hint=True, destructive_hint=False, idempotent_hint=True
        ),
    )
    return [preview, status]
