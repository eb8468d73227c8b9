"""The base of every wire model and the JSON-carrying field type.

A JSON field is a string on the Avro wire and a dict in process: the codec writes it as
compact JSON with sorted keys, and the model parses it back when it validates. Hashes that
outsiders must recompute (payload hashes, approval signatures) use `canonical_json`, the
RFC 8785 form.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import rfc8785
from pydantic import BaseModel, BeforeValidator, ConfigDict


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS) canonical JSON text of a JSON value."""
    return rfc8785.dumps(value).decode("utf-8")


def compact_json(value: Any) -> str:
    """Deterministic compact JSON (sorted keys), the wire form of a JSON field."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _from_wire(value: Any) -> Any:
    if isinstance(value, str | bytes | bytearray):
        return json.loads(value)
    return value


JsonObject = Annotated[dict[str, Any], BeforeValidator(_from_wire)]


class WireModel(BaseModel):
    """A toolgate message: frozen, closed, and mapped one-to-one onto an Avro record."""

    model_config = ConfigDict(frozen=True, extra="forbid")
