"""The package's public API (README, "From Python"): the clients, importable from `toolgate`'s
root, the same objects as in `toolgate.client`, and loaded only when asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import toolgate
import toolgate.client

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_root_names_the_clients() -> None:
    from toolgate import ApprovalClient, Draft, Observed, Proposed, ToolgateClient

    assert (ToolgateClient, ApprovalClient, Draft, Proposed, Observed) == (
        toolgate.client.ToolgateClient,
        toolgate.client.ApprovalClient,
        toolgate.client.Draft,
        toolgate.client.Proposed,
        toolgate.client.Observed,
    )
    assert sorted(toolgate.__all__) == sorted(toolgate.client.__all__)


def test_a_name_the_root_does_not_have_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Pipeline'"):
        toolgate.Pipeline  # noqa: B018


def test_the_readme_shows_every_public_name() -> None:
    text = README.read_text(encoding="utf-8")
    assert "from toolgate import ToolgateClient" in text
    for name in toolgate.__all__:
        assert name in text, name


def test_a_module_of_the_foundation_does_not_load_the_client() -> None:
    # A worker imports the foundation (toolgate.settings, ...) and never the client library.
    code = "import sys, toolgate.settings; print('toolgate.client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
