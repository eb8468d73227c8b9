"""Held calls as MCP tasks: the shapes of the Tasks extension (`io.modelcontextprotocol/tasks`,
SEP-2663, protocol 2026-07-28) and of the 2025-11-25 tasks. Pure.

A `tools/call` whose client declared the extension in the request's capabilities
(`_meta["io.modelcontextprotocol/clientCapabilities"].extensions`) and that is held for approval
is answered with a task (`resultType: "task"`) instead of waiting; its task id is the call id.
A client without the extension (and every 2025-11-25 client, whose `tools/call` result cannot be
a task) keeps today's answer: progress notifications, then the result or `toolgate_call_status`.

    the call                                   task status   carries
    held, its ticket PENDING or APPROVED       working       statusMessage: who must approve, by when
    (no final observation yet)                               _meta toolgate/approval: the ticket
    its final observation: withdrawn by        cancelled     statusMessage: the withdrawal
      its agent (approval_withdrawn)
    any other final observation                completed     result: the CallToolResult (SEP-2663
                                                             inlines it; 2025-11-25 gives it by
                                                             tasks/result), isError as the call's

`tasks/cancel` withdraws the proposal: the door signs a withdrawal as the call's agent
(workers/approval/withdrawal.py); the call still ends with one final observation, which says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from mcp_types import CallToolResult

from toolgate.door.results import ApprovalState, awaiting_text, is_interim

EXTENSION = "io.modelcontextprotocol/tasks"
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
APPROVAL_META = "toolgate/approval"
WITHDRAWN = "approval_withdrawn"
POLL_INTERVAL_MS = 2000


def declared(meta: Mapping[str, Any] | None) -> bool:
    """Whether the request's client declared the Tasks extension (2026-07-28, per request)."""
    capabilities = (meta or {}).get(CAPABILITIES)
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def withdrawn(observation: Mapping[str, Any]) -> bool:
    """Whether a final observation says the call's agent withdrew it."""
    errors = observation["result_payload"].get("errors") or []
    return any(e.get("code") == WITHDRAWN for e in errors)


def status_of(final: Mapping[str, Any] | None) -> str:
    """The task status of a call (the module docstring's table)."""
    if final is None or is_interim(dict(final)):
        return "working"
    return "cancelled" if withdrawn(final) else "completed"


def approval_meta(state: ApprovalState) -> dict[str, Any]:
    """Who must approve and by when, as data beside the status message."""
    return {
        APPROVAL_META: {
            "approval_id": state.approval_id,
            "status": state.status,
            "approvals": state.approved,
            "required_approvals": state.required,
            "approver_groups": list(state.approver_groups),
            "expires_at": iso(state.expires_at_ms),
        }
    }


def _task(call_id: str, status: str, message: str, created_ms: int, updated_ms: int, modern: bool) -> dict[str, Any]:
    ttl, poll = ("ttlMs", "pollIntervalMs") if modern else ("ttl", "pollInterval")
    return {
        "taskId": call_id,
        "status": status,
        "statusMessage": message,
        "createdAt": iso(created_ms),
        "lastUpdatedAt": iso(max(created_ms, updated_ms)),
        ttl: None,  # answered while Postgres keeps the ticket and the tenant's topic the observation
        poll: POLL_INTERVAL_MS,
    }


def created(call_id: str, state: ApprovalState, created_ms: int, updated_ms: int) -> dict[str, Any]:
    """The `tools/call` answer of a held call: a CreateTaskResult (SEP-2663, flat)."""
    task = _task(call_id, "working", awaiting_text(call_id, state), created_ms, updated_ms, True)
    return {"resultType": "task", **task, "_meta": approval_meta(state)}


def detailed(
    call_id: str,
    state: ApprovalState,
    final: CallToolResult | None,
    created_ms: int,
    updated_ms: int,
    modern: bool,
) -> dict[str, Any]:
    """The `tasks/get` answer: the task with its status, and its result once completed (modern)."""
    observation = final.structured_content if final is not None else None
    status = status_of(observation)
    if status == "working":
        message = awaiting_text(call_id, state) if state.status == "PENDING" else _decided(call_id, state)
    else:
        message = " ".join(getattr(c, "text", "") for c in final.content) if final is not None else status
    task = _task(call_id, status, message, created_ms, updated_ms, modern)
    if status == "completed" and modern and final is not None:
        task["result"] = final.model_dump(by_alias=True, mode="json", exclude_none=True)
    return {**task, "_meta": approval_meta(state)}


def _decided(call_id: str, state: ApprovalState) -> str:
    if state.status == "APPROVED":
        return f"call {call_id} was approved ({state.approved} of {state.required}) and runs"
    return f"call {call_id}'s approval {state.approval_id} is {state.status}; its final observation is on its way"
