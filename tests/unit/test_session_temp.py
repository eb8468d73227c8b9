"""The test session's temporary files live apart from every other session's (tests/conftest.py)."""

from __future__ import annotations

import getpass
import tempfile
from pathlib import Path

import pytest


def test_the_session_temp_is_not_the_root_every_session_shares(tmp_path_factory: pytest.TempPathFactory) -> None:
    # pytest's default root is set back to 0700 by every session that starts; the embedded
    # Postgres of a session run as root reaches its data through it as another user.
    shared = Path(tempfile.gettempdir()).resolve() / f"pytest-of-{getpass.getuser()}"
    base = tmp_path_factory.getbasetemp().resolve()
    assert shared != base and shared not in base.parents
