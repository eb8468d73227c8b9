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


def test_forty_statuses_at_once_read_the_topic_once_for_their_agent_and_stall_no_other_call(
    pipeline: Pipeline, door: Door, traffic: None
) -> None:
    made = [pipeline.propose("invoice.fetch", {"invoice_id": "inv_acme0001"}) for _ in range(4)]
    finals = {sent.call_id: pipeline.wait(sent) for sent in made}

    async def body(client: Client) -> None:
        found: list[dict[str, object]] = []
        refused: list[str] = []

        async def status(call_id: str) -> None:
            answer = await client.call_tool("toolgate_call_status", {"call_id": call_id})
            if answer.is_error:
                refused.append(text(answer))
            else:
                found.append(observed(answer))

        with anyio.fail_after(ANSWERED_WITHIN_S):
            async with anyio.create_task_group() as tasks:
                for n in range(40):
                    tasks.start_soon(status, made[n % len(made)].call_id)
                read = await client.call_tool("invoice_fetch_v1", {"invoice_id": "inv_acme0001"})
        assert observed(read)["status"]["taxonomy_class"] == "SUCCESS"
        # One scan of the topic at a time for this agent: the others are told to ask again.
        assert refused and all("still reading" in message for message in refused)
        assert all(seen == finals[str(seen["tool_identity"]["call_id"])] for seen in found)  # type: ignore[index]

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
