"""One call's way through an execution round: what was read for it, what it ran, how it ended.

The round's mutable state, filled in phase by phase (handler.py): the decisions
(decision.py) read it and return outcomes; the handler writes those back here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.states import KeyStatus
from toolgate.workers.execution import clearance, compensation
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.effects import Effect, Job

if TYPE_CHECKING:
    from toolgate.workers.runtime.handler import Inbound


@dataclass
class Attempt:
    call: Inbound[StageRecord]
    job: Job
    key: str | None = None  # None: read-only, no reservation
    plan: idem.Plan | None = None
    leader: Attempt | None = None  # an earlier call of this round with the same key
    effect: Effect | None = None
    result: ExecutionResult | None = None
    status: KeyStatus | None = None  # the key's status after this round
    original: compensation.Original | None = None  # the call this one compensates
    ticket: clearance.Ticket | None = None  # the approval it runs under
    late: bool = False  # a mutation past its deadline: it runs nothing, but may replay
    unwritten: bool = False  # its key is new and is inserted with its end (keys.insert_settled)

    @property
    def record(self) -> StageRecord:
        return self.call.model

    @property
    def traceparent(self) -> str:
        return self.call.traceparent

    @property
    def operation(self) -> str:
        """What an approval ticket is consumed by: the idempotency key (a read: the call)."""
        return self.key or f"call:{self.record.call_id}"

    @property
    def in_postgres(self) -> bool:
        return bool(self.job.contract.executor["kind"] == "postgres")

    @property
    def runs(self) -> bool:
        """Whether this call's own effect runs this round (a follower replays its leader's)."""
        return self.result is None and isinstance(self.plan, idem.Execute) and self.leader is None
