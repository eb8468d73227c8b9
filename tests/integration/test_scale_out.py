"""Two workers of a stage share its consumer group, and one leaving mid-backlog loses nothing.

Scaling out is more worker processes of a stage (docs/deployment.md). When a
worker joins, the group's partitions are split between the two; when one stops (SIGTERM), the
other is given its partitions and starts from the offsets the leaver committed at close: the
rounds it finished are not lost and the ones it had not are consumed again
(workers/runtime/consumer.py). Against the session's broker and Postgres, on topics and a
database of the module's own.
"""

from __future__ import annotations

from pathlib import Path

from toolgate.client import ToolgateClient
from toolgate.ops.stack.embedded import Broker
from toolgate.topics.catalog import Topics
from toolgate.trust.agent_keys import AgentKeyring

from .conftest import Database
from .stage_workers import call_ids_on, publish_fetches, running, worker_env

CALLS = 1500


def test_a_worker_leaving_its_group_mid_backlog_hands_every_call_to_the_other(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    env = worker_env(database, broker, topic_prefix, tmp_path, {"TOOLGATE_BATCH_MAX": "8"})
    validated = Topics(topic_prefix).validated
    client = ToolgateClient(broker.bootstrap, prefix=topic_prefix, keyring=AgentKeyring(database.home / "agents"))
    with running("validation", env) as log:
        with running("validation", env):
            sent = publish_fetches(client, CALLS, "so")
            # The second worker leaves once the backlog is under way, not before it began.
            started = call_ids_on(broker.bootstrap, validated, sent, timeout=30, enough=100)
            assert len(started) >= 100, log.read_text()[-3000:]
        seen = call_ids_on(broker.bootstrap, validated, sent, timeout=90)
    assert not sent - seen, f"{len(sent - seen)} of {CALLS} proposals never came out of validation"
