"""The base of every wire model and the JSON-carrying field type.

A JSON field is a string on the Avro wire and a dict in process: the codec writes it as
compact JSON with sorted keys, and the model parses it back when it validates. Hashes that
outsiders must recompute (payload hashes, approval signatures) use `canonical_json`, the
RFC 8785 form.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

import rfc8785
from pydantic import BaseModel, BeforeValidator, ConfigDict

MAX_SAFE_INTEGER = 2**53 - 1


def _plain(value: Any) -> bool:
    """True when sorted, compact `json.dumps` already is the RFC 8785 form of `value`:
    no floats (number formatting differs), integers within IEEE 754's exact range, keys
    and strings in the Basic Multilingual Plane (JCS sorts keys by UTF-16 code units)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if isinstance(value, str):
        return value.isascii() or (max(value) <= "\uffff" and not any("\ud800" <= ch <= "\udfff" for ch in value))
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(k) and _plain(v) for k, v in value.items())
    return False


# Sorted compact JSON, one encoder for every call: `json.dumps` with any argument builds a new
# one each time (~3 µs of the 5-10 µs a small object takes).
_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS) canonical JSON text of a JSON value."""
    if _plain(value):
        return _COMPACT.encode(value)
    return rfc8785.dumps(value).decode("utf-8")


def compact_json(value: Any) -> str:
    """Deterministic compact JSON (sorted keys), the wire form of a JSON field."""
    return _COMPACT.encode(value)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every JSON field: `json.loads` with an argument builds a new one per call.
_JSON = json.JSONDecoder(parse_constant=_not_json)


def _from_wire(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        value = value.decode(json.detect_encoding(value), "surrogatepass")  # as json.loads does
    if isinstance(value, str):
        return _JSON.decode(value)
    return value


JsonObject = Annotated[dict[str, Any], BeforeValidator(_from_wire)]


def field_of(model: object, name: str) -> Any:
    """`model`'s field `name`, or None when it has none. `getattr` with a default costs ~9 µs
    for a name a pydantic model lacks (its slow path raises and catches inside), 0.2 µs here:
    stages read optional fields of every call this way."""
    return getattr(model, "__dict__", {}).get(name)


class WireModel(BaseModel):
    """A toolgate message: frozen, closed, and mapped one-to-one onto an Avro record."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    avro_name: ClassVar[str]  # the Avro record's full name; every generated model sets it
