"""`toolgate_call_status` answers while the tenant's topic is busy, and cannot stall the door
(review N4): through the real MCP door over Streamable HTTP, against the real `toolgate up`.

Traffic flows on acme's observation topic all along (ten calls a second; the review saw it with two),
which kept a status read of the topic going for as long as it lasted.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import anyio
import pytest
from mcp import Client

from ..conftest import Pipeline
from .test_mcp import Door, door, observed, run, text

__all__ = ["door"]  # the door fixture of test_mcp, one server for this module too
pytestmark = pytest.mark.timeout(240)
ANSWERED_WITHIN_S = 30  # a liveness bound (the review's calls never returned), not a speed target


@pytest.fixture
def traffic(pipeline: Pipeline) -> Iterator[None]:
    """Reads proposed on acme's behalf, ten a second, until the test ends."""
    stop = threading.Event()

    def propose() -> None:
        while not stop.wait(0.1):
            pipeline.client.propose("invoice.fetch", {"invoice_id": "inv_acme0001"}, agent_id="cli", user_id="load")

    thread = threading.Thread(target=propose, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


def test_the_status_of_an_unknown_call_answers_at_once_while_the_topic_is_busy(door: Door, traffic: None) -> None:
    async def body(client: Client) -> None:
        with anyio.fail_after(ANSWERED_WITHIN_S):
            unknown = await client.call_tool("toolgate_call_status", {"call_id": f"call_{uuid.uuid4().hex}"})
        assert unknown.is_error is True and "is known" in text(unknown)

    run(door, "http", body)


def test_forty_unknown_statuses_stall_no_other_call(door: Door, traffic: None) -> None:
    async def body(client: Client) -> None:
        answers: list[bool] = []

        async def status() -> None:
            answers.append((await client.call_tool("toolgate_call_status", {"call_id": uuid.uuid4().hex})).is_error)

        with anyio.fail_after(ANSWERED_WITHIN_S):
            async with anyio.create_task_group() as tasks:
                for _ in range(40):
                    tasks.start_soon(status)
                read = await client.call_tool("invoice_fetch_v1", {"invoice_id": "inv_acme0001"})
        assert observed(read)["status"]["taxonomy_class"] == "SUCCESS"
        assert answers == [True] * 40

    run(door, "http", body)


def test_the_status_of_a_call_made_elsewhere_is_read_from_the_topic_in_a_bounded_scan(
    pipeline: Pipeline, door: Door, traffic: None
) -> None:
    elsewhere = pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"})
    final = pipeline.wait(elsewhere)
    foreign = pipeline.propose("invoice.fetch", {"invoice_id": "inv_globex0001"}, tenant_id="globex")
    pipeline.wait(foreign)

    async def body(client: Client) -> None:
        with anyio.fail_after(ANSWERED_WITHIN_S):
            found = await client.call_tool("toolgate_call_status", {"call_id": elsewhere.call_id})
            other = await client.call_tool("toolgate_call_status", {"call_id": foreign.call_id})
        assert observed(found) == final
        assert other.is_error is True and "is known" in text(other)  # another tenant's call is no call of acme's

    run(door, "http", body)
