"""Policy's usage counters (migration 0013) on the session's real Postgres: each counter equals the
count of the usage events it stands for, however they were written or pruned, and a rate window
read from them counts what counting every event counts, without reading every event."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from toolgate.ops.migrate import migrate
from toolgate.workers.policy.decision import Recent
from toolgate.workers.policy.handler import COUNTED, PER_RUN, RATE, RECORD, recent_calls

from .conftest import Server

# What the rate window read before the counters: every call event inside the window.
EVERY_EVENT = """
SELECT u.tenant_id, u.tool_name, count(*), (extract(epoch FROM min(u.at)) * 1000)::bigint
FROM toolgate.usage_events u
JOIN unnest(%s::text[], %s::text[], %s::int[]) AS w(tenant_id, tool_name, window_sec)
  ON u.tenant_id = w.tenant_id AND u.tool_name = w.tool_name
WHERE u.dimension = 'call' AND u.at > now() - make_interval(secs => w.window_sec)
GROUP BY 1, 2
"""
INSERT_AGO = (
    "INSERT INTO toolgate.usage_events (event_id, dimension, tenant_id, run_id, tool_name, at) "
    "SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "ARRAY(SELECT now() - make_interval(secs => s) FROM unnest(%s::float8[]) AS s))"
)


@pytest.fixture
def database(postgres: Server) -> Iterator[str]:
    with postgres.scratch("usage", template=None) as scratch:
        migrate(scratch.database_url)
        yield scratch.database_url


def insert_ago(conn: psycopg.Connection[Any], events: list[tuple[str, str, str, str, str, float]]) -> None:
    """Events as (event_id, dimension, tenant, run, tool, seconds ago), in one statement."""
    conn.execute(INSERT_AGO, [list(column) for column in zip(*events, strict=True)])


def counters_and_counts(conn: psycopg.Connection[Any]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    runs = conn.execute("SELECT tenant_id, run_id, dimension, used FROM toolgate.usage_runs ORDER BY 1, 2, 3")
    run_counts = conn.execute(
        "SELECT tenant_id, run_id, dimension, count(*) FROM toolgate.usage_events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
    seconds = conn.execute("SELECT tenant_id, tool_name, second, calls FROM toolgate.usage_seconds ORDER BY 1, 2, 3")
    second_counts = conn.execute(
        "SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*) FROM toolgate.usage_events "
        "WHERE dimension = 'call' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
    return runs.fetchall(), run_counts.fetchall(), seconds.fetchall(), second_counts.fetchall()


def test_counters_equal_the_events_however_written_or_pruned(database: str) -> None:
    def event(event_id: str, dimension: str, run: str = "r1", tool: str = "t.a") -> dict[str, str]:
        return {"event_id": event_id, "dimension": dimension, "tenant_id": "acme", "run_id": run, "tool_name": tool}

    rng = random.Random(13)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(RECORD, (json.dumps([event("op1", "write"), event("op1", "call"), event("op2", "call", "r2")]),))
        conn.execute(RECORD, (json.dumps([event("op1", "write"), event("op1", "call")]),))  # a retry: nothing new
        insert_ago(
            conn,
            [
                (
                    f"e{i}",
                    rng.choice(["call", "call", "write"]),
                    rng.choice(["acme", "globex"]),
                    rng.choice(["r1", "r2", "r3"]),
                    rng.choice(["t.a", "t.b"]),
                    rng.uniform(0, 90),
                )
                for i in range(600)
            ],
        )
        runs, run_counts, seconds, second_counts = counters_and_counts(conn)
        assert runs == run_counts and seconds == second_counts
        assert dict(((t, r, d), n) for t, r, d, n in runs)[("acme", "r1", "call")] >= 1

        # Pruned by age, as retention prunes, and one event taken out by hand.
        conn.execute("DELETE FROM toolgate.usage_events WHERE at < now() - make_interval(secs => 45)")
        conn.execute("DELETE FROM toolgate.usage_events WHERE event_id = 'op2'")
        runs, run_counts, seconds, second_counts = counters_and_counts(conn)
        assert runs == run_counts and seconds == second_counts
        assert all(n > 0 for *_, n in runs + seconds)  # a counter at zero is gone

        per_run = conn.execute(PER_RUN, (["acme", "globex"], ["r1", "r1"])).fetchall()
        assert sorted(per_run) == [row for row in run_counts if row[1] == "r1"]

        with pytest.raises(psycopg.errors.RaiseException, match="never changed"):
            conn.execute("UPDATE toolgate.usage_events SET at = now()")
        conn.execute("TRUNCATE toolgate.usage_events")
        assert counters_and_counts(conn) == ([], [], [], [])


def test_rate_window_counts_what_counting_every_event_counts(database: str) -> None:
    rng = random.Random(7)
    pairs = [("acme", "t.a"), ("acme", "t.b"), ("globex", "t.a")]
    with psycopg.connect(database, autocommit=True) as conn:
        calls = [(f"c{i}", rng.choice(pairs), rng.uniform(0, 130)) for i in range(3000)]
        insert_ago(
            conn,
            [(event_id, "call", tenant, "r", tool, ago) for event_id, (tenant, tool), ago in calls]
            + [(f"w{i}", "write", "acme", "r", "t.a", rng.uniform(0, 130)) for i in range(300)],
        )
        for windows in ([1, 2, 7], [11, 30, 59], [60, 61, 129], [200, 1, 3]):
            args = ([t for t, _ in pairs], [tool for _, tool in pairs], windows)
            with conn.transaction():  # one now() for both reads
                expected = sorted(conn.execute(EVERY_EVENT, args).fetchall())
                assert sorted(conn.execute(RATE, args).fetchall()) == expected

    async def read() -> dict[tuple[str, str], Recent]:
        async with await psycopg.AsyncConnection.connect(database) as aconn:
            return await recent_calls(aconn, {("acme", "t.a"): 60, ("nobody", "t.a"): 60})

    recent = asyncio.run(read())
    assert set(recent) == {("acme", "t.a")} and recent[("acme", "t.a")].count > 0


def rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows the scans of `table` in an EXPLAIN ANALYZE plan returned, over all their loops."""
    own = 0
    if plan.get("Relation Name") == table:
        own = int(plan["Actual Rows"] * plan["Actual Loops"])
    return own + sum(rows_read(child, table) for child in plan.get("Plans", []))


def test_a_busy_window_is_read_without_reading_its_events(database: str) -> None:
    """30,000 calls in the last minute (500 a second): the window reads its counters, one row a
    second, and only the events of its oldest, partial second; counting every event read all."""
    with psycopg.connect(database, autocommit=True) as conn:
        insert_ago(conn, [(f"c{i}", "call", "acme", "r", "t.a", i / 500) for i in range(30_000)])
        conn.execute("VACUUM ANALYZE toolgate.usage_events")
        args = (["acme"], ["t.a"], [60])
        (plan,) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + RATE, args).fetchone()[0]
        (count,) = [row[2] for row in conn.execute(RATE, args)]
    assert count > 29_000
    assert rows_read(plan["Plan"], "usage_seconds") <= 61
    assert rows_read(plan["Plan"], "usage_events") <= 2 * 500 + 1


def indexes_used(plan: dict[str, Any]) -> set[str]:
    """The indexes an EXPLAIN plan reads, and "seq:<table>" for a table it reads whole."""
    own = {plan["Index Name"]} if "Index Name" in plan else set()
    if plan.get("Node Type") == "Seq Scan":
        own = {f"seq:{plan['Relation Name']}"}
    return own.union(*(indexes_used(child) for child in plan.get("Plans", [])))


def test_operations_counted_before_are_looked_up_by_key_however_stale_the_statistics(database: str) -> None:
    """20,000 calls counted since the table was last analyzed (empty): a round of 450 operations,
    50 of them counted before, is answered by the primary key alone. Before, the planner read the
    partial call index whole (every call so far) unless the statistics were fresh."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("ANALYZE toolgate.usage_events")
        insert_ago(conn, [(f"op{i}", dim, "acme", "r", "t.a", 1.0) for i in range(20_000) for dim in ("call", "calls")])
        ids = [f"op{i}" for i in range(0, 20_000, 400)] + [f"new{i}" for i in range(400)]
        query = COUNTED.replace("%b", "%s")
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, (ids,)).fetchone()[0]
        counted = {row[0] for row in conn.execute(query, (ids,))}
    assert indexes_used(plan["Plan"]) == {"usage_events_pkey"}
    assert counted == {f"op{i}" for i in range(0, 20_000, 400)}
