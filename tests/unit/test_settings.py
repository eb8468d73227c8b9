"""Settings (toolgate/settings.py): each read from its variable, named after it but for the few
named otherwise, and every variable documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolgate.settings import ENV_VARS, load_settings

CONFIGURATION = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_variable_is_documented() -> None:
    documented = CONFIGURATION.read_text()
    assert [name for name in ENV_VARS if f"`{name}`" not in documented] == []


def test_a_setting_is_read_from_its_variable_or_the_one_named_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLGATE_BATCH_MAX", "7")
    monkeypatch.setenv("TOOLGATE_AUDIT_WITNESSES", "w1")
    monkeypatch.setenv("KAFKA_HOME", "/opt/kafka")
    monkeypatch.setenv("TOOLGATE_MAX_POLL_INTERVAL_SECONDS", "12")
    monkeypatch.setenv("TOOLGATE_SESSION_TIMEOUT_S", "99")  # no variable sets it
    settings = load_settings(use_runtime=False)
    assert (settings.batch_max, settings.audit_witnesses) == (7, "w1")
    assert (settings.kafka_home, settings.max_poll_interval_s) == (Path("/opt/kafka"), 12.0)
    assert settings.session_timeout_s == 6.0
    assert "TOOLGATE_HOME" in ENV_VARS and "TOOLGATE_KAFKA_HOME" not in ENV_VARS
