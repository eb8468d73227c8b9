"""Execution as an explicit state machine: Prepared -> Reserved -> Ran -> Recorded.

Pure: a round's calls go through four states, each step a function of the state before it
that yields the I/O it needs (asks.py) and is sent the answers, like psycopg's generators; it
never waits itself. The driver (handler.py) performs each ask in the transaction it owns, and
nothing else. Each step takes only the state it follows, so the order cannot be skipped: a
round is recorded only once it ran, and runs only once it was reserved (`OutOfOrder`).

    step       from      to        what it decides (the I/O it asks for)
    prepare    calls     Prepared  hash intact, deadline, dry run (none)
    reserve    Prepared  Reserved  late replays, read copies, tickets, compensations, each
                                   key's plan, answers without an effect (reservation.py:
                                   ReadOutcomes, ReadFirstOutcomes, LoadTickets,
                                   LoadOriginals, ReserveKeys / LockKeys, RedriveKeys, and for
                                   an approved effect outside Postgres TargetState,
                                   ConsumeTickets)
    run        Reserved  Ran       the effects outside Postgres (RunExternal)
    record     Ran       Recorded  the Postgres effects, every call's end, its key, its outbox
                                   row and audit entry (recording.py: TargetState,
                                   ConsumeTickets, RunPostgres, RunAfterEffects, Write)

A call leaves the order early only by an answer (`CallState.result`): refused, replayed, late,
dry-run, or held while its key is in flight elsewhere (no answer: its owner or reconciliation
answers). The driver has two shapes of one protocol: a round whose effects all run in Postgres
(`Prepared.co_located`) takes all steps in one transaction (`deferred`: new keys are inserted
once, with their end); any other reserves in one, runs outside any, and records in a second,
retried without running again. A key left PENDING is settled by reconciliation through
`pending.py`, with the same results and asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from toolgate.contracts.registry import Registry
from toolgate.schemas.models import ExecutionResult, StageRecord
from toolgate.states import KeyStatus
from toolgate.store.rows import Ticket
from toolgate.workers.execution import decision, recording, reservation
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.asks import RunExternal, Step, Written, ask
from toolgate.workers.execution.compensation import Original
from toolgate.workers.execution.effects import Effect, Job


@dataclass(frozen=True)
class Lease:
    """Who reserves keys, and for how long before another worker may take one over."""

    owner: str
    seconds: float


@dataclass(frozen=True)
class Arrived:
    """One call as it came in: its record, bytes and trace, and what it runs (`key` None: a read)."""

    record: StageRecord
    traceparent: str
    raw: bytes
    job: Job
    key: str | None

    @property
    def operation(self) -> str:
        """What an approval ticket is consumed by: the idempotency key (a read: the call)."""
        return self.key or f"call:{self.record.call.call_id}"

    @property
    def in_postgres(self) -> bool:
        return bool(self.job.contract.executor["kind"] == "postgres")


@dataclass(frozen=True)
class CallState:
    """What the round knows of one call so far; each step returns new ones."""

    call: Arrived
    plan: idem.Plan | None = None
    late: bool = False  # a mutation past its deadline: it runs nothing, but may replay
    leader: int | None = None  # the index of an earlier call of this round with the same key
    result: ExecutionResult | None = None  # answered without (or before) an effect
    original: Original | None = None  # the call this one compensates
    ticket: Ticket | None = None  # the approval it runs under
    unwritten: bool = False  # its key is new and is inserted with its end (deferred)
    effect: Effect | None = None  # its effect outside Postgres, or why it may not run

    @property
    def record(self) -> StageRecord:
        return self.call.record

    @property
    def traceparent(self) -> str:
        return self.call.traceparent

    @property
    def runs(self) -> bool:
        """Whether this call's own effect runs this round (a follower replays its leader's)."""
        return self.result is None and isinstance(self.plan, idem.Execute) and self.leader is None


Calls = tuple[CallState, ...]
Ended = tuple[ExecutionResult | None, KeyStatus | None]  # a call's result and its key's status


@dataclass(frozen=True)
class Prepared:
    """Each call checked on its own (payload hash, deadline, dry run): answered now, or to reserve or run."""

    calls: Calls
    now: int

    @property
    def co_located(self) -> bool:
        """Every call still to run runs in Postgres: the round may take one transaction."""
        return all(c.call.in_postgres for c in self.calls if c.result is None)

    @property
    def reserves_nothing(self) -> bool:
        """No ticket to check, key to reserve or read to look up: no transaction is needed."""
        return all(c.result is not None for c in self.calls)


@dataclass(frozen=True)
class Reserved:
    """Tickets checked and each key reserved or locked and planned; `deferred`: new keys are
    inserted with their ends, when the round is recorded."""

    calls: Calls
    now: int
    deferred: bool


@dataclass(frozen=True)
class Ran:
    """The effects outside Postgres have run, outside any transaction; those in Postgres run as
    the round is recorded."""

    calls: Calls
    deferred: bool


@dataclass(frozen=True)
class Recorded:
    """How each call ended, once committed; `written`: the driver's answer to the Write ask."""

    calls: Calls
    ended: tuple[Ended, ...]
    written: Written


class OutOfOrder(Exception):
    """A step was given a state it does not follow."""


def _expect(state: object, kind: type) -> None:
    if not isinstance(state, kind):
        raise OutOfOrder(f"this step follows {kind.__name__}, not {type(state).__name__}")


def prepare(calls: Sequence[Arrived], now: int) -> Prepared:
    """Before anything is read: each call's answer, lateness, or plan (decision.prepare)."""
    return Prepared(tuple(_prepared(call, now) for call in calls), now)


def _prepared(call: Arrived, now: int) -> CallState:
    state = CallState(call)
    found = decision.prepare(call.record, call.job.contract, call.key, call.traceparent, now)
    if isinstance(found, decision.Answer):
        return replace(state, result=found.result)
    if isinstance(found, decision.Late):
        return replace(state, late=True)
    if isinstance(found, idem.Execute):
        return replace(state, plan=found)
    return state


def reserve(state: Prepared, lease: Lease, registry: Registry, *, deferred: bool) -> Step[Reserved]:
    """Prepared -> Reserved (reservation.py)."""
    _expect(state, Prepared)
    return _reserve(state, lease, registry, deferred)


def _reserve(state: Prepared, lease: Lease, registry: Registry, deferred: bool) -> Step[Reserved]:
    calls = yield from reservation.reserve(list(state.calls), state.now, lease, registry, deferred=deferred)
    return Reserved(calls, state.now, deferred)


def run(state: Reserved) -> Step[Ran]:
    """Reserved -> Ran: the effects outside Postgres run, outside any transaction."""
    _expect(state, Reserved)
    return _run(state)


def _run(state: Reserved) -> Step[Ran]:
    calls = list(state.calls)
    external = [i for i, c in enumerate(calls) if c.runs and not c.call.in_postgres and c.effect is None]
    if external:
        effects = yield from ask(RunExternal(tuple(calls[i].call.job for i in external)))
        for i, effect in zip(external, effects, strict=True):
            calls[i] = replace(calls[i], effect=effect)
    return Ran(tuple(calls), state.deferred)


def record(state: Ran, now: int, *, careful: bool) -> Step[Recorded]:
    """Ran -> Recorded (recording.py); run again from the same state if its transaction failed."""
    _expect(state, Ran)
    return _record(state, now, careful)


def _record(state: Ran, now: int, careful: bool) -> Step[Recorded]:
    ended, written = yield from recording.record(state.calls, now, careful=careful)
    return Recorded(state.calls, ended, written)


def held(state: Reserved) -> list[StageRecord]:
    """The calls held while their key is in flight elsewhere: no answer now."""
    return [c.record for c in state.calls if c.result is None and isinstance(c.plan, idem.Hold)]
