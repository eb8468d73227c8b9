"""When a stage writes the keys it holds: at first, at once when they change, else a heartbeat
(workers/runtime/key_holders.py); a rotation takes one silent for three heartbeats as gone."""

from __future__ import annotations

from toolgate.ops.secret_rotation import LIVE_S
from toolgate.store.key_holders import HEARTBEAT_S
from toolgate.workers.runtime.key_holders import due

OLD = ("dk_old", ("dk_old",))
STAGED = ("dk_old", ("dk_new", "dk_old"))


def test_the_first_report_is_written() -> None:
    assert due(OLD, None, 0.0)


def test_unchanged_keys_are_written_only_as_a_heartbeat() -> None:
    assert not due(OLD, (OLD, 100.0), 100.0 + HEARTBEAT_S - 0.1)
    assert due(OLD, (OLD, 100.0), 100.0 + HEARTBEAT_S)


def test_a_staged_key_is_written_at_once() -> None:
    assert due(STAGED, (OLD, 100.0), 100.5)


def test_a_running_stage_is_never_taken_for_gone() -> None:
    assert LIVE_S >= 3 * HEARTBEAT_S
