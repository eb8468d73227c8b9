"""Delivering what a round produced: every record acknowledged by the broker, or replaced.

A transient failure (the broker unreachable, a leader moving) is retried until it goes
through, since the round's input is acked only after its outputs are. A record the broker can
never take (too large for it, malformed) is not retried forever, blocking the partition: it is
replaced by a dead letter holding its beginning and digest, and the round goes on.

**Observations kept.** The observations among the records (published.py) are stored as they were
sealed (toolgate.observations, `keep`) while they are produced: what is stored is what is sent, byte
for byte, signature and proof included, and the round's input is acked only once both are done, so
neither waits for the other (a Postgres commit and the broker's acknowledgement overlap). A crash
or a failure of either leaves the round unacked: it is decided, sealed, stored and sent again, so
every observation of a round that completed is stored, and a call can have two rows (each a
genuine signature over what was sealed; the bundle shows every one; an agent that read the first
copy of a round cut short holds a record the deployment signed for the same call and digest).
Only normalization publishes observations (the outbox relay and `dlq replay` send none: their
records go to internal topics, proposals and dead letters).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from toolgate.schemas.models import PayloadKind, TaxonomyClass
from toolgate.store.observations import Published
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, header
from toolgate.topics.producers import Record
from toolgate.trust.integrity import Sealer
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.producer import ProduceError
from toolgate.workers.runtime.published import published

log = logging.getLogger("toolgate.delivery")

Send = Callable[[Record], Awaitable[Awaitable[Any]]]
Backoff = Callable[[int, BaseException], Awaitable[None]]
Keep = Callable[[list[Published]], Awaitable[None]]


def is_undeliverable(exc: BaseException | None) -> bool:
    """A produce error no retry can cure (workers/runtime/producer.py)."""
    return isinstance(exc, ProduceError) and exc.undeliverable


@dataclass(frozen=True, slots=True)
class Delivery:
    stage: str
    topics: Topics
    send: Send
    batch_bytes: int
    sealer: Sealer
    backoff: Backoff
    keep: Keep | None = None

    async def flush(self, out: Emit) -> None:
        """Produce everything `out` holds and wait until the broker acknowledged all of it."""
        pending = out.messages(self.topics, self.batch_bytes, self.sealer)
        kept = published(pending, self.topics) if self.keep is not None else []
        keeping = asyncio.ensure_future(self.keep(kept)) if kept and self.keep is not None else None
        try:
            await self._produce(pending)
        except BaseException:
            if keeping is not None:
                keeping.cancel()
                with contextlib.suppress(BaseException):
                    await keeping
            raise
        if keeping is not None:
            await keeping  # stored as well as sent before the round's input is acked

    async def _produce(self, pending: list[Record]) -> None:
        attempt = 0
        while pending:
            # The records' own futures, gathered: a coroutine per record would make gather wrap
            # each in a Task, a cost on every record (normalization sends a record per call;
            # docs/performance.md, "Figures behind the code").
            futures = [await self.send(record) for record in pending]
            results = await asyncio.gather(*futures, return_exceptions=True)
            retry: list[Record] = []
            transient: BaseException | None = None
            for msg, res in zip(pending, results, strict=True):
                if not isinstance(res, BaseException):
                    continue
                if is_undeliverable(res):
                    retry += self._replacement(msg, res)
                else:
                    retry.append(msg)
                    transient = res
            if transient is not None:
                attempt += 1
                await self.backoff(attempt, transient)
            pending = retry

    def _replacement(self, msg: Record, error: BaseException) -> list[Record]:
        """A dead letter in place of a record the broker will never take (nothing in place of a
        dead letter itself: that is logged, the only place left)."""
        logical = self.topics.parse(msg.topic)[0]
        log.critical(
            "undeliverable record",
            extra={"stage": self.stage, "action": "dead_letter", "error": repr(error), "count": len(msg.value)},
        )
        if logical == "deadletter":
            return []
        letter = Emit(self.stage)
        partition = msg.partition if msg.partition is not None else -1
        origin = Origin(logical, partition, -1, msg.key, [], PayloadKind.RECORD)
        reason = f"an output of {len(msg.value)} bytes the broker refused for good ({type(error).__name__})"
        letter.dead_letter(origin, msg.value, TaxonomyClass.UNKNOWN_ERROR, reason, header(msg.headers, CALL_ID))
        return letter.messages(self.topics, self.batch_bytes, self.sealer)
