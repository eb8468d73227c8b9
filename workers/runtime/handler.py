"""What a stage plugs into the runtime: a `Handler` deciding over a batch of `Inbound` calls.

The runtime (`rounds.Rounds`) reads the records, hands the handler every call it could read,
and produces whatever the handler put into the round's `Emit`. A handler overrides `handle`,
and may override `start` (open what it needs beyond its pool), `decode` (read a record of its source topic),
`delivered` (after the round's output is acknowledged), `stop` (as the worker stops),
`on_failure` (answer one call that failed on its own) and `on_undecodable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from toolgate.contracts.registry import Registry
from toolgate.schemas.codec import codec
from toolgate.schemas.models import FieldError, StageRecord, TaxonomyClass
from toolgate.schemas.wire import WireModel, field_of
from toolgate.settings import Settings
from toolgate.store.db import make_pool
from toolgate.topics.catalog import Topics
from toolgate.workers.runtime.clock import now_ms
from toolgate.workers.runtime.emit import Emit, Origin
from toolgate.workers.runtime.results import reject

if TYPE_CHECKING:
    from toolgate.telemetry.call_spans import CallSpan

M = TypeVar("M", bound=WireModel)


@dataclass
class Inbound(Generic[M]):
    """One call (or decision) as a stage sees it."""

    model: M
    raw: bytes
    origin: Origin
    span: CallSpan | None = None
    traceparent: str = ""  # this stage's span: what outputs carry onward

    @property
    def call_id(self) -> str:
        return str(field_of(self.model, "call_id") or field_of(self.model, "approval_id") or "")


class Handler(Generic[M]):
    """A stage's decision over a batch of calls from its source topic, with the registry of
    contracts, the topic catalog and a Postgres pool of its own (named `pool_name`, the stage's
    by default; `pool_options` for `make_pool`), opened before the first round."""

    stage: str
    source: str  # logical topic
    model: type[M]

    def __init__(self, registry: Registry, settings: Settings, pool_name: str = "", **pool_options: Any) -> None:
        self.registry = registry
        self.topics = Topics(settings.topic_prefix)
        self.pool = make_pool(settings.database_url, pool_name or self.stage, **pool_options)

    async def start(self) -> None:
        """Open what the handler needs (its pool; a handler may open more) before the first round."""
        await self.pool.open()

    async def handle(self, calls: list[Inbound[M]], out: Emit) -> None:
        raise NotImplementedError

    async def delivered(self, out: Emit) -> None:
        """After the broker acknowledged everything the round produced, before its offsets go."""

    async def stop(self) -> None:
        """Finish what the handler keeps beyond a round, as the worker stops."""

    def on_failure(self, call: Inbound[M], error: str, out: Emit) -> None:
        """Answer one call that failed on its own: UNKNOWN_ERROR, fail closed."""
        if isinstance(call.model, StageRecord):
            fail_closed(call.model, self.stage, call.traceparent, out)

    def decode(self, value: bytes) -> M:
        """One record (or batch item) of the source topic; DecodeError if it is none."""
        return codec().decode(value, self.model)

    def on_undecodable(self, origin: Origin, value: bytes, out: Emit) -> None:
        """A record that does not decode: dead-letter it with its original bytes."""
        out.dead_letter(origin, value, TaxonomyClass.SYNTACTIC_PARSE_FAIL, "undecodable record")


FAILED_INSIDE = "the call failed inside toolgate; an operator has it"


def fail_closed(record: StageRecord, stage: str, traceparent: str, out: Emit) -> None:
    """The answer to a call that failed inside `stage`: UNKNOWN_ERROR, to its agent."""
    out.item(
        "results",
        record.call.home_partition,
        reject(
            record.call,
            TaxonomyClass.UNKNOWN_ERROR,
            [FieldError(field=None, code="internal_error", message=FAILED_INSIDE)],
            stage=stage,
            traceparent=traceparent,
            home_partition=record.call.home_partition,
            now_ms=now_ms(),
        ),
    )
