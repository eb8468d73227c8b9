"""The end-to-end tier's order: the modules that never ask for the session's pipeline (each runs
a `toolgate up` of its own, or none) run first, before that pipeline starts.

The session's pipeline starts at the first test that asks for it and runs to the session's end.
A module that starts its own stack while it runs shares the machine's cores with it: on three
Kafka nodes, six JVMs at once (the restart test took 286 s so, 191 s alone). Whole modules
move, in their order, so that a module's fixtures are set up once.

`no_restarts`, for a test that sends what might stop a stage: every worker of the session's
pipeline is the same process after the test as before it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import Pipeline

HERE = Path(__file__).resolve().parent
SESSION_PIPELINE = "pipeline"


def own_stacks_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items`, the modules none of whose tests asks for the session's pipeline first (a stable
    order otherwise)."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    uses = {path: any(SESSION_PIPELINE in getattr(i, "fixturenames", ()) for i in its) for path, its in modules.items()}
    return [item for path, its in sorted(modules.items(), key=lambda entry: uses[entry[0]]) for item in its]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    ours = [item.path.resolve().parent == HERE for item in items]
    ordered = iter(own_stacks_first([item for item, mine in zip(items, ours, strict=True) if mine]))
    items[:] = [next(ordered) if mine else item for item, mine in zip(items, ours, strict=True)]


@pytest.fixture
def no_restarts(pipeline: Pipeline) -> Iterator[None]:
    """The workers of the session are the same processes after the test as before it."""
    before = dict(pipeline.refresh_runtime()["workers"])
    restarts = (pipeline.home / "up.out").read_text().count("restarting")
    yield
    time.sleep(1.0)
    assert pipeline.refresh_runtime()["workers"] == before, "a worker restarted"
    assert (pipeline.home / "up.out").read_text().count("restarting") == restarts
