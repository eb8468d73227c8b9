"""The gauges' kept clients (ops/gauge_readers.py) against the session's pipeline: the open dead
letters they count, as the topic grows and as operators act, are what `toolgate status` counts;
one Postgres connection serves every sample, and another is made once Postgres ended it."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from toolgate.ops import dlq, status
from toolgate.ops.gauge_readers import Readers
from toolgate.topics.catalog import Topics

from ..conftest import Pipeline, eventually


@pytest.fixture
def readers(pipeline: Pipeline) -> Iterator[Readers]:
    kept = Readers(pipeline.settings)
    yield kept
    kept.close()


def agree(pipeline: Pipeline, readers: Readers, expected: int | None = None) -> int:
    """The open letters both count, once they agree (and equal `expected`, if given)."""

    def both() -> int | None:
        tallied, counted = readers.open_letters(), status.dead_letters(pipeline.settings).open
        return tallied if tallied == counted and expected in (None, tallied) else None

    found: int = eventually(lambda: (value := both()) is not None and (value,), timeout=30.0)[0]
    return found


def test_the_open_letters_counted_as_the_topic_grows_and_operators_act_are_what_status_counts(
    pipeline: Pipeline, readers: Readers
) -> None:
    before = agree(pipeline, readers)
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    for _ in range(3):
        pipeline.client.publish_raw(Topics().proposals, run_id.encode(), secrets.token_bytes(48))
    pipeline.client.flush()
    assert agree(pipeline, readers, before + 3) == before + 3
    mine = [r for r in dlq.listed(pipeline.settings) if r["bytes"] == 48 and r["state"] == "open"]
    assert pipeline.cli("dlq", "discard", mine[0]["dead_letter_id"], "--note", "gauge test").returncode == 0
    assert agree(pipeline, readers, before + 2) == before + 2


def test_a_dead_letter_topic_whose_log_started_over_is_tallied_again_from_its_beginning(
    pipeline: Pipeline, readers: Readers
) -> None:
    # The embedded broker keeps its logs in memory: restarted, it makes the topic again, and the
    # tally reads from past its end (topics/ends.py names such a partition lost, on either
    # broker). Before, on the embedded Tansu, the tally neither counted the letters written since
    # nor forgot the ones lost: the gauge disagreed with `toolgate status`.
    before = agree(pipeline, readers)
    tally = readers.tally()
    tally.next = dict.fromkeys(tally.next, 1_000_000)  # where a longer log, now lost, had ended
    run_id = f"run_{uuid.uuid4().hex[:10]}"
    pipeline.client.publish_raw(Topics().proposals, run_id.encode(), secrets.token_bytes(48))
    pipeline.client.flush()
    assert agree(pipeline, readers, before + 1) == before + 1
    assert max(tally.next.values()) < 1_000_000


def test_one_postgres_connection_serves_the_samples_and_another_follows_one_postgres_ended(
    pipeline: Pipeline, readers: Readers
) -> None:
    first = readers.postgres()
    backend = first.info.backend_pid
    status.backlogs(pipeline.settings, readers.postgres())
    assert readers.postgres() is first and first.info.backend_pid == backend
    pipeline.sql("SELECT pg_terminate_backend(%s)", (backend,))
    with pytest.raises(psycopg.OperationalError):
        status.backlogs(pipeline.settings, readers.postgres())  # this sample fails: counted, kept as it was
    again = readers.postgres()
    assert again is not first and again.info.backend_pid != backend
    status.backlogs(pipeline.settings, again)
