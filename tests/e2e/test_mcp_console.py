"""A held call over MCP, approved in the console (issue 52's acceptance: parts 1 and 5 together):
a 2026-07-28 client with the Tasks extension gets a task for a held charge; two approvers
enrolled in the console approve it in their own browsers (real Chromium, keys made there); the
task completes with SUCCESS in `tasks/get`, a 2025-11-25 client's `tasks/result` gives the same
final observation, and the charge ran once."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio
import pytest
from mcp_types import CallToolResult, GetTaskPayloadRequestParams

from toolgate.door.calls import idempotency_key_for

from ..conftest import Pipeline
from .console_browser import Approver, approve, browser, console_base, open_card, pair
from .test_mcp import Door, connect, door, observed
from .test_mcp_tasks import TaskResult, get_task, held_task, modern, until_ended
from .test_pipeline import _ledger_for

__all__ = ["browser", "door", "pair"]
pytestmark = pytest.mark.timeout(300)
T = TypeVar("T")


def run_async(body: Callable[[], Awaitable[T]]) -> T:
    """`body` run to its end on an event loop of its own thread: Playwright's sync API holds this one's."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, body).result()


def test_a_task_approved_in_the_console_completes_with_the_final_observation(
    pipeline: Pipeline, door: Door, pair: tuple[Approver, Approver]
) -> None:
    operation = f"op-{uuid.uuid4().hex}"

    async def held() -> str:
        async with modern(door) as client:
            handle = await held_task(client, pipeline, operation)
            waiting = await get_task(client.session, handle.task_id)
            assert waiting.status == "working" and "0 of 2 approvals" in (waiting.status_message or "")
            return handle.task_id

    task_id = run_async(held)
    [(approval_id,)] = pipeline.sql("SELECT approval_id FROM toolgate.approvals WHERE call_id = %s", (task_id,))
    for who in pair:  # each in a browser of its own, signing with the key it made
        open_card(who.page, console_base(pipeline), approval_id)
        approve(who.page, who.name)

    async def ended() -> None:
        async with modern(door) as client:
            done = await until_ended(client.session, task_id)
            assert done.status == "completed" and done.result is not None
            assert done.result["structuredContent"]["status"]["taxonomy_class"] == "SUCCESS"
        async with connect(door, "http") as legacy:
            final = await legacy.session.send_request(
                TaskResult(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult
            )
            assert observed(final)["status"]["taxonomy_class"] == "SUCCESS"

    run_async(ended)
    decided = "SELECT approver_id FROM toolgate.approval_decisions WHERE approval_id = %s ORDER BY approver_id"
    assert pipeline.sql(decided, (approval_id,)) == sorted((who.name,) for who in pair)
    [charge] = _ledger_for(pipeline, idempotency_key_for("cli", operation))
    assert charge["kind"] == "charge"
