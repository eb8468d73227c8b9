"""The embedded broker as `toolgate up` and the tests start it (ops/embedded.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolgate.ops.embedded import Broker, broker_environment


def environment_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)


def test_the_broker_runs_its_async_runtime_on_one_thread(broker: Broker) -> None:
    assert environment_of(broker.process.pid)["TOKIO_WORKER_THREADS"] == "1"


def test_an_operator_may_give_the_broker_more_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKIO_WORKER_THREADS", "4")
    assert broker_environment()["TOKIO_WORKER_THREADS"] == "4"
