"""The JSON type of a parsed value, as JSON Schema 2020-12 counts it.

One answer for every place that asks: contract compatibility (which types an enum or const
covers) and validation's field errors ("expected string, got integer"). As in JSON Schema, a
number with no fractional part is an integer (1.0 is), and a bool is never a number.
"""

from __future__ import annotations


def json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
