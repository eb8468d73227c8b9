"""Which CPUs the embedded broker runs on (ops/stack/embedded.py, `broker_cpus`)."""

from __future__ import annotations

import pytest

from toolgate.ops.stack.embedded import broker_cpus


def test_by_default_the_broker_runs_on_the_first_cpu_it_may_use() -> None:
    assert broker_cpus("", {0, 1}) == {0}
    assert broker_cpus("", {2, 3, 5}) == {2}


def test_all_leaves_the_broker_unpinned() -> None:
    assert broker_cpus("all", {0, 1}) is None
    assert broker_cpus(" ALL ", {0, 1}) is None


def test_a_list_of_cpus_and_ranges() -> None:
    assert broker_cpus("1", {0, 1}) == {1}
    assert broker_cpus("0,2-3", {0, 1, 2, 3}) == {0, 2, 3}


@pytest.mark.parametrize("spec", ["2", "0-2", "one", "1-", ","])
def test_cpus_it_may_not_use_or_cannot_read_are_refused_by_name(spec: str) -> None:
    with pytest.raises(SystemExit, match="TOOLGATE_BROKER_CPUS"):
        broker_cpus(spec, {0, 1})
