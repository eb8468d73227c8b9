"""A stage that falls behind slows its fetch down; it never drops a record.

A validation worker with a tiny stream buffer (as any worker is, relative to a big enough
backlog) against the session's broker and Postgres, on topics and a database of its own: 600
signed proposals arrive far faster than it takes them, and every one comes out on tool.validated.
"""

from __future__ import annotations

from pathlib import Path

from toolgate.client import ToolgateClient
from toolgate.ops.stack.embedded import Broker
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring

from .conftest import Database
from .stage_workers import call_ids_on, publish_fetches, running, worker_env

CALLS = 600


def run_validation_against_backlog(
    database: Database, broker: Broker, prefix: str, home: Path, settings: dict[str, str], calls: int
) -> tuple[int, str]:
    """Start a validation worker with `settings`, publish `calls` signed proposals at once; how
    many never came out on tool.validated within 90 s, and the worker's log."""
    env = worker_env(database, broker, prefix, home, settings)
    with running("validation", env) as log:
        client = ToolgateClient(broker.bootstrap, prefix=prefix, keyring=AgentKeyring(database.home / "agents"))
        sent = publish_fetches(client, calls, "bp")
        seen = call_ids_on(broker.bootstrap, Topics(prefix).validated, sent, timeout=90)
        return len(sent - seen), log.read_text()


def test_a_worker_behind_its_backlog_loses_nothing(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    settings = {"TOOLGATE_STREAM_BUFFER": "16", "TOOLGATE_BATCH_MAX": "8"}
    missing, log = run_validation_against_backlog(database, broker, topic_prefix, tmp_path, settings, CALLS)
    assert missing == 0, f"{missing} of {CALLS} proposals never came out of validation"
    assert "Cannot put" not in log
