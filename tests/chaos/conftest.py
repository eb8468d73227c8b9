"""Every test in this folder is a chaos test: marked `chaos`, so the plain `python -m pytest`
leaves them out and `python -m pytest -m chaos` (its own step in .ci/run) runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.chaos)
