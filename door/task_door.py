"""The door's task methods (door/tasks.py says their shapes): a held call's task made, read,
cancelled, and its result waited for.

    method        protocol          answers
    tools/call    2026-07-28, the   a held call: a CreateTaskResult (the call's id is the task's)
                  client declares
                  the extension
    tasks/get     every version     the task: working (who must approve, by when), completed (its
                                    result inlined on 2026-07-28) or cancelled
    tasks/cancel  every version     an empty acknowledgement; the door signs a withdrawal as the
                                    call's agent (client/withdrawals.py) while its ticket is
                                    PENDING; the call's one final observation then says so
    tasks/result  2025-11-25 and    the call's final CallToolResult, waited for up to the door's
                  before            wait limit (else the awaiting answer); SEP-2663 removed it:
                                    METHOD_NOT_FOUND on 2026-07-28

A task is the tenant's: another tenant's call id is no task (INVALID_PARAMS), and only the agent
that proposed a call may cancel it (approval-wait checks the signature again).
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND

from toolgate.client.withdrawals import withdraw
from toolgate.door import results, tasks
from toolgate.door.session import Caller, Door
from toolgate.schemas.models import ApprovalRequest
from toolgate.store.held_calls import HeldCall, held_call

GET_WAIT_S = 0.2  # how long tasks/get waits for a final observation the door is about to hear
RESULT_STEP_S = 1.0  # tasks/result: one step of its wait
REASON = "withdrawn by its agent over MCP (tasks/cancel)"


def state_of(held: HeldCall) -> results.ApprovalState:
    return results.ApprovalState(
        held.approval_id,
        held.status,
        held.required_approvals,
        held.approved,
        tuple(held.approver_groups),
        held.expires_at_ms,
    )


class TaskDoor:
    def __init__(self, door: Door) -> None:
        self.door = door

    async def held(self, caller: Caller, call_id: str) -> HeldCall:
        """The call's ticket, or INVALID_PARAMS: no held call of the caller's tenant has that id."""
        with anyio.CancelScope(shield=True):
            async with self.door.pool.connection() as conn:
                found = await held_call(conn, caller.tenant_id, call_id)
        if found is None:
            raise MCPError(INVALID_PARAMS, f"no task {call_id!r} of tenant {caller.tenant_id}")
        return found

    async def created(self, caller: Caller, call_id: str) -> dict[str, Any]:
        """A held call's answer to a client that takes tasks (its ticket is written by then)."""
        held = await self.held(caller, call_id)
        return tasks.created(call_id, state_of(held), held.created_at_ms, held.updated_at_ms)

    async def final(self, caller: Caller, call_id: str, held: HeldCall, wait_s: float) -> types.CallToolResult | None:
        """The call's final result: as the door heard it, else (a decided ticket, a call this door
        did not propose or no longer remembers) from the tenant's topic."""
        heard = await self.door.final_of(caller, call_id, wait_s)
        if heard is not None or held.status == "PENDING":
            return heard
        latest = await self.door.status(caller, call_id)
        observation = latest.structured_content
        return latest if observation is not None and not results.is_interim(observation) else None

    async def get(self, caller: Caller, call_id: str, modern: bool) -> dict[str, Any]:
        held = await self.held(caller, call_id)
        final = await self.final(caller, call_id, held, GET_WAIT_S)
        return tasks.detailed(call_id, state_of(held), final, held.created_at_ms, held.updated_at_ms, modern)

    async def cancel(self, caller: Caller, call_id: str) -> dict[str, Any]:
        held = await self.held(caller, call_id)
        packet = ApprovalRequest.model_validate(held.packet)
        if packet.requested_by.agent_id != caller.agent_id:
            raise MCPError(INVALID_PARAMS, f"task {call_id!r} is another agent's call; only its agent may cancel it")
        if held.status == "PENDING":
            await anyio.to_thread.run_sync(withdraw, self.door.client, packet, caller.agent_id, REASON)
        return {}

    async def result(self, caller: Caller, call_id: str, modern: bool) -> types.CallToolResult:
        if modern:
            raise MCPError(METHOD_NOT_FOUND, "tasks/result is not a method of the Tasks extension: use tasks/get")
        stop_at = time.monotonic() + self.door.wait_limit_s
        while time.monotonic() < stop_at:
            held = await self.held(caller, call_id)
            final = await self.final(caller, call_id, held, RESULT_STEP_S)
            if final is not None:
                return final
            await anyio.sleep(RESULT_STEP_S / 4)  # a call this door does not wait on itself
        return await self.door.status(caller, call_id)
