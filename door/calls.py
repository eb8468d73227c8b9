"""What one `tools/call` proposes. Pure.

A client that retries a call passes the same operation id in the request's `_meta`:

    {"_meta": {"toolgate/operation_id": "op-7f3a"}}

and the retry is the same logical operation, with an idempotency key derived from the agent and
that id: one effect however often it is sent, from this MCP session or another. Without it each
call is its own operation. An operation id is 1-200 printable characters; anything else is refused
before anything is proposed.

Runs: one run per MCP session. Over Streamable HTTP a session is its `Mcp-Session-Id`; a stdio
server serves one session for its life; a request with neither (a stateless HTTP exchange) is a
run of its own, unless it names one in `_meta` as `toolgate/run_id`. Whatever it is called, a run
is the calling agent's own: toolgate keys per-run budgets and the repair loop by (tenant, agent,
run_id), so a run_id another agent of the tenant names, here or on the topics, is another run.

A call held for approval is waited for up to the server's wait limit (`toolgate mcp --wait-limit`),
or less when the request says in `_meta` how long it may wait (`toolgate/wait_s`, seconds): a client
whose requests time out sooner gets a result saying the call awaits approval, not a timeout.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OPERATION_ID = "toolgate/operation_id"
RUN_ID = "toolgate/run_id"
WAIT_S = "toolgate/wait_s"
MAX_ID = 200


class BadMeta(ValueError):
    """A `_meta` entry the door cannot use; said to the client as a refusal."""


@dataclass(frozen=True)
class Plan:
    tool: str
    version: str
    arguments: str  # the JSON text proposed: toolgate parses and validates it, not the door
    operation_id: str | None
    idempotency_key: str | None
    dry_run: bool = False


def _checked(meta: Mapping[str, Any] | None, key: str) -> str | None:
    value = (meta or {}).get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID or not value.isprintable():
        raise BadMeta(f"_meta {key} must be a string of 1-{MAX_ID} printable characters")
    return value


def idempotency_key_for(agent_id: str, operation_id: str) -> str:
    """The idempotency key of an agent's operation (the same for every retry)."""
    digest = hashlib.sha256(f"{agent_id}\x00{operation_id}".encode()).hexdigest()[:40]
    return f"mcp:{agent_id}:{digest}"


def plan(
    tool: str, version: str, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any] | None, agent_id: str
) -> Plan:
    """The proposal for a call of `tool` (contract name and exact version) with `arguments`."""
    operation_id = _checked(meta, OPERATION_ID)
    key = idempotency_key_for(agent_id, operation_id) if operation_id is not None else None
    text = json.dumps(dict(arguments or {}), ensure_ascii=False, separators=(",", ":"))
    return Plan(tool, version, text, operation_id, key)


def wait_limit(meta: Mapping[str, Any] | None, server_limit_s: float) -> float:
    """How long to wait for a held call: the server's limit, or less when the request asks."""
    asked = (meta or {}).get(WAIT_S)
    if isinstance(asked, int | float) and not isinstance(asked, bool) and asked >= 0:
        return min(float(asked), server_limit_s)
    return server_limit_s


def run_key(session_id: str | None, meta: Mapping[str, Any] | None, process_run: str) -> str | None:
    """Which run a call belongs to: the one it names, its HTTP session's, or the stdio process's
    (`process_run` is empty over HTTP); None for a run of its own."""
    named = _checked(meta, RUN_ID)
    if named is not None:
        return named
    if session_id:
        return f"mcp-{hashlib.sha256(session_id.encode()).hexdigest()[:24]}"
    return process_run or None
