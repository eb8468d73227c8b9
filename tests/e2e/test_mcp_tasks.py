"""Held calls as MCP tasks (issue 52, part 5), through the official `mcp` client over Streamable
HTTP at protocol 2026-07-28 with the Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663)
declared, against the real `toolgate up` and the MCP door of test_mcp.

The client's task support is the SDK's extension API: a `ClientExtension` whose `ResultClaim`
takes the `resultType: "task"` answer; `TasksSupport` below declares it, and resolves a task by
polling `tasks/get` until it ends (what `Client.call_tool` does with a claimed result)."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import pytest
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    CallToolResult,
    CancelTaskRequestParams,
    GetTaskPayloadRequestParams,
    GetTaskRequestParams,
    Request,
    Result,
)
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from toolgate.client.withdrawals import withdrawal
from toolgate.door.calls import OPERATION_ID, WAIT_S, idempotency_key_for
from toolgate.trust.signing import signed_bytes

from ..conftest import Pipeline, eventually
from .test_gates import Approvers, packet_of
from .test_mcp import Door, connect, door, observed
from .test_pipeline import _ledger_for

__all__ = ["door"]  # the door fixture of test_mcp, one server for this module too
pytestmark = pytest.mark.timeout(240)
EXTENSION = "io.modelcontextprotocol/tasks"
CHARGE_TOOL = "payment_charge_card_v1"


class TaskHandle(Result):
    """A CreateTaskResult: the task a held call answers with."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskState(BaseModel):
    """A `tasks/get` answer (a DetailedTask)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")
    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None

    def __init__(self, **data: Any) -> None:
        super().__init__(**{**data, "meta": data.get("_meta")})


class GetTask(Request[GetTaskRequestParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: GetTaskRequestParams


class CancelTask(Request[CancelTaskRequestParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: CancelTaskRequestParams


class TaskResult(Request[GetTaskPayloadRequestParams, Literal["tasks/result"]]):
    method: Literal["tasks/result"] = "tasks/result"
    params: GetTaskPayloadRequestParams


class Acked(BaseModel):
    model_config = ConfigDict(extra="allow")


async def get_task(session: Any, task_id: str) -> TaskState:
    answer: TaskState = await session.send_request(GetTask(params=GetTaskRequestParams(task_id=task_id)), TaskState)
    return answer


async def until_ended(session: Any, task_id: str, timeout: float = 60.0) -> TaskState:
    with anyio.fail_after(timeout):
        while (state := await get_task(session, task_id)).status == "working":
            await anyio.sleep((state.poll_interval_ms or 1000) / 1000)
    return state


async def resolve(handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
    state = await until_ended(ctx.session, handle.task_id)
    if state.status == "completed" and state.result is not None:
        return CallToolResult.model_validate(state.result)
    return CallToolResult(content=[], is_error=True)


class TasksSupport(ClientExtension):
    identifier = EXTENSION

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=resolve)]


@asynccontextmanager
async def modern(door: Door, transport: str = "http") -> AsyncIterator[Client]:
    """A 2026-07-28 client that declares the Tasks extension on every request."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolgate.cli", "mcp", "--agent", "cli"], env=door.env
        )
        with open(door.home / "mcp-stdio.err", "a") as errlog:
            server = stdio_client(params, errlog=errlog)
            async with Client(server, read_timeout_seconds=120, mode="2026-07-28", extensions=[TasksSupport()]) as c:
                yield c
        return
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {door.token}"})
    transport = streamable_http_client(door.url, http_client=http)
    async with http, Client(transport, read_timeout_seconds=120, mode="2026-07-28", extensions=[TasksSupport()]) as c:
        yield c


async def held_task(client: Client, pipeline: Pipeline, operation: str) -> TaskHandle:
    charge = {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"}
    handle = await client.session.call_tool(CHARGE_TOOL, charge, meta={OPERATION_ID: operation}, allow_claimed=True)
    assert isinstance(handle, TaskHandle), handle
    assert handle.status == "working" and handle.task_id.startswith("call_")
    return handle


def approval_of(pipeline: Pipeline, call_id: str) -> str:
    [(approval_id,)] = pipeline.sql("SELECT approval_id FROM toolgate.approvals WHERE call_id = %s", (call_id,))
    return str(approval_id)


def audited(pipeline: Pipeline, call_id: str, action: str) -> list[dict[str, Any]]:
    rows = pipeline.sql("SELECT detail FROM toolgate.audit_log WHERE call_id = %s AND action = %s", (call_id, action))
    return [row[0] for row in rows]


def test_a_held_charge_is_a_task_that_completes_when_approved(pipeline: Pipeline, door: Door) -> None:
    operation = f"op-{uuid.uuid4().hex}"
    approvers = Approvers(pipeline)

    async def body() -> None:
        async with modern(door) as client:
            handle = await held_task(client, pipeline, operation)
            waiting = await get_task(client.session, handle.task_id)
            assert waiting.status == "working" and "0 of 2 approvals" in (waiting.status_message or "")
            approval = (waiting.meta or {})["toolgate/approval"]
            assert (approval["approvals"], approval["required_approvals"]) == (0, 2)
            assert "finance-controllers" in approval["approver_groups"] and approval["expires_at"].endswith("Z")
            packet = packet_of(pipeline, approval_of(pipeline, handle.task_id))
            for who in ("alice", "bob"):
                await anyio.to_thread.run_sync(approvers.decide, packet, who)
            done = await until_ended(client.session, handle.task_id)
            assert done.status == "completed" and done.result is not None
            assert done.result["structuredContent"]["status"]["taxonomy_class"] == "SUCCESS"
            with pytest.raises(MCPError) as removed:  # SEP-2663 removed tasks/result: the result is in tasks/get
                await client.session.send_request(TaskResult(params=GetTaskPayloadRequestParams(task_id="x")), Acked)
            assert removed.value.error.code == METHOD_NOT_FOUND
        async with connect(door, "http") as legacy:  # a 2025-11-25 client: tasks/result gives the final result
            final = await legacy.session.send_request(
                TaskResult(params=GetTaskPayloadRequestParams(task_id=handle.task_id)), CallToolResult
            )
            assert observed(final)["status"]["taxonomy_class"] == "SUCCESS"

    try:
        anyio.run(body)
    finally:
        approvers.close()
    [ledgered] = _ledger_for(pipeline, idempotency_key_for("cli", operation))
    assert ledgered["kind"] == "charge"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_clients_task_support_waits_for_a_held_call_transparently(
    pipeline: Pipeline, door: Door, transport: str
) -> None:
    operation = f"op-{uuid.uuid4().hex}"
    charge = {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"}
    approvers = Approvers(pipeline)

    async def approve() -> None:
        rows = await anyio.to_thread.run_sync(
            eventually,
            lambda: pipeline.sql(
                "SELECT approval_id FROM toolgate.approvals WHERE packet->'arguments'->>'invoice_id' = %s",
                (charge["invoice_id"],),
            ),
        )
        packet = packet_of(pipeline, rows[0][0])
        for who in ("alice", "bob"):
            await anyio.to_thread.run_sync(approvers.decide, packet, who)

    async def body() -> None:
        async with modern(door, transport) as client, anyio.create_task_group() as group:
            group.start_soon(approve)
            result = await client.call_tool(CHARGE_TOOL, charge, meta={OPERATION_ID: operation})
            assert observed(result)["status"]["taxonomy_class"] == "SUCCESS"

    try:
        anyio.run(body)
    finally:
        approvers.close()
    assert len(_ledger_for(pipeline, idempotency_key_for("cli", operation))) == 1


def test_a_cancelled_task_is_withdrawn_and_nothing_runs_even_when_approvals_come_after(
    pipeline: Pipeline, door: Door
) -> None:
    operation = f"op-{uuid.uuid4().hex}"
    approvers = Approvers(pipeline)
    ended: dict[str, Any] = {}

    async def body() -> None:
        async with modern(door) as client:
            handle = await held_task(client, pipeline, operation)
            acked = await client.session.send_request(
                CancelTask(params=CancelTaskRequestParams(task_id=handle.task_id)), Acked
            )
            assert acked is not None
            cancelled = await until_ended(client.session, handle.task_id)
            assert cancelled.status == "cancelled" and "withdrew" in (cancelled.status_message or "")
            ended["call_id"] = handle.task_id
            packet = packet_of(pipeline, approval_of(pipeline, handle.task_id))
            for who in ("alice", "bob"):  # approvals after the withdrawal: the ticket is closed
                await anyio.to_thread.run_sync(approvers.decide, packet, who)
        async with connect(door, "http") as legacy:
            final = observed(await legacy.call_tool("toolgate_call_status", {"call_id": handle.task_id}))
            ended["final"] = final

    try:
        anyio.run(body)
    finally:
        approvers.close()
    call_id, final = ended["call_id"], ended["final"]
    assert final["status"]["taxonomy_class"] == "CONFIRMATION_MISSING"
    assert [e["code"] for e in final["result_payload"]["errors"]] == ["approval_withdrawn"]
    late = eventually(lambda: (found := audited(pipeline, call_id, "decision_refused"))[1:] and found)
    assert [d["code"] for d in late] == ["approval_closed", "approval_closed"]
    [counted] = audited(pipeline, call_id, "withdrawal_counted")
    assert counted["status_after"] == "DENIED"
    time.sleep(3)  # what the late approvals would have released, had they counted
    key = idempotency_key_for("cli", operation)
    assert _ledger_for(pipeline, key) == []  # the provider never saw it
    assert pipeline.sql("SELECT count(*) FROM toolgate.idempotency_keys WHERE call_id = %s", (call_id,)) == [(0,)]
    [(status,)] = pipeline.sql("SELECT status FROM toolgate.approvals WHERE call_id = %s", (call_id,))
    assert status == "DENIED"


def test_a_withdrawal_not_signed_by_the_calls_agent_is_refused(pipeline: Pipeline, door: Door) -> None:
    other = f"other-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli("agents", "add", other, "--tenant", "acme", "--scopes", "invoices:read")
    assert added.returncode == 0, added.stdout + added.stderr
    approvers = Approvers(pipeline)
    operation = f"op-{uuid.uuid4().hex}"
    held: dict[str, str] = {}

    token = json.loads(pipeline.cli("agents", "token", other).stdout)["token"]

    async def body() -> None:
        async with modern(door) as client:
            held["call_id"] = (await held_task(client, pipeline, operation)).task_id
        async with modern(dataclasses.replace(door, token=token)) as client:  # the tenant's other agent
            seen = await get_task(client.session, held["call_id"])
            assert seen.status == "working"
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(
                    CancelTask(params=CancelTaskRequestParams(task_id=seen.task_id)), Acked
                )
            assert refused.value.error.code == INVALID_PARAMS and "another agent's call" in refused.value.error.message

    try:
        anyio.run(body)
        call_id = held["call_id"]
        packet = packet_of(pipeline, approval_of(pipeline, call_id))
        signer = pipeline.client.signer(other)
        now = int(time.time() * 1000)
        for named in (other, "cli"):  # its own name, and the call's agent's name with its key
            unsigned = withdrawal(packet, named, "not mine to withdraw", now)
            forged = unsigned.model_copy(update={"signature": signer.key.sign(signed_bytes(unsigned))})
            approvers.client.publish_decision(forged, packet)
        refused = eventually(lambda: (found := audited(pipeline, call_id, "withdrawal_refused"))[1:] and found)
        by_code = {d["code"]: d for d in refused}
        assert sorted(by_code) == ["bad_signature", "not_the_requester"]
        assert by_code["bad_signature"]["proven"] is False  # the forged one proves nobody
        [(status,)] = pipeline.sql("SELECT status FROM toolgate.approvals WHERE call_id = %s", (call_id,))
        assert status == "PENDING"
        assert audited(pipeline, call_id, "withdrawal_counted") == []
        for who in ("alice", "bob"):  # the call still runs once approved
            approvers.decide(packet, who)
    finally:
        approvers.close()
    eventually(lambda: _ledger_for(pipeline, idempotency_key_for("cli", operation)) or None, timeout=45)


def test_a_2026_client_without_the_extension_keeps_the_answer_it_had(pipeline: Pipeline, door: Door) -> None:
    email = {"to": "ap@coyote.example", "subject": "No tasks here", "body": "Held, awaited."}

    async def body() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {door.token}"})
        transport = streamable_http_client(door.url, http_client=http)
        async with http, Client(transport, read_timeout_seconds=120, mode="2026-07-28") as client:
            held = await client.call_tool("notify_send_email_v1", email, meta={WAIT_S: 2})
            seen = observed(held)
            assert held.is_error is False and seen["status"]["code"] == 202
            assert "toolgate_call_status" in " ".join(getattr(c, "text", "") for c in held.content)
            ended["approval_id"] = seen["result_payload"]["data"]["approval"]["approval_id"]

    ended: dict[str, str] = {}
    anyio.run(body)
    denied = pipeline.cli("approvals", "deny", ended["approval_id"], "--as", "carol", "--reason", "a test's leftover")
    assert denied.returncode == 0, denied.stdout + denied.stderr
