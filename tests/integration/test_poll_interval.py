"""A stage deep in a backlog stays in its consumer group.

On Faust, aiokafka left the group when its consumer had not been polled for `max_poll_interval`,
and did not rejoin while it stayed unpolled; Faust polled again only once it had handed every
record of the last poll to the stage, so one poll that returned a whole backlog kept the consumer
unpolled for longer than that. Seen in a 100,000-call benchmark: the validation worker left its
group 90 s in and stayed up, ready and idle, 52,855 proposals behind. The stages' consumer now
(workers/runtime/consumer.py) is polled before every round and takes at most a round's worth of
proposals (`batch_max`), or a few StageBatches (workers/runtime/filling.py; test_execution_backlog
for the rounds that follow).

A validation worker with a small buffer and the shortest poll interval librdkafka accepts (it
raises the 2 s asked for to the 6 s session timeout), against the session's broker and Postgres
on topics and a database of its own: 1,500 proposals arrive at once, and every one comes out on
tool.validated.
"""

from __future__ import annotations

from pathlib import Path

from toolgate.ops.stack.embedded import Broker

from .conftest import Database
from .test_backpressure import run_validation_against_backlog

CALLS = 1500


def test_a_worker_deep_in_a_backlog_keeps_its_partitions(
    database: Database, broker: Broker, topic_prefix: str, tmp_path: Path
) -> None:
    settings = {
        "TOOLGATE_STREAM_BUFFER": "16",
        "TOOLGATE_BATCH_MAX": "8",
        "TOOLGATE_MAX_POLL_INTERVAL_SECONDS": "2",
    }
    missing, log = run_validation_against_backlog(database, broker, topic_prefix, tmp_path, settings, CALLS)
    assert missing == 0, f"{missing} of {CALLS} proposals never came out of validation\n{log[-3000:]}"
