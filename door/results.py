"""tools/call answers: an observation, or the door's own refusals, as an MCP `CallToolResult`. Pure.

  what                                   structuredContent       isError  content (text for the model)
  a final observation, SUCCESS           the observation         false    "<tool> <version> succeeded" + data
  a final observation, any refusal       the observation         true     taxonomy class, each field error,
                                                                          and data.feedback.next_action
  a held call past the wait limit        the interim observation false    awaiting approval: call_id,
                                                                          approvals, approvers, deadline
  the door refuses before proposing      none                    true     why (unknown tool, bad _meta,
  (no agent, unknown tool, bad _meta)                                     no such call)
  proposed, but no answer at all within  none                    true     that it goes on, and to ask
  the wait limit                                                          toolgate_call_status

An observation with `status.code` 202 is the interim answer of a call held for approval; its data
names the approval (`approval_id`, `required_approvals`, `expires_at_ms`).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from mcp_types import CallToolResult, TextContent

INTERIM_CODE = 202
MAX_TEXT_DATA = 2000  # characters of result data repeated in the text for the model


@dataclass(frozen=True)
class ApprovalState:
    """A held call's approval as Postgres has it (what the progress notifications say)."""

    approval_id: str
    status: str
    required: int
    approved: int
    approver_groups: tuple[str, ...]
    expires_at_ms: int


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def awaiting_text(call_id: str, state: ApprovalState) -> str:
    """What a progress notification and an awaiting result say about a held call."""
    groups = ", ".join(state.approver_groups) or "the approvers of its risk class"
    return (
        f"call {call_id} is awaiting approval {state.approval_id}: {state.approved} of {state.required} "
        f"approvals, from {groups}; it expires at {_when(state.expires_at_ms)} (auto-denied then)"
    )


def _errors_text(observation: dict[str, Any]) -> list[str]:
    payload = observation["result_payload"]
    feedback = (payload.get("data") or {}).get("feedback") or {}
    lines = []
    for error in feedback.get("field_errors") or payload["errors"]:
        where = error.get("field") or "(call)"
        detail = f" (expected {error['expected']}, got {error['actual']})" if error.get("expected") else ""
        lines.append(f"- {where}: {error['code']}: {error['message']}{detail}")
    if feedback.get("next_action"):
        lines.append(f"next_action: {feedback['next_action']}")
    if feedback.get("retry_after_ms"):
        lines.append(f"retry_after_ms: {feedback['retry_after_ms']}")
    return lines


def summary(observation: dict[str, Any]) -> str:
    """A short text of an observation for the model; structuredContent holds all of it."""
    identity, status = observation["tool_identity"], observation["status"]
    head = f"{identity['name']} {identity['version']} call {identity['call_id']}: {status['taxonomy_class']}"
    if not status["is_error"]:
        data = json.dumps(observation["result_payload"]["data"], sort_keys=True)
        if len(data) > MAX_TEXT_DATA:
            data = data[:MAX_TEXT_DATA] + "... (all of it in structuredContent)"
        replayed = observation["execution_metadata"]["idempotency_hit"]
        hit = " (an earlier run of this operation, replayed)" if replayed else ""
        return f"{head}{hit}\n{data}"
    flags = f"repairable={status['repairable']} retryable={status['retryable']}"
    return "\n".join([f"{head} ({flags})", *_errors_text(observation)])


def observed(observation: dict[str, Any]) -> CallToolResult:
    """A final observation as the call's result."""
    return CallToolResult(
        content=[TextContent(text=summary(observation))],
        structured_content=observation,
        is_error=bool(observation["status"]["is_error"]),
    )


def awaiting(observation: dict[str, Any], state: ApprovalState | None) -> CallToolResult:
    """A held call whose decision did not come within the wait limit: ask toolgate_call_status later."""
    call_id = observation["tool_identity"]["call_id"]
    if state is None:
        approval = (observation["result_payload"]["data"] or {}).get("approval") or {}
        state = ApprovalState(
            str(approval.get("approval_id", "")),
            "PENDING",
            int(approval.get("required_approvals", 0)),
            0,
            (),
            int(approval.get("expires_at_ms", 0)),
        )
    text = f"{awaiting_text(call_id, state)}. Ask toolgate_call_status with call_id {call_id} for its outcome."
    return CallToolResult(content=[TextContent(text=text)], structured_content=observation, is_error=False)


def refused(reason: str) -> CallToolResult:
    """The door refuses before anything is proposed."""
    return CallToolResult(content=[TextContent(text=reason)], is_error=True)


def unanswered(call_id: str, waited_s: float) -> CallToolResult:
    """No answer at all within the wait limit (a slow or recovering pipeline). Marked an error so the
    model does not take it for an outcome; the call was proposed and will be answered."""
    return refused(
        f"call {call_id} was proposed but not answered within {waited_s:g} s; it goes on. Ask toolgate_call_status "
        "with this call_id; retry only with the same _meta toolgate/operation_id, or it is a new operation."
    )


def is_interim(observation: dict[str, Any]) -> bool:
    return int(observation["status"]["code"]) == INTERIM_CODE
