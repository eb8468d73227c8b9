"""Value budgets' reservations (issue 51, part 2; migration 0026): what each operation reserved of
each value dimension (usage_values, one row per operation and dimension, keyed by its usage
event id), and each tenant's day beside them (usage_value_daily).

The policy round reads a round's runs and tenants' days in its one batch, under the per-tenant
advisory locks it takes for the count budgets (store/usage.py), and reserves the values of the
calls it allows in the same transaction as their usage events: an operation reserved before
reserves nothing again. The stage that decides a reserved call's refusal or failure releases its
value in the transaction that decides it: a row is released once (`released_at`), so a second
release of the same operation changes nothing. Counters are changed in key order, as the usage
counters are, so two transactions that change the same ones lock them in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection

from toolgate.store import batch
from toolgate.store.db import rows_json
from toolgate.store.usage import Run

PER_RUN = """
SELECT tenant_id, agent_id, run_id, dimension, sum(amount)::bigint FROM toolgate.usage_values
WHERE (tenant_id, agent_id, run_id) IN (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[]))
  AND released_at IS NULL
GROUP BY 1, 2, 3, 4
"""
PER_DAY = """
SELECT tenant_id, dimension, used FROM toolgate.usage_value_daily
WHERE tenant_id = ANY(%b) AND day = (now() AT TIME ZONE 'UTC')::date
"""
# Only the rows inserted now, or reserved again now (an operation released without ending: its
# approval denied or expired, then proposed again and allowed), add to the day; an operation
# reserved and not released is not reserved again.
RESERVE = """
WITH reserved AS (
    INSERT INTO toolgate.usage_values AS u (event_id, dimension, tenant_id, agent_id, run_id, day, amount)
    SELECT v.event_id, v.dimension, v.tenant_id, v.agent_id, v.run_id, (now() AT TIME ZONE 'UTC')::date, v.amount
    FROM jsonb_to_recordset(%s::jsonb)
        AS v(event_id text, dimension text, tenant_id text, agent_id text, run_id text, amount bigint)
    ON CONFLICT (event_id, dimension) DO UPDATE
        SET released_at = NULL, day = EXCLUDED.day, amount = EXCLUDED.amount, at = now()
        WHERE u.released_at IS NOT NULL AND NOT u.ended
    RETURNING u.tenant_id, u.dimension, u.day, u.amount
)
INSERT INTO toolgate.usage_value_daily AS d (tenant_id, dimension, day, used)
SELECT tenant_id, dimension, day, sum(amount) FROM reserved GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
ON CONFLICT (tenant_id, dimension, day) DO UPDATE SET used = d.used + EXCLUDED.used
"""
# Which of the round's operations had their value released without ending: a retry of one is
# judged and reserved again (workers/policy/values.py).
RELEASED = """
SELECT DISTINCT event_id FROM toolgate.usage_values
WHERE event_id = ANY(%b::text[]) AND released_at IS NOT NULL AND NOT ended
"""
# Only the rows released now give back to the day they were reserved on (a day pruned since has
# no counter left to give back to); the day's counters are locked in key order first.
RELEASE = """
WITH released AS (
    UPDATE toolgate.usage_values v SET released_at = now(), ended = (%s)::boolean
    WHERE v.event_id = ANY(%b::text[]) AND v.released_at IS NULL
    RETURNING v.tenant_id, v.dimension, v.day, v.amount
), given AS (
    SELECT tenant_id, dimension, day, sum(amount) AS amount FROM released GROUP BY 1, 2, 3
), locked AS (
    SELECT k.tenant_id, k.dimension, k.day FROM toolgate.usage_value_daily k
    JOIN given g USING (tenant_id, dimension, day) ORDER BY 1, 2, 3 FOR UPDATE OF k
)
UPDATE toolgate.usage_value_daily d SET used = greatest(d.used - g.amount, 0)
FROM given g JOIN locked l USING (tenant_id, dimension, day)
WHERE (d.tenant_id, d.dimension, d.day) = (g.tenant_id, g.dimension, g.day)
"""


@dataclass(frozen=True, slots=True)
class Reservation:
    """One operation's value of one dimension, reserved by the policy round that allowed it."""

    event_id: str
    tenant_id: str
    agent_id: str
    run_id: str
    dimension: str
    amount: int


@dataclass(frozen=True, slots=True)
class Read:
    """The value reserved, and not released, by each run and each tenant today, by dimension."""

    per_run: dict[tuple[str, str, str, str], int]  # (tenant, agent, run_id, dimension) -> amount
    per_day: dict[tuple[str, str], int]  # (tenant, dimension) -> amount today
    released: set[str]  # the round's operations released without ending (event ids)


def reads(tenants: Sequence[str], runs: Sequence[Run], event_ids: Sequence[str]) -> list[batch.Statement]:
    """The round's value reads, as statements of its batch (after the tenants' locks; `read`
    takes their results)."""
    return [
        (PER_RUN, tuple([run[i] for run in runs] for i in range(3))),
        (PER_DAY, (list(tenants),)),
        (RELEASED, (list(event_ids),)),
    ]


READS = 3  # statements `reads` gives


def read(results: Sequence[batch.Result]) -> Read:
    """What the statements of `reads` found."""
    per_run, per_day, released = results
    return Read(
        {(t, a, r, d): int(n) for t, a, r, d, n in per_run.rows},
        {(t, d): int(n) for t, d, n in per_day.rows},
        {row[0] for row in released.rows},
    )


def of_call(event_id: str, run: Run, values: Iterable[tuple[str, int]]) -> list[Reservation]:
    """The reservations of one allowed call (its usage event id, its run) of these values."""
    return [Reservation(event_id, *run, dimension, amount) for dimension, amount in values]


def reserve(reservations: Iterable[Reservation]) -> batch.Statement:
    """The statement that reserves these values (an operation reserved before is not again)."""
    return RESERVE, (rows_json(sorted(reservations, key=lambda r: (r.event_id, r.dimension))),)


def release_statement(event_ids: Iterable[str], *, ended: bool) -> batch.Statement:
    """The statement that releases what these operations reserved, each once however often asked;
    `ended`: the operations ended for good (never run again), else a retry may reserve again."""
    return RELEASE, (ended, sorted(set(event_ids)))


async def release(conn: AsyncConnection[Any], event_ids: Iterable[str], *, ended: bool) -> None:
    """Release what these operations reserved, in the caller's transaction (nothing if none)."""
    ids = sorted(set(event_ids))
    if ids:
        await conn.execute(*release_statement(ids, ended=ended))
