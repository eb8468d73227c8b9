"""Executors behind one interface, chosen by the contract's binding.

postgres  one pre-authorized, parameterized statement per call, run inside the transaction
          that also records COMPLETED and the outbox row, bounded by the call's time left
          (statement_timeout, lock_timeout) and, for a READ_ONLY tool, read-only (bounds.py);
          a statement refused makes the transaction run again with each call in its own
          savepoint.
http      JSON over HTTP (http.py): the idempotency key in a header, auth resolved from a
          secret reference at call time, an egress allowlist, and the provider's status query
          when the outcome is unknown.
python    an importable callable, `fn(arguments, context) -> dict`, sync or async, run in a child
          process of its own under resource limits, sandboxed if its contract asks
          (children.py, runner.py, confinement.py).

Each call ends as Done (the effect happened: COMPLETED), Failed (nothing happened:
FAILED_RETRYABLE or FAILED_FINAL) or Unknown (it may have happened: the key stays PENDING
until a status query or reconciliation settles it; never retried blindly).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import AsyncConnection

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.store import bounds as store_bounds
from toolgate.store.db import jsonb
from toolgate.workers.execution import bounds
from toolgate.workers.execution.effects import Done, Effect, Failed, Job, Unknown, failed
from toolgate.workers.runtime import clock

log = logging.getLogger("toolgate.execution")

__all__ = [
    "Done",
    "Effect",
    "Failed",
    "Job",
    "Refused",
    "Unknown",
    "failed",
    "run_after_effects",
    "run_postgres",
    "run_postgres_batch",
]


def to_json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


# --- postgres ------------------------------------------------------------------------------


def statement_params(job: Job) -> dict[str, Any]:
    params: dict[str, Any] = {f"ctx.{k}": v for k, v in job.context.items()}
    names = set(job.contract.input_schema.get("properties", {})) | set(job.record.call.arguments)
    for name in names:
        value = job.record.call.arguments.get(name)
        params[f"args.{name}"] = jsonb(value) if isinstance(value, dict | list) else value
    return params


def map_sqlstate(contract: Contract, exc: psycopg.Error) -> TaxonomyClass:
    mapping: Mapping[str, str] = contract.document["observability"]["error_taxonomy_mapping"]
    state = exc.sqlstate or ""
    if state in mapping and mapping[state] in TaxonomyClass.__members__:
        return TaxonomyClass(mapping[state])
    if state == "23503":  # foreign key: the target does not exist (any more)
        return TaxonomyClass.STALE_STATE
    if state.startswith("22") or state.startswith("23"):  # data exception, integrity
        return TaxonomyClass.SEMANTIC_INVALIDITY
    return TaxonomyClass.UNKNOWN_ERROR


class Refused(Exception):
    """An effect's statement was refused outside a savepoint (`run_postgres_batch`, not careful):
    the caller's whole transaction is lost, and runs again with savepoints."""


def lost(exc: psycopg.Error) -> bool:
    """Whether the connection itself failed (transient: the whole transaction retries), not the
    statement: psycopg calls a statement a bound cut an OperationalError too."""
    return isinstance(exc, psycopg.OperationalError) and (exc.sqlstate or "") not in bounds.CUT


async def run_postgres_batch(conn: AsyncConnection[Any], jobs: list[Job], careful: bool = True) -> list[Effect]:
    """Every call's statement inside the caller's transaction, in the calls' order, bounded by
    their time left (bounds.py), a READ_ONLY tool's read-only.

    Not `careful`: the statements run as they are, without a savepoint around them, and a
    refused statement (a bound's cut included) raises `Refused`: the caller's transaction can
    only be rolled back, and the caller runs it again carefully. A statement is rarely refused
    (validation checked its arguments and the facts they name), so a round nearly always
    commits at the first try.

    `careful`: all statements under one savepoint; if any fails, that savepoint is rolled back
    and the calls run one by one, each in a savepoint of its own and with its own time left, so
    one refused call never spoils the others.
    """
    if not jobs:
        return []
    if not careful:
        try:
            return await _all_at_once(conn, jobs, bounds.limits(jobs, clock.now_ms()))
        except psycopg.Error as exc:
            if lost(exc):
                raise
            raise Refused(f"{exc.sqlstate}: {type(exc).__name__}") from exc
    if len(jobs) == 1:
        return [await run_postgres(conn, jobs[0])]
    try:
        async with conn.transaction():
            return await _all_at_once(conn, jobs, bounds.limits(jobs, clock.now_ms()))
    except psycopg.Error as exc:
        if lost(exc):
            raise
        return [await run_postgres(conn, job) for job in jobs]


async def _all_at_once(conn: AsyncConnection[Any], jobs: list[Job], limits: bounds.Limits) -> list[Effect]:
    """The statements in one bounded section (store/bounds.py: one pipeline, the bounds set and
    set back): consecutive calls of one statement go as one `executemany`, which prepares the
    query once and reads each call's rows as a result set of its own (far less of the client's
    CPU than one `execute` per call: docs/performance.md, "Figures behind the code"); a
    READ_ONLY tool's in a read-only savepoint.

    Its savepoint, when careful, is psycopg's (`conn.transaction()`, a round trip each way), not
    the section's: rolled back, it also makes psycopg forget the statements it named prepared,
    and one of these may be a Parse the server skipped after the refused statement (or one a
    lock wait cut), which would otherwise be Bound by name on its next use and fail."""
    runs: list[list[Job]] = []  # consecutive jobs of one statement
    for job in jobs:
        same = runs and runs[-1][0].contract.executor["statement"] == job.contract.executor["statement"]
        if same and bounds.read_only(runs[-1][0]) == bounds.read_only(job):
            runs[-1].append(job)
        else:
            runs.append([job])
    cursors = []
    async with store_bounds.section(conn, limits.statement_ms, limits.lock_ms, savepoint=False):
        for run in runs:
            reading = bounds.read_only(run[0])
            if reading:
                await conn.execute(store_bounds.READ_ONLY_SAVEPOINT, prepare=False)
                await conn.execute(store_bounds.READ_ONLY, prepare=False)
            cur = conn.cursor()
            statement = run[0].contract.executor["statement"]
            # psycopg names a statement prepared at its fifth use without waiting for the server,
            # which skips a Parse that follows a failed statement in a pipeline: a round's one
            # statement follows only the bounds (which do not fail), the others go as before.
            if len(jobs) == 1:
                await cur.execute(statement, statement_params(run[0]))
            else:
                await cur.executemany(statement, [statement_params(job) for job in run], returning=True)
            cursors.append(cur)
            if reading:
                await conn.execute(store_bounds.END_READ, prepare=False)
    effects: list[Effect] = []
    for run, cur in zip(runs, cursors, strict=True):
        # One statement's results have one shape: its columns are read once, not per call
        # (`description` builds its Column objects again at every read).
        columns = [c.name for c in cur.description or []]
        for n, job in enumerate(run):
            if n and not cur.nextset():
                raise psycopg.InterfaceError(f"{len(run)} statements gave {n} results")
            rows = await cur.fetchall() if columns else []
            effects.append(_effect(job, columns, rows, cur.rowcount))
    return effects


async def run_postgres(conn: AsyncConnection[Any], job: Job) -> Effect:
    """One call's statement inside the caller's transaction, in a savepoint of its own, bounded
    by its own time left: a statement a bound cut rolled back, and says so (bounds.py)."""
    limits = bounds.limits([job], clock.now_ms())
    try:
        async with conn.transaction():
            return (await _all_at_once(conn, [job], limits))[0]
    except psycopg.Error as exc:
        if lost(exc):
            raise
        log.warning(
            "a statement was refused",
            extra={
                "stage": "execution",
                "action": "statement_refused",
                "call_id": job.record.call.call_id,
                "sqlstate": exc.sqlstate,
                "error": SCRUBBER.text(exc.diag.message_primary or type(exc).__name__)[:500],
            },
        )
        mapping = job.contract.document["observability"]["error_taxonomy_mapping"]
        cut = bounds.cut(job, exc.sqlstate or "", limits, mapping)
        if cut is not None:
            return cut
        return failed(map_sqlstate(job.contract, exc), f"sqlstate_{exc.sqlstate}", refusal_text(exc), final=True)


def refusal_text(exc: psycopg.Error) -> str:
    """What the caller is told of its refused statement. An integrity violation (SQLSTATE class
    23: a unique key, a foreign key, a check, an exclusion) is about rows the statement met, and
    they need not be the caller's tenant's: it is named by its condition only, never by the
    server's text (constraint, key, values), so no refusal tells one tenant about another's
    data. Any other refusal says the server's primary message, which is about the statement and
    the arguments it was given. The operator's log has the server's text either way."""
    if (exc.sqlstate or "").startswith("23"):
        return f"the statement was refused: it conflicts with data already stored ({type(exc).__name__})"
    return f"the statement was refused: {exc.diag.message_primary or type(exc).__name__}"


async def run_after_effects(conn: AsyncConnection[Any], done: list[tuple[Job, dict[str, Any]]]) -> list[str | None]:
    """Each completed external effect's `after_effect` statement (binding), inside the caller's
    transaction that records it COMPLETED, each in a savepoint: None, or why it failed (the
    effect happened all the same; the failure is reported, never a reason to undo it)."""
    outcome: list[str | None] = []
    for job, data in done:
        params = {
            **statement_params(job),
            **{f"result.{k}": v for k, v in data.items() if not isinstance(v, dict | list)},
        }
        try:
            async with conn.transaction():
                await conn.execute(job.contract.binding["after_effect"]["statement"], params)
            outcome.append(None)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            outcome.append(SCRUBBER.text(exc.diag.message_primary or type(exc).__name__)[:300])
    return outcome


def _effect(job: Job, columns: list[str], raw_rows: list[Any], affected: int) -> Effect:
    spec = job.contract.executor
    rows = [dict(zip(columns, map(to_json_value, r), strict=True)) for r in raw_rows]
    if spec["result"] == "rows":
        return Done({"rows": rows})
    if spec["result"] == "none":
        return Done({"affected": affected})
    if not rows:
        if spec.get("not_found", "STALE_STATE") == "SUCCESS":
            return Done({})
        return failed(TaxonomyClass.STALE_STATE, "not_found", "the target resource does not exist", final=True)
    return Done(rows[0])
