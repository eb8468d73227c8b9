"""Execution's machine (workers/execution/machine.py): each step's asks and the state it reaches,
driven here by answering its asks by hand, with no Postgres; and that the order cannot be skipped."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.unit.factories import registry
from tests.unit.test_execution_decision import CHARGE, DRAFT, ESTIMATE, FETCH, NOW, key_of, record
from toolgate.schemas.models import StageRecord, TaxonomyClass
from toolgate.states import KeyStatus
from toolgate.store.rows import KeyRow
from toolgate.workers.execution import asks, machine, pending, reservation
from toolgate.workers.execution import idempotency as idem
from toolgate.workers.execution.answers import deadline_passed, stored_response
from toolgate.workers.execution.effects import Done, Job, Unknown
from toolgate.workers.execution.writes import Writes

LEASE = machine.Lease("worker-1", 30.0)
STORED = stored_response(deadline_passed(record(DRAFT), "00-trace", NOW))  # any stored response
WRITTEN = object()  # what a driver answers a Write with: the machine only hands it on


def call(contract: Any, **overrides: Any) -> machine.Arrived:
    r = record(contract, **overrides)
    key = key_of(contract, r)
    return machine.Arrived(r, "00-trace", b"raw", Job(r, contract, key or "", NOW + 30_000), key)


def drive(step: asks.Step[Any], answer: dict[type, Any]) -> tuple[Any, list[asks.Ask[Any]]]:
    """Run a step to its end, answering each ask by its type; the state reached and the asks."""
    asked: list[asks.Ask[Any]] = []
    sent: Any = None
    while True:
        try:
            request = step.send(sent)
        except StopIteration as stop:
            return stop.value, asked
        asked.append(request)
        reply = answer[type(request)]
        sent = reply(request) if callable(reply) else reply


def kinds(asked: list[asks.Ask[Any]]) -> list[type]:
    return [type(a) for a in asked]


def reserved(
    c: machine.Arrived, deferred: bool = False, answer: dict[type, Any] | None = None
) -> tuple[machine.Reserved, list[asks.Ask[Any]]]:
    """Reserve one call; a key is new unless `answer` says otherwise."""
    answers = {asks.ReserveKeys: lambda a: {(r["tenant_id"], r["idempotency_key"]) for r in a.rows}, **(answer or {})}
    answers.setdefault(asks.LockKeys, {})
    answers.setdefault(asks.ReadFirstOutcomes, {})
    step = machine.reserve(machine.prepare([c], NOW), LEASE, registry(), deferred=deferred)
    state, asked = drive(step, answers)
    assert isinstance(state, machine.Reserved)
    return state, asked


# --- prepare --------------------------------------------------------------------------------


def test_prepare_decides_before_anything_is_read() -> None:
    tampered = call(DRAFT, payload_hash="sha256:" + "9" * 64)
    late = call(DRAFT, deadline_ms=NOW - 1)
    read, mutation = call(FETCH), call(DRAFT)
    state = machine.prepare([tampered, late, read, mutation], NOW)
    assert state.calls[0].result is not None
    assert state.calls[0].result.outcome.taxonomy_class == TaxonomyClass.SIGNATURE_MISMATCH
    assert state.calls[1].late and state.calls[1].result is None
    assert state.calls[2].plan == idem.Execute(1)
    assert state.calls[3].plan is None and state.calls[3].result is None
    assert state.co_located and not state.reserves_nothing


def test_a_round_of_answers_reserves_nothing_and_one_outside_postgres_is_not_co_located() -> None:
    assert machine.prepare([call(DRAFT, dry_run=True)], NOW).reserves_nothing
    assert not machine.prepare([call(CHARGE), call(DRAFT)], NOW).co_located


# --- reserve --------------------------------------------------------------------------------


def test_a_new_key_is_reserved_and_planned_to_execute() -> None:
    state, asked = reserved(call(DRAFT))
    assert kinds(asked) == [asks.ReserveKeys]  # a fresh key is not read again under lock
    [c] = state.calls
    assert c.plan == idem.Execute(1) and c.runs and not c.unwritten


def test_a_key_is_leased_until_its_effect_can_no_longer_run() -> None:
    """A key leased for less than its effect may run would be taken over by reconciliation while
    the effect still ran (seen: a 503-retrying email, re-driven and sent, after its caller was told
    DEPENDENCY_UNAVAILABLE). The lease runs past the call's deadline; never shorter than the worker's."""
    c = call(DRAFT)
    long_running = machine.Arrived(c.record, c.traceparent, c.raw, replace(c.job, deadline_ms=NOW + 300_000), c.key)
    _, asked = reserved(long_running)
    [reserve] = [a for a in asked if isinstance(a, asks.ReserveKeys)]
    assert reserve.lease_s == 300 + reservation.LEASE_MARGIN_S
    short = machine.Arrived(c.record, c.traceparent, c.raw, replace(c.job, deadline_ms=NOW + 500), c.key)
    _, asked = reserved(short)
    assert [a.lease_s for a in asked if isinstance(a, asks.ReserveKeys)] == [LEASE.seconds]


def test_deferred_a_new_key_is_only_locked_and_written_with_its_end() -> None:
    state, asked = reserved(call(DRAFT), deferred=True)
    assert kinds(asked) == [asks.LockKeys]
    assert state.calls[0].unwritten and state.calls[0].runs


def key_row(c: machine.Arrived, status: KeyStatus, **fields: Any) -> KeyRow:
    base: dict[str, Any] = dict(
        status=status,
        request_hash=c.record.call.request_hash,
        response=STORED,
        attempt=1,
        lease_owner=None,
        lease_until_ms=None,
        call_id=c.record.call.call_id,
        error_code=None,
        expires_at_ms=NOW + 10**9,
    )
    return KeyRow(**{**base, **fields})


def test_a_completed_key_is_replayed_without_running() -> None:
    c = call(DRAFT)
    row = key_row(c, KeyStatus.COMPLETED, response=STORED)
    state, asked = reserved(c, answer={asks.ReserveKeys: set(), asks.LockKeys: {(c.record.call.tenant_id, c.key): row}})
    assert kinds(asked) == [asks.ReserveKeys, asks.LockKeys]
    [after] = state.calls
    assert after.result is not None and after.result.idempotency_hit and not after.runs


def test_a_key_in_flight_elsewhere_is_held_with_no_answer() -> None:
    c = call(DRAFT)
    row = key_row(c, KeyStatus.PENDING, lease_owner="worker-2", lease_until_ms=NOW + 5_000)
    state, _ = reserved(c, answer={asks.ReserveKeys: set(), asks.LockKeys: {(c.record.call.tenant_id, c.key): row}})
    assert state.calls[0].result is None and not state.calls[0].runs
    assert machine.held(state) == [c.record]


def test_a_late_mutation_replays_its_stored_outcome() -> None:
    from toolgate.workers.execution.decision import StoredOutcome

    c = call(DRAFT, deadline_ms=NOW - 1)
    stored = StoredOutcome(KeyStatus.COMPLETED, c.record.call.request_hash, STORED)
    state, asked = reserved(c, answer={asks.ReadOutcomes: {(c.record.call.tenant_id, c.key): stored}})
    assert kinds(asked) == [asks.ReadOutcomes]
    assert state.calls[0].result is not None and state.calls[0].result.idempotency_hit


def test_a_read_with_a_first_outcome_is_answered_from_it() -> None:
    c = call(FETCH)
    first = (c.record.call.request_hash, STORED)
    state, asked = reserved(
        c, answer={asks.ReadFirstOutcomes: {(c.record.call.tenant_id, c.record.call.call_id): first}}
    )
    assert kinds(asked) == [asks.ReadFirstOutcomes]
    assert state.calls[0].result is not None and state.calls[0].result.idempotency_hit


# --- run and record -------------------------------------------------------------------------


def recorded(state: machine.Reserved, effects: list[Any]) -> tuple[machine.Recorded, list[asks.Ask[Any]]]:
    ran, ran_asks = drive(machine.run(state), {asks.RunExternal: effects})
    answer = {asks.RunPostgres: effects, asks.Write: WRITTEN, asks.RunAfterEffects: [None] * len(effects)}
    done, record_asks = drive(machine.record(ran, NOW, careful=False), answer)
    return done, ran_asks + record_asks


def test_a_postgres_effect_runs_in_the_recording_and_ends_completed() -> None:
    state, _ = reserved(call(DRAFT), deferred=True)
    done, asked = recorded(state, [Done({"invoice_id": "inv_1"})])
    assert kinds(asked) == [asks.RunPostgres, asks.Write]
    assert asked[0] == asks.RunPostgres((state.calls[0].call.job,), careful=False)
    [(res, status)] = done.ended
    assert status == KeyStatus.COMPLETED and res is not None and res.outcome.taxonomy_class == TaxonomyClass.SUCCESS
    writes = asked[-1].writes  # type: ignore[attr-defined]
    assert isinstance(writes, Writes) and len(writes.insert) == 1 and not writes.settle
    assert done.written is WRITTEN


def test_an_external_effect_runs_between_the_transactions_and_an_unknown_end_stays_pending() -> None:
    state, asked = reserved(call(ESTIMATE))
    assert kinds(asked) == [asks.ReadFirstOutcomes]
    done, asked = recorded(state, [Unknown("timed out")])
    assert kinds(asked) == [asks.RunExternal, asks.Write]
    [(res, status)] = done.ended
    assert status == KeyStatus.PENDING and res is not None and res.outcome.code == 202
    assert asked[-1].writes.reads == []  # type: ignore[attr-defined]  # an interim answer is not kept


def test_a_repeat_in_the_same_round_follows_its_leader_and_replays_its_end() -> None:
    first, again = call(DRAFT), call(DRAFT)
    step = machine.reserve(machine.prepare([first, again], NOW), LEASE, registry(), deferred=True)
    state, _ = drive(step, {asks.LockKeys: {}})
    assert state.calls[1].leader == 0 and not state.calls[1].runs
    done, _ = recorded(state, [Done({"invoice_id": "inv_1"})])
    _, follower = done.ended
    assert follower[0] is not None and follower[0].idempotency_hit and follower[1] is None


# --- the order ------------------------------------------------------------------------------


def test_the_order_cannot_be_skipped() -> None:
    prepared = machine.prepare([call(DRAFT)], NOW)
    state, _ = reserved(call(DRAFT))
    with pytest.raises(machine.OutOfOrder):
        machine.run(prepared)  # type: ignore[arg-type]
    with pytest.raises(machine.OutOfOrder):
        machine.record(prepared, NOW, careful=False)  # type: ignore[arg-type]
    with pytest.raises(machine.OutOfOrder):
        machine.record(state, NOW, careful=False)  # type: ignore[arg-type]  # recorded before it ran
    with pytest.raises(machine.OutOfOrder):
        machine.reserve(state, LEASE, registry(), deferred=False)  # type: ignore[arg-type]


def test_a_recording_runs_again_from_the_same_state() -> None:
    state, _ = reserved(call(DRAFT), deferred=True)
    ran, _ = drive(machine.run(state), {})
    answer = {asks.RunPostgres: [Done({"invoice_id": "inv_1"})], asks.Write: WRITTEN}
    once, _ = drive(machine.record(ran, NOW, careful=False), answer)
    again, _ = drive(machine.record(ran, NOW, careful=True), answer)
    assert once.ended == again.ended


# --- a key left PENDING (reconciliation) ----------------------------------------------------


def test_a_pending_key_completes_or_fails_closed() -> None:
    r: StageRecord = record(CHARGE)
    p = pending.pending(r, CHARGE, "k1", NOW)
    assert drive(pending.status(p, NOW), {asks.CheckStatus: Done({})})[1] == [asks.CheckStatus(p.job, NOW)]
    step = pending.complete(p, {"charge_id": "ch_1"}, "reconciliation", NOW)
    settled, asked = drive(step, {asks.RunAfterEffects: ["refused"]})  # its binding records it
    assert kinds(asked) == [asks.RunAfterEffects] and "recording it here failed: refused" in settled.result.warnings[-1]
    assert settled.status == KeyStatus.COMPLETED and settled.error_code is None
    failed = pending.fail_closed(p, "unverifiable", "reconciliation", NOW)
    assert failed.status == KeyStatus.FAILED_FINAL and failed.error_code == "UNKNOWN_ERROR"
    assert failed.result.outcome.taxonomy_class == TaxonomyClass.UNKNOWN_ERROR
