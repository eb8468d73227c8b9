"""What execution's machine (machine.py) asks its driver for: the I/O of one step, as data.

Pure: each ask is a frozen record of what to read, lock, run or write, typed by the answer it
expects (`Ask[T]`). A step is a generator that yields asks and is sent their answers (`ask`);
the driver (handler.py, performer.py) performs each one in the transaction the step runs in, and
nothing else. Like psycopg's generators, the protocol never waits itself.

    ask                 what the driver does                                  answer
    ReadOutcomes        read keys' stored outcomes (no lock)                  {ident: StoredOutcome}
    ReadFirstOutcomes   read reads' first outcomes                            {ident: FirstOutcome}
    LoadTickets         lock and read approval tickets                        {approval_id: Ticket}
    LoadOriginals       lock and read the keys compensations undo             {(tenant, call_id): Original}
    LockKeys            SELECT ... FOR UPDATE the keys' rows                  {ident: KeyRow}
    ReserveKeys         insert PENDING keys, leased to this process           {ident inserted}
    RedriveKeys         lease existing keys again, as a new attempt           None
    TargetState         read targets' state versions (FOR UPDATE or not),     [version | None | Cut]
                        bounded by the calls' time left (bounds.py)
    ConsumeTickets      mark tickets as releasing their operation             {approval_id consumed}
    RunExternal         run effects outside Postgres, outside a transaction   [Effect]
    RunPostgres         run Postgres effects in the transaction               [Effect]
    RunAfterEffects     run bindings' after_effect statements                 [error | None]
    CheckStatus         ask the provider's status query                       Effect
    Write               write the round's rows (writes.py), one round trip    Written
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, cast

from toolgate.schemas.models import StageRecord
from toolgate.store.rows import KeyRow, Ticket
from toolgate.workers.execution.bounds import Cut
from toolgate.workers.execution.compensation import Original
from toolgate.workers.execution.decision import StoredOutcome
from toolgate.workers.execution.effects import Effect, Job
from toolgate.workers.execution.reads import FirstOutcome
from toolgate.workers.execution.writes import Writes

if TYPE_CHECKING:  # the driver's types: psycopg's statements and the outbox, none of it imported here
    from toolgate.store.batch import Statement
    from toolgate.workers.runtime.outbox import Held

T = TypeVar("T")
Ident = tuple[str, str]  # (tenant_id, idempotency key), or (tenant_id, call_id) for a read
# What the driver answers a Write with: the outbox rows to publish once committed, and the
# audit chain's append, to run with the COMMIT (None: no entries). The machine only hands it on.
Written: TypeAlias = "tuple[Held, Statement | None]"


@dataclass(frozen=True)
class Ask(Generic[T]):
    """One piece of I/O a step needs; T is what the driver answers."""


@dataclass(frozen=True)
class ReadOutcomes(Ask[dict[Ident, StoredOutcome]]):
    idents: tuple[Ident, ...]


@dataclass(frozen=True)
class ReadFirstOutcomes(Ask[dict[Ident, FirstOutcome]]):
    idents: tuple[Ident, ...]


@dataclass(frozen=True)
class LoadTickets(Ask[dict[str, Ticket]]):
    approval_ids: tuple[str, ...]


@dataclass(frozen=True)
class LoadOriginals(Ask[dict[tuple[str, str], Original]]):
    records: tuple[StageRecord, ...]


@dataclass(frozen=True)
class LockKeys(Ask[dict[Ident, KeyRow]]):
    idents: tuple[Ident, ...]


@dataclass(frozen=True)
class ReserveKeys(Ask[set[Ident]]):
    rows: tuple[dict[str, Any], ...]  # keys.reservation's
    lease_s: float  # how long the keys are this process's: past the latest deadline of their effects


@dataclass(frozen=True)
class RedriveKeys(Ask[None]):
    rows: tuple[dict[str, Any], ...]  # keys.redrive_row's
    lease_s: float  # as ReserveKeys'


@dataclass(frozen=True)
class TargetState(Ask[list[str | Cut | None]]):
    jobs: tuple[Job, ...]
    for_update: bool


@dataclass(frozen=True)
class ConsumeTickets(Ask[set[str]]):
    released: dict[str, str]  # approval_id -> the operation it releases


@dataclass(frozen=True)
class RunExternal(Ask[list[Effect]]):
    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class RunPostgres(Ask[list[Effect]]):
    jobs: tuple[Job, ...]
    careful: bool


@dataclass(frozen=True)
class RunAfterEffects(Ask[list[str | None]]):
    done: tuple[tuple[Job, dict[str, Any]], ...]


@dataclass(frozen=True)
class CheckStatus(Ask[Effect]):
    job: Job
    now: int


@dataclass(frozen=True)
class Write(Ask[Written]):
    writes: Writes


Step = Generator[Ask[Any], Any, T]  # a step: yields asks, is sent their answers, returns T


def ask(request: Ask[T]) -> Step[T]:
    """Yield one ask and return its answer, typed: `found = yield from ask(LockKeys(...))`."""
    answer = yield request
    return cast(T, answer)
