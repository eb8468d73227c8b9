"""A flush stores a round's observations while it produces them (workers/runtime/delivery.py):
the Postgres write and the broker's acknowledgement overlap, the flush returns only once both are
done (the round's input is acked after it), and a send that fails for good ends the write too.
Hand-written send and keep: no broker, no Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from toolgate.store.observations import Published
from toolgate.topics.catalog import Topics
from toolgate.topics.producers import Record
from toolgate.trust.integrity import DeploymentKeys, Sealer
from toolgate.workers.runtime.delivery import Delivery
from toolgate.workers.runtime.emit import Emit

TOPICS = Topics("t1.")
SEALER = Sealer(DeploymentKeys(b"a deployment secret of some length"), TOPICS)


def a_round() -> Emit:
    out = Emit("normalization")
    for n in range(3):
        out.records.append(
            Record(TOPICS.name("observations", "acme"), b"run_1", b"obs%d" % n, [("call_id", b"c%d" % n)])
        )
    return out


async def no_backoff(attempt: int, error: BaseException) -> None:
    raise AssertionError(f"no transient failure expected: {error!r}")


def test_the_write_and_the_produce_overlap_and_the_flush_waits_for_both() -> None:
    async def scenario() -> tuple[list[bytes], list[str], bool]:
        sent: list[bytes] = []
        kept: list[str] = []
        acknowledged = asyncio.Event()
        stored = False

        async def send(record: Record) -> Awaitable[Any]:
            sent.append(record.value)
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.01, lambda: (done.set_result(None), acknowledged.set()))
            return done

        async def keep(rows: list[Published]) -> None:
            nonlocal stored
            await asyncio.wait_for(acknowledged.wait(), 5.0)  # stored only after the broker acked: overlap
            await asyncio.sleep(0.01)
            kept.extend(row.call_id for row in rows)
            stored = True

        await Delivery("normalization", TOPICS, send, 1 << 20, SEALER, no_backoff, keep=keep).flush(a_round())
        return sent, kept, stored

    sent, kept, stored = asyncio.run(scenario())
    assert sent == [b"obs0", b"obs1", b"obs2"] and kept == ["c0", "c1", "c2"] and stored


def test_a_send_that_fails_for_good_ends_the_write_and_the_flush_fails() -> None:
    async def scenario() -> bool:
        cancelled = False

        async def send(record: Record) -> Awaitable[Any]:
            await asyncio.sleep(0.01)  # the write has begun
            raise RuntimeError("the producer is closed")

        async def keep(rows: list[Published]) -> None:
            nonlocal cancelled
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled = True
                raise

        with pytest.raises(RuntimeError, match="closed"):
            await Delivery("normalization", TOPICS, send, 1 << 20, SEALER, no_backoff, keep=keep).flush(a_round())
        return cancelled

    assert asyncio.run(scenario())
