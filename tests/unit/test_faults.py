"""The chaos suite's crash points (toolgate/faults.py): off unless named, refused when misspelt,
and a named point reached with chance 1 is a SIGKILL of its own process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from toolgate.faults import ENV, POINTS, parse

REACH = "from toolgate.faults import crash_point; crash_point({point!r}); print('survived')"


def test_points_and_chances_are_read_and_a_bare_point_always_fires() -> None:
    assert parse("") == {}
    assert parse("execution.after_http_effect=0.02, relay.during_publish") == {
        "execution.after_http_effect": 0.02,
        "relay.during_publish": 1.0,
    }


@pytest.mark.parametrize("text", ["execution.after_effect=0.1", "relay.during_publish=2", "stage.after_produce=-1"])
def test_a_misspelt_point_or_an_impossible_chance_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=ENV):
        parse(text)


def _reach(point: str, faults: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if faults is not None:
        env[ENV] = faults
    return subprocess.run(
        [sys.executable, "-c", REACH.format(point=point)], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_point_named_with_chance_one_kills_its_process_and_nothing_else_does(point: str) -> None:
    assert _reach(point, f"{point}=1").returncode == -signal.SIGKILL
    other = next(iter(POINTS - {point}))
    for faults in (None, f"{other}=1", f"{point}=0"):
        done = _reach(point, faults)
        assert (done.returncode, done.stdout.strip()) == (0, "survived"), faults
