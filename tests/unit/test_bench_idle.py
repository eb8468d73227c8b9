"""`toolgate bench --idle`: CPU seconds as shares of a core, grouped by what spent them."""

from __future__ import annotations

from toolgate.ops.bench.cpu import SUPERVISOR, processes
from toolgate.ops.bench.idle import grouped, share

RUNTIME = {
    "pid": 100,
    "workers": {"validation": 101, "policy": 102, "provider": 103},
    "infrastructure": {"kafka-1": 201, "kafka-2": 202, "postgres": 203},
}


def test_cpu_seconds_over_a_window_are_percent_of_one_core() -> None:
    assert share({"validation": 0.3, "kafka-1": 6.0}, 30.0) == {"validation": 1.0, "kafka-1": 20.0}


def test_the_broker_is_every_node_and_toolgate_every_process_of_its_own() -> None:
    percent = {"validation": 0.5, "policy": 0.25, "provider": 0.0, SUPERVISOR: 0.1}
    percent |= {"kafka-1": 10.0, "kafka-2": 12.0, "postgres": 0.4}
    assert grouped(percent, RUNTIME) == {"broker": 22.0, "postgres": 0.4, "toolgate": 0.85}


def test_tansu_is_the_broker_too() -> None:
    runtime = {"workers": {"execution": 1}, "infrastructure": {"broker": 2, "postgres": 3}}
    assert grouped({"execution": 1.0, "broker": 15.0, "postgres": 0.5}, runtime) == {
        "broker": 15.0,
        "postgres": 0.5,
        "toolgate": 1.0,
    }


def test_the_supervisor_is_measured_only_when_asked() -> None:
    assert SUPERVISOR not in processes(RUNTIME)
    assert processes(RUNTIME, supervisor=True)[SUPERVISOR] == 100
