"""A parsed value's JSON type, as JSON Schema counts it: one answer for compatibility and validation."""

from __future__ import annotations

import jsonschema
import pytest

from toolgate.contracts.json_types import json_type


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "null"),
        (True, "boolean"),
        (0, "integer"),
        (1.0, "integer"),
        (1.5, "number"),
        ("1", "string"),
        ([], "array"),
        ({}, "object"),
    ],
)
def test_json_type(value: object, kind: str) -> None:
    assert json_type(value) == kind


@pytest.mark.parametrize("value", [None, True, False, 0, 7, 1.0, -2.0, 1.5, "x", [], {}])
def test_json_type_agrees_with_the_validator(value: object) -> None:
    """The type named is one the JSON Schema validator itself accepts the value as."""
    assert jsonschema.Draft202012Validator({"type": json_type(value)}).is_valid(value)
