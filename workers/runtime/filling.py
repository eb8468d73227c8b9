"""How much a stage takes in: per poll, per buffer, and per round.

A record of tool.proposals is one call, but a record of an internal topic is a StageBatch of
every call one upstream round sent to that partition, a hundred or more. Counted in records
alone, one execution round of a 100,000-call backlog took 500 such records, thousands of calls,
and ran past its keys' lease and past the consumer's max_poll_interval, and the stage stalled
with its keys PENDING (docs/performance.md, "Figures behind the code"). Counted in bytes too, a
round holds about as many calls whatever the topic; the first record is always taken, however
large.

What a stage takes from its consumer at once, and holds pending, is bounded the same way, in
records sized to the topic, since the embedded broker (Tansu) ignores a fetch's byte limits.

And how long a round waits to fill: not at all when nothing is queued behind its first record,
and under load only while records keep arriving (`Filling.linger`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class _Record(Protocol):
    @property
    def value(self) -> bytes | None: ...


R = TypeVar("R", bound=_Record)

# A round that lingers looks for more records this often, and stops at the first look that finds none.
LINGER_STEP_S = 0.002

# A StageBatch holds up to a whole upstream round, so a round may be one such record.
INTERNAL_POLL_RECORDS = 4
INTERNAL_BUFFER_RECORDS = 16


@dataclass(frozen=True)
class Bounds:
    poll_records: int
    buffer_records: int


def bounds_for(internal: bool, batch_max: int, stream_buffer: int) -> Bounds:
    """Records per poll and records held fetched, for a topic of StageBatches (internal) or of
    one call per record."""
    if internal:
        return Bounds(INTERNAL_POLL_RECORDS, INTERNAL_BUFFER_RECORDS)
    return Bounds(batch_max, max(stream_buffer, batch_max))


class Filling(Generic[R]):
    """The records of the round being filled, and whether it can take more."""

    def __init__(self, first: R, batch_max: int, batch_bytes: int) -> None:
        self.records = [first]
        self.batch_max = batch_max
        self.batch_bytes = batch_bytes
        self.size = len(first.value or b"")

    @property
    def full(self) -> bool:
        return len(self.records) >= self.batch_max or self.size >= self.batch_bytes

    def take(self, pending: deque[R]) -> None:
        """Move what is pending now onto the round until it is full, without waiting."""
        while pending and not self.full:
            record = pending.popleft()
            self.records.append(record)
            self.size += len(record.value or b"")

    async def linger(
        self,
        refill: Callable[[], None],
        within_s: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        """Fill the round while records are arriving, up to `within_s`; `refill` moves what has
        arrived onto it. A round of one record, with nothing pending behind it, starts at once.
        With more (load), the round looks again every LINGER_STEP_S while it is not full, and
        stops at the first look that brings nothing: the burst has passed. (Before, a round with
        two records pending lingered out the whole window whatever its looks found: traced at
        100 calls/s, nearly every validation round spent most of the window in it before its
        BEGIN; docs/performance.md, "Figures behind the code".)"""
        deadline = clock() + within_s
        while len(self.records) > 1 and not self.full:
            left = deadline - clock()
            if left <= 0:
                return
            before = len(self.records)
            await sleep(min(left, LINGER_STEP_S))
            refill()
            if len(self.records) == before:
                return
