"""The reference observation schema (the seeds' observation object), as shipped in the package."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def observation_schema() -> dict[str, Any]:
    """A freshly parsed copy of reference/observation.schema.json."""
    text = resources.files("toolgate.schemas").joinpath("reference/observation.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema
