"""An execution worker deep in a backlog keeps its rounds short.

Execution reads StageBatches, each holding every call an upstream round sent to a partition. Its
rounds were `batch_max` records, which in a 100,000-call benchmark was 13,036 calls in one round
of 48 s: past its keys' 30 s lease and the consumer's poll interval, and the stage stalled with
17,134 keys PENDING. A round now holds about `batch_bytes` of records, whatever the topic
(workers/runtime/filling.py).

Validation, policy and approval-wait put 3,000 drafts on tool.executable (validation's rounds of up
to 50) before an execution worker starts, all against the session's broker and Postgres on
topics and a database of this module's own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from toolgate.client import ToolgateClient
from toolgate.ops.stack.embedded import Broker
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring

from .conftest import Database
from .stage_workers import call_ids_on, running, worker_env

DRAFTS = 3000
# contracts/cedar/budgets.json allows a run a few thousand writes: the drafts go in runs of this many.
DRAFTS_PER_RUN = 500


def test_execution_deep_in_a_backlog_keeps_its_rounds_short_and_makes_every_draft_once(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    """3,000 drafts wait on tool.executable, in StageBatches, before execution starts:
    its rounds hold about `batch_bytes` of them, not `batch_max` records (all 3,000 at once), so
    each stays short against its keys' lease and the poll interval; every draft is made once."""
    # Every StageBatch record is split at 64 KiB (about 190 drafts), upstream as in execution.
    limit = {"TOOLGATE_BATCH_BYTES": str(64 * 1024)}
    upstream = worker_env(database, broker, topic_prefix, tmp_path, {"TOOLGATE_BATCH_MAX": "50", **limit})
    client = ToolgateClient(broker.bootstrap, prefix=topic_prefix, keyring=AgentKeyring(database.home / "agents"))
    line = {"description": "Consulting", "quantity": 1, "unit_amount_cents": 100}
    args = {"customer_id": "cust_acme01", "currency": "USD", "due_date": "2030-12-31", "lines": [line]}
    with running("validation", upstream), running("policy", upstream), running("approval-wait", upstream):
        runs = [f"r{i // DRAFTS_PER_RUN}" for i in range(DRAFTS)]
        sent = {
            client.propose("invoice.create_draft", args, agent_id="cli", user_id="bp", run_id=run, flush=False).call_id
            for run in runs
        }
        client.flush()
        queued = call_ids_on(broker.bootstrap, Topics(topic_prefix).executable, sent, timeout=120)
    assert sent <= queued, f"{len(sent - queued)} drafts never reached tool.executable"

    drafts_before = _drafts(database)
    settings = {
        **limit,
        "TOOLGATE_MAX_POLL_INTERVAL_SECONDS": "3",
        "TOOLGATE_TELEMETRY_EXPORTER": "file",
    }
    with running("execution", worker_env(database, broker, topic_prefix, tmp_path, settings)) as log:
        deadline = time.monotonic() + 120
        while _keys(database) != {"COMPLETED": DRAFTS} and time.monotonic() < deadline:
            time.sleep(0.5)
    keys = _keys(database)
    assert keys == {"COMPLETED": DRAFTS}, f"keys {keys}\n{log.read_text()[-3000:]}"
    assert _drafts(database) - drafts_before == DRAFTS
    # A round holds about 64 KiB and may go one StageBatch past it; a StageBatch holds at most
    # 64 KiB, however many upstream rounds went into it: two of them, about 380 drafts. (With
    # approval-wait's StageBatches at the default 512 KiB, a round once held 849.) All 3,000 at
    # once was the bound before.
    assert 0 < _largest_round(tmp_path / "telemetry" / "metrics-execution.jsonl") <= 400


def _largest_round(metrics: Path) -> float:
    """The largest execution round (calls), from the worker's last metrics export."""
    last = json.loads(metrics.read_text().splitlines()[-1])
    for scope in (s for r in last["resource_metrics"] for s in r["scope_metrics"]):
        for metric in scope["metrics"]:
            if metric["name"] == "toolgate.round.size":
                return float(max(p["max"] for p in metric["data"]["data_points"]))
    raise AssertionError(f"no toolgate.round.size in {metrics}")


def _drafts(database: Database) -> int:
    return int(database.sql("SELECT count(*) FROM demo.invoices WHERE status = 'draft'")[0][0])


def _keys(database: Database) -> dict[str, int]:
    rows = database.sql("SELECT status, count(*) FROM toolgate.idempotency_keys GROUP BY status")
    return {status: count for status, count in rows}
