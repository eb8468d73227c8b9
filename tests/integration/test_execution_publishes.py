"""Execution publishes its results itself once they are committed, with no relay to wake.

An agent waits for every observation, and waking the outbox relay for each round cost a call
a hop. Execution's results are inserted into the outbox held (the relay leaves them alone for a
few seconds) and produced by execution right after its commit, then marked sent. Validation,
policy, approval-wait and execution run here on the session's broker and Postgres, topics and a
database of this module's own, and no relay runs: every result must reach tool.results anyway,
every draft made once, and every outbox row marked sent within its hold.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from toolgate.client import ToolgateClient
from toolgate.contracts.registry import load_registry
from toolgate.ops.stack.embedded import Broker
from toolgate.schemas.models import ExecutionResult
from toolgate.store import outbox
from toolgate.store.outbox import OutboxRow, RowKind
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring
from toolgate.workers.execution.handler import ExecutionHandler
from toolgate.workers.runtime.emit import Emit

from .conftest import Database
from .stage_workers import call_ids_on, running, worker_env

DRAFTS = 40


def test_execution_publishes_its_committed_results_without_the_relay(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    env = worker_env(database, broker, topic_prefix, tmp_path, {})
    client = ToolgateClient(broker.bootstrap, prefix=topic_prefix, keyring=AgentKeyring(database.home / "agents"))
    line = {"description": "Consulting", "quantity": 1, "unit_amount_cents": 100}
    args = {"customer_id": "cust_acme01", "currency": "USD", "due_date": "2030-12-31", "lines": [line]}
    stages = ("validation", "policy", "approval-wait", "execution")
    drafts_before = _drafts(database)
    with running(stages[0], env), running(stages[1], env), running(stages[2], env), running(stages[3], env) as log:
        sent = {
            client.propose("invoice.create_draft", args, agent_id="cli", user_id="bp", flush=False).call_id
            for _ in range(DRAFTS)
        }
        client.flush()
        answered = call_ids_on(broker.bootstrap, Topics(topic_prefix).results, sent, 60, model=ExecutionResult)
        assert sent <= answered, f"{len(sent - answered)} results never reached tool.results\n{log.read_text()[-3000:]}"
        # Marked sent while execution runs, well within their hold (the relay would send them again).
        deadline = time.monotonic() + outbox.HOLD_S
        while _unsent(database) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _unsent(database) == 0
    assert _drafts(database) - drafts_before == DRAFTS


def _unsent(database: Database) -> int:
    return int(database.sql("SELECT count(*) FROM toolgate.outbox WHERE sent_at IS NULL")[0][0])


def _drafts(database: Database) -> int:
    return int(database.sql("SELECT count(*) FROM demo.invoices WHERE status = 'draft'")[0][0])


def test_execution_marks_what_it_published_as_it_stops(database: Database) -> None:
    """Execution marks its published rows sent every half second; what it published since the
    last time is marked as it stops, so a clean stop leaves the relay nothing to send again."""
    topics = Topics(database.settings.topic_prefix)
    rows = [OutboxRow("results", 0, RowKind.ITEM, None, b"published-%d" % i) for i in range(3)]

    async def publish_then_stop() -> tuple[list[int], int]:
        handler = ExecutionHandler(load_registry(), database.settings)
        await handler.start()
        try:
            async with handler.pool.connection() as conn:
                cursor = await outbox.enqueue_held(conn, rows, topics)
                ids = [row[0] for row in await cursor.fetchall()]
            out = Emit("execution")
            out.outbox_ids.extend(ids)
            await handler.delivered(out)
            await handler.stop()  # well within the half second
            async with handler.pool.connection() as conn:
                cursor = await conn.execute(
                    "SELECT count(*) FROM toolgate.outbox WHERE id = ANY(%s) AND sent_at IS NOT NULL", (ids,)
                )
                marked = await cursor.fetchone()
            return ids, int(marked[0]) if marked else 0
        finally:
            await handler.pool.close()
            await handler.http.close()

    ids, marked = asyncio.run(publish_then_stop())
    assert len(ids) == 3 and marked == 3
