"""The MCP front door (`toolgate mcp`) with the official `mcp` client library, against the real
`toolgate up`: over stdio (a server process per client, signed as the demo agent `cli`) and over
Streamable HTTP (one server for the module, a bearer token from `toolgate agents token`)."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from tests.unit.factories import draft_key
from toolgate.door.calls import OPERATION_ID, WAIT_S, idempotency_key_for

from ..conftest import OBSERVATION_SCHEMA, Pipeline
from .test_pipeline import _ledger_for

pytestmark = pytest.mark.timeout(240)

TRANSPORTS = ["stdio", "http"]
WAIT_LIMIT_S = "90"
DRAFT = {
    "customer_id": "cust_acme01",
    "currency": "USD",
    "due_date": "2030-12-31",
    "lines": [{"description": "via MCP", "quantity": 2, "unit_amount_cents": 4500}],
}


@dataclass
class Door:
    url: str
    token: str
    home: Path
    env: dict[str, str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serving(port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"toolgate mcp --http exited {process.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"toolgate mcp --http not listening after {timeout}s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def door(pipeline: Pipeline) -> Iterator[Door]:
    issued = pipeline.cli("agents", "token", "cli")
    assert issued.returncode == 0, issued.stderr
    token = json.loads(issued.stdout)["token"]
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert pipeline.sql("SELECT agent_id FROM toolgate.agent_tokens WHERE token_hash = %s", (digest,)) == [("cli",)]
    assert pipeline.sql("SELECT count(*) FROM toolgate.audit_log WHERE detail::text LIKE %s", (f"%{token}%",)) == [(0,)]
    port = _free_port()
    log = pipeline.home / "mcp-http.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "toolgate.cli", "mcp", "--http", f"127.0.0.1:{port}", "--wait-limit", WAIT_LIMIT_S],
            env=pipeline.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _serving(port, process, log)
        yield Door(f"http://127.0.0.1:{port}/mcp", token, pipeline.home, pipeline.env)
    finally:
        process.terminate()
        process.wait(30)
    assert token not in log.read_text()  # never logged


@asynccontextmanager
async def connect(door: Door, transport: str) -> AsyncIterator[Client]:
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolgate.cli", "mcp", "--agent", "cli", "--wait-limit", WAIT_LIMIT_S],
            env=door.env,
        )
        with open(door.home / "mcp-stdio.err", "a") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
                yield client
        return
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {door.token}"})
    transport = streamable_http_client(door.url, http_client=http)
    # The handshake era, which has sessions (Mcp-Session-Id): what desktop clients speak today.
    async with http, Client(transport, read_timeout_seconds=120, mode="legacy") as client:
        yield client


def run(door: Door, transport: str, body: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with connect(door, transport) as client:
            await body(client)

    anyio.run(main)


def observed(result: CallToolResult) -> dict[str, Any]:
    """The observation a result carries, valid against the reference schema."""
    document = result.structured_content
    assert isinstance(document, dict), result
    errors = sorted(OBSERVATION_SCHEMA.iter_errors(document), key=str)
    assert not errors, f"structuredContent violates the reference observation schema: {errors[0]}"
    return document


def text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def tools_are_the_contracts(client: Client) -> None:
    """tools/list: the contracts, with their schemas and hints, and the door's own tools."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert {"invoice_fetch_v1", "invoice_create_draft_v1", "payment_charge_card_v1"} <= set(listed)
    assert {"toolgate_preview", "toolgate_call_status"} <= set(listed)
    fetch, charge = listed["invoice_fetch_v1"], listed["payment_charge_card_v1"]
    assert fetch.input_schema["required"] == ["invoice_id"]
    assert fetch.output_schema is not None and "result_payload" in fetch.output_schema["properties"]
    assert fetch.annotations is not None and fetch.annotations.read_only_hint is True
    assert charge.annotations is not None
    assert (charge.annotations.read_only_hint, charge.annotations.destructive_hint) == (False, True)
    assert charge.annotations.open_world_hint is True
    assert "Held for human approval" in (charge.description or "")
    assert (listed["invoice_fetch_v0"].description or "").startswith("DEPRECATED")


async def approve_and_await(client: Client, pipeline: Pipeline, approval_id: str, call_id: str) -> None:
    """Approve from the CLI as carol, then ask toolgate_call_status until the call has ended: SUCCESS."""
    done = await anyio.to_thread.run_sync(pipeline.cli, "approvals", "approve", approval_id, "--as", "carol")
    assert done.returncode == 0, done.stderr
    for _ in range(60):
        status = await client.call_tool("toolgate_call_status", {"call_id": call_id})
        if observed(status)["status"]["code"] != 202:
            break
    assert observed(status)["status"]["taxonomy_class"] == "SUCCESS", text(status)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_are_the_contracts_a_read_succeeds_and_refusals_say_what_to_repair(door: Door, transport: str) -> None:
    async def body(client: Client) -> None:
        await tools_are_the_contracts(client)
        read = await client.call_tool("invoice_fetch_v1", {"invoice_id": "inv_acme0001"})
        seen = observed(read)
        assert read.is_error is False and seen["status"]["taxonomy_class"] == "SUCCESS"
        assert seen["result_payload"]["data"]["invoice_id"] == "inv_acme0001"

        invalid = await client.call_tool("invoice_fetch_v1", {"invoice_id": 42})
        seen = observed(invalid)
        assert invalid.is_error is True and seen["status"]["taxonomy_class"] == "TYPE_MISMATCH"
        [field_error] = seen["result_payload"]["data"]["feedback"]["field_errors"]
        assert field_error["field"] == "invoice_id"
        assert "invoice_id:" in text(invalid) and "next_action:" in text(invalid)

        foreign = await client.call_tool("invoice_fetch_v1", {"invoice_id": "inv_globex0001"})
        seen = observed(foreign)
        assert foreign.is_error is True and seen["status"]["taxonomy_class"] == "STALE_STATE"
        assert [e["code"] for e in seen["result_payload"]["errors"]] == ["resource_missing"]

        unknown = await client.call_tool("invoice_delete_everything_v1", {})
        assert unknown.is_error is True and unknown.structured_content is None

    run(door, transport, body)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_retry_with_the_same_operation_id_is_one_effect(pipeline: Pipeline, door: Door, transport: str) -> None:
    operation = f"op-{uuid.uuid4().hex}"
    [(started,)] = pipeline.sql("SELECT now()")

    async def body(client: Client) -> None:
        first = observed(await client.call_tool("invoice_create_draft_v1", DRAFT, meta={OPERATION_ID: operation}))
        again = observed(await client.call_tool("invoice_create_draft_v1", DRAFT, meta={OPERATION_ID: operation}))
        assert first["status"]["taxonomy_class"] == again["status"]["taxonomy_class"] == "SUCCESS"
        assert again["execution_metadata"]["idempotency_hit"] is True
        assert again["result_payload"]["data"] == first["result_payload"]["data"]
        other = observed(await client.call_tool("invoice_create_draft_v1", DRAFT))  # no operation id: a new one
        assert other["execution_metadata"]["idempotency_hit"] is False

    run(door, transport, body)
    key = idempotency_key_for("cli", operation)
    assert pipeline.sql("SELECT count(*) FROM demo.invoices WHERE operation_key = %s", (draft_key(key),)) == [(1,)]
    runs = pipeline.sql(
        "SELECT count(DISTINCT run_id) FROM toolgate.usage_events "
        "WHERE tenant_id = 'acme' AND tool_name = 'invoice.create_draft' AND at >= %s",
        (started,),
    )
    assert runs == [(1,)]  # both operations in the session's one run


APPROVAL = re.compile(r"awaiting approval (appr_\w+)")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_charge_reports_its_approval_as_progress_and_runs_once(
    pipeline: Pipeline, door: Door, transport: str
) -> None:
    operation = f"op-{uuid.uuid4().hex}"
    charge = {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"}
    messages: list[str] = []
    announced = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        if APPROVAL.search(message or ""):
            announced.set()

    async def approve() -> None:
        await announced.wait()
        [approval_id] = {m for found in map(APPROVAL.search, messages) if found for m in [found.group(1)]}
        for approver in ("alice", "bob"):
            done = await anyio.to_thread.run_sync(pipeline.cli, "approvals", "approve", approval_id, "--as", approver)
            assert done.returncode == 0, done.stderr

    async def body(client: Client) -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(approve)
            result = await client.call_tool(
                "payment_charge_card_v1", charge, progress_callback=on_progress, meta={OPERATION_ID: operation}
            )
        seen = observed(result)
        assert result.is_error is False and seen["status"]["taxonomy_class"] == "SUCCESS", text(result)
        assert seen["result_payload"]["data"]["status"] == "succeeded"

    run(door, transport, body)
    assert any("0 of 2 approvals" in m for m in messages) and any("finance-controllers" in m for m in messages)
    [ledgered] = _ledger_for(pipeline, idempotency_key_for("cli", operation))
    assert ledgered["kind"] == "charge"


def test_a_call_that_outwaits_its_request_is_awaiting_and_its_status_is_asked_later(
    pipeline: Pipeline, door: Door
) -> None:
    email = {"to": "ap@coyote.example", "subject": "Via MCP", "body": "Held, then sent."}
    operation = f"op-{uuid.uuid4().hex}"

    async def body(client: Client) -> None:
        held = await client.call_tool("notify_send_email_v1", email, meta={OPERATION_ID: operation, WAIT_S: 2})
        seen = observed(held)
        assert held.is_error is False and seen["status"]["code"] == 202, text(held)
        call_id = seen["tool_identity"]["call_id"]
        assert f"call {call_id} is awaiting approval" in text(held) and "toolgate_call_status" in text(held)
        approval_id = seen["result_payload"]["data"]["approval"]["approval_id"]
        still = await client.call_tool("toolgate_call_status", {"call_id": call_id})
        assert still.is_error is False and observed(still)["status"]["code"] == 202
        await approve_and_await(client, pipeline, approval_id, call_id)

    run(door, "http", body)
    assert len(_ledger_for(pipeline, idempotency_key_for("cli", operation))) == 1


def test_a_preview_runs_every_gate_and_no_effect(pipeline: Pipeline, door: Door) -> None:
    charge = {"invoice_id": pipeline.open_invoice(), "amount_cents": 125000, "currency": "USD"}

    async def body(client: Client) -> None:
        result = await client.call_tool("toolgate_preview", {"tool": "payment_charge_card_v1", "arguments": charge})
        shown = observed(result)["result_payload"]["data"]
        assert result.is_error is False and shown["dry_run"] is True
        assert shown["impact"]["approvals_required"] == 2

    run(door, "http", body)
    assert pipeline.sql("SELECT status FROM demo.invoices WHERE invoice_id = %s", (charge["invoice_id"],)) == [
        ("open",)
    ]


def test_http_without_a_valid_token_is_refused_and_publishes_nothing(pipeline: Pipeline, door: Door) -> None:
    [(before,)] = pipeline.sql("SELECT count(*) FROM toolgate.calls WHERE agent_id = 'cli'")
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "invoice_fetch_v1", "arguments": {"invoice_id": "inv_acme0001"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    revoked = json.loads(pipeline.cli("agents", "token", "cli").stdout)
    assert pipeline.cli("agents", "token", "cli", "--revoke", "--token-id", revoked["token_id"]).returncode == 0
    refused = [{}, {"Authorization": "Bearer tgmcp_not-a-token"}, {"Authorization": f"Basic {door.token}"}]
    for auth in [*refused, {"Authorization": f"Bearer {revoked['token']}"}]:
        answer = httpx2.post(door.url, json=call, headers={**headers, **auth}, timeout=10)
        assert answer.status_code == 401, answer.text

    async def body(client: Client) -> None:  # a call with the token after them: the only one published
        assert observed(await client.call_tool("invoice_fetch_v1", {"invoice_id": "inv_acme0001"}))

    run(door, "http", body)
    assert pipeline.sql("SELECT count(*) FROM toolgate.calls WHERE agent_id = 'cli'") == [(before + 1,)]


def test_a_cancelled_request_stops_only_the_waiting(pipeline: Pipeline, door: Door) -> None:
    email = {"to": "ap@coyote.example", "subject": "Cancelled wait", "body": "Sent once, all the same."}
    operation = f"op-{uuid.uuid4().hex}"
    messages: list[str] = []

    async def body(client: Client) -> None:
        announced = anyio.Event()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")
            announced.set()

        async def held_call() -> None:
            await client.call_tool(
                "notify_send_email_v1", email, progress_callback=on_progress, meta={OPERATION_ID: operation}
            )

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(held_call)
            await announced.wait()
            tasks.cancel_scope.cancel()  # the client gives up: notifications/cancelled
        found = APPROVAL.search(messages[0])
        assert found is not None, messages
        call_id = re.search(r"call (call_\w+)", messages[0]).group(1)  # type: ignore[union-attr]
        await approve_and_await(client, pipeline, found.group(1), call_id)

    run(door, "http", body)
    assert len(_ledger_for(pipeline, idempotency_key_for("cli", operation))) == 1
