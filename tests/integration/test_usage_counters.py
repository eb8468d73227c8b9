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
from toolgate.store.usage import COUNTED, PER_RUN, RATE, RECORD, recent_calls
from toolgate.workers.policy.decision import Recent

from .conftest import Server, migrated_before

# What the rate window read before the counters: every call event inside the window.
EVERY_EVENT = """
SELECT u.tenant_id, u.tool_name, count(*), (extract(epoch FROM min(u.at)) * 1000)::bigint
FROM toolgate.usage_events u
JOIN unnest(%s::text[], %s::text[], %s::int[]) AS w(tenant_id, tool_name, window_sec)
  ON u.tenant_id = w.tenant_id AND u.tool_name = w.tool_name
WHERE u.at > now() - make_interval(secs => w.window_sec)
GROUP BY 1, 2
"""
INSERT_AGO = """
INSERT INTO toolgate.usage_events (event_id, tenant_id, agent_id, run_id, tool_name, spends, at)
SELECT e.event_id, e.tenant_id, e.agent_id, e.run_id, e.tool_name, e.spends, now() - make_interval(secs => e.ago)
FROM jsonb_to_recordset(%s::jsonb)
    AS e(event_id text, tenant_id text, agent_id text, run_id text, tool_name text, spends text[], ago float8)
"""
Event = tuple[str, list[str], str, str, str, float]


@pytest.fixture
def database(postgres: Server) -> Iterator[str]:
    with postgres.scratch("usage", template=None) as scratch:
        migrate(scratch.database_url)
        yield scratch.database_url


def insert_ago(conn: psycopg.Connection[Any], events: list[Event], agent: str = "cli") -> None:
    """Events as (event_id, spends, tenant, run, tool, seconds ago) of `agent`, in one statement."""
    keys = ("event_id", "spends", "tenant_id", "run_id", "tool_name", "ago")
    rows = [{**dict(zip(keys, event, strict=True)), "agent_id": agent} for event in events]
    conn.execute(INSERT_AGO, (json.dumps(rows),))


def counters_and_counts(conn: psycopg.Connection[Any]) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The runs' and seconds' counters, each beside the count of the events it stands for. A run
    is (tenant, agent, run_id): migration 0021."""
    runs = conn.execute(
        "SELECT tenant_id, agent_id, run_id, dimension, used FROM toolgate.usage_runs ORDER BY 1, 2, 3, 4"
    )
    run_counts = conn.execute(
        "SELECT tenant_id, agent_id, run_id, d, count(*) FROM toolgate.usage_events CROSS JOIN unnest(spends) AS d "
        "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
    )
    seconds = conn.execute("SELECT tenant_id, tool_name, second, calls FROM toolgate.usage_seconds ORDER BY 1, 2, 3")
    second_counts = conn.execute(
        "SELECT tenant_id, tool_name, floor(extract(epoch FROM at))::bigint, count(*) FROM toolgate.usage_events "
        "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    )
    return runs.fetchall(), run_counts.fetchall(), seconds.fetchall(), second_counts.fetchall()


def test_counters_equal_the_events_however_written_or_pruned(database: str) -> None:
    def event(event_id: str, spends: list[str], run: str = "r1", tool: str = "t.a") -> dict[str, Any]:
        return {
            "event_id": event_id,
            "spends": spends,
            "tenant_id": "acme",
            "agent_id": "cli",
            "run_id": run,
            "tool_name": tool,
        }

    rng = random.Random(13)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(RECORD, (json.dumps([event("op1", ["write"]), event("op2", [], "r2")]),))
        conn.execute(RECORD, (json.dumps([event("op1", ["write"])]),))  # a retry: nothing new
        for agent in ("cli", "bot"):  # two agents naming the same run_ids: two runs each
            insert_ago(
                conn,
                [
                    (
                        f"e{agent}{i}",
                        rng.choice([[], ["write"], ["write", "financial"], ["read"]]),
                        rng.choice(["acme", "globex"]),
                        rng.choice(["r1", "r2", "r3"]),
                        rng.choice(["t.a", "t.b"]),
                        rng.uniform(0, 90),
                    )
                    for i in range(300)
                ],
                agent,
            )
        runs, run_counts, seconds, second_counts = counters_and_counts(conn)
        assert runs == run_counts and seconds == second_counts
        assert dict(((t, a, r, d), n) for t, a, r, d, n in runs)[("acme", "bot", "r1", "financial")] >= 1
        assert not [row for row in runs if row[3] == "call"]  # a call is a row, not a dimension

        # Pruned by age, as retention prunes, and one event taken out by hand.
        conn.execute("DELETE FROM toolgate.usage_events WHERE at < now() - make_interval(secs => 45)")
        conn.execute("DELETE FROM toolgate.usage_events WHERE event_id = 'op2'")
        runs, run_counts, seconds, second_counts = counters_and_counts(conn)
        assert runs == run_counts and seconds == second_counts
        assert all(n > 0 for *_, n in runs + seconds)  # a counter at zero is gone

        per_run = conn.execute(PER_RUN, (["acme", "globex"], ["cli", "cli"], ["r1", "r1"])).fetchall()
        assert sorted(per_run) == [row for row in run_counts if row[1:3] == ("cli", "r1")]

        with pytest.raises(psycopg.errors.RaiseException, match="never changed"):
            conn.execute("UPDATE toolgate.usage_events SET at = now()")
        conn.execute("TRUNCATE toolgate.usage_events")
        assert counters_and_counts(conn) == ([], [], [], [])


def test_rate_window_counts_what_counting_every_event_counts(database: str) -> None:
    rng = random.Random(7)
    pairs = [("acme", "t.a"), ("acme", "t.b"), ("globex", "t.a")]
    with psycopg.connect(database, autocommit=True) as conn:
        spends: list[list[str]] = [[], ["write"]]
        calls: list[Event] = []
        for i in range(3000):
            tenant, tool = rng.choice(pairs)
            calls.append((f"c{i}", rng.choice(spends), tenant, "r", tool, rng.uniform(0, 130)))
        insert_ago(conn, calls)
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
        insert_ago(conn, [(f"c{i}", ["write"], "acme", "r", "t.a", i / 500) for i in range(30_000)])
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
    rate windows' index whole (every call so far) unless the statistics were fresh."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("ANALYZE toolgate.usage_events")
        insert_ago(conn, [(f"op{i}", ["write"], "acme", "r", "t.a", 1.0) for i in range(20_000)])
        ids = [f"op{i}" for i in range(0, 20_000, 400)] + [f"new{i}" for i in range(400)]
        query = COUNTED.replace("%b", "%s")
        (plan,) = conn.execute("EXPLAIN (FORMAT JSON) " + query, (ids,)).fetchone()[0]
        counted = {row[0] for row in conn.execute(query, (ids,))}
    assert indexes_used(plan["Plan"]) == {"usage_events_pkey"}
    assert counted == {f"op{i}" for i in range(0, 20_000, 400)}


def test_migration_0017_makes_one_event_of_each_operations_rows(postgres: Server) -> None:
    """A deployment's history written one row per operation and dimension (up to 0016) becomes one
    event per operation with the dimensions it spent; the counters are counted again and equal
    their events, and the runs' 'call' counters, which no budget reads, are gone."""
    with postgres.scratch("usage_0017", template=None) as scratch:
        with psycopg.connect(scratch.database_url, autocommit=True) as conn:
            migrated_before(conn, "0017")
            conn.execute(
                "INSERT INTO toolgate.usage_events (event_id, dimension, tenant_id, run_id, tool_name, at) VALUES "
                "('op1', 'call', 'acme', 'r1', 't.a', now() - interval '5 s'),"
                "('op1', 'write', 'acme', 'r1', 't.a', now() - interval '5 s'),"
                "('op1', 'financial', 'acme', 'r1', 't.a', now() - interval '5 s'),"
                "('op2', 'call', 'acme', 'r2', 't.b', now()),"
                "('op3', 'call', 'globex', 'r1', 't.a', now()), ('op3', 'read', 'globex', 'r1', 't.a', now()),"
                "('op5', 'write', 'acme', 'r3', 't.a', now())"  # no 'call' row: counted again, as a call
            )
            assert ("acme", "r1", "call", 1) in conn.execute("SELECT * FROM toolgate.usage_runs").fetchall()
        applied = migrate(scratch.database_url)
        assert applied[0] == "0017_usage_event_per_operation.sql" and "0021_tenant_bound_keys.sql" in applied
        with psycopg.connect(scratch.database_url, autocommit=True) as conn:
            events = conn.execute(
                "SELECT event_id, tenant_id, run_id, tool_name, spends FROM toolgate.usage_events ORDER BY 1"
            ).fetchall()
            assert events == [
                ("op1", "acme", "r1", "t.a", ["financial", "write"]),
                ("op2", "acme", "r2", "t.b", []),
                ("op3", "globex", "r1", "t.a", ["read"]),
                ("op5", "acme", "r3", "t.a", ["write"]),
            ]
            runs, run_counts, seconds, second_counts = counters_and_counts(conn)
            assert runs == run_counts and seconds == second_counts
            assert [row[3] for row in runs] == ["financial", "write", "write", "read"]
            insert_ago(conn, [("op4", ["write"], "acme", "r1", "t.a", 0.0)])  # the new triggers count it
            conn.execute("DELETE FROM toolgate.usage_events WHERE event_id = 'op1'")
            runs, run_counts, seconds, second_counts = counters_and_counts(conn)
            assert runs == run_counts
            # Events from before 0021 name no agent (''); op4 is cli's.
            assert runs == [
                ("acme", "", "r3", "write", 1),
                ("acme", "cli", "r1", "write", 1),
                ("globex", "", "r1", "read", 1),
            ]
            assert seconds == second_counts
