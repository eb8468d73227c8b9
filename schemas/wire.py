"""The base of every wire model and the JSON-carrying field type.

A JSON field is a string on the Avro wire and a dict in process: the codec writes it as
compact JSON with sorted keys, and the model parses it back when it validates. Hashes that
outsiders must recompute (payload hashes, approval signatures) use `canonical_json`, the
RFC 8785 form.

orjson writes and reads this JSON several times faster than the standard library
(docs/performance.md, "Figures behind the code"), and every stage writes and reads JSON fields
of every call. Where orjson's answer could differ from the standard library's,
the standard library gives it: orjson refuses an integer beyond 64 bits, a lone surrogate, a key
that is not a string, and text that is not strict JSON, and it would read an integer beyond 64
bits as a float, so text with a run of 19 digits is read by the standard library. Floats are
written in their shortest round-trip form by both, with different exponent spelling (`1e-7`
where the standard library writes `1e-07`): the same value, and RFC 8785's own form in
`canonical_json`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Self

import orjson
import rfc8785
from pydantic import BaseModel, BeforeValidator, ConfigDict

MAX_SAFE_INTEGER = 2**53 - 1


def _plain(value: Any) -> bool:
    """True when sorted, compact `json.dumps` already is the RFC 8785 form of `value`:
    no floats (number formatting differs), integers within IEEE 754's exact range, keys
    and strings in the Basic Multilingual Plane (JCS sorts keys by UTF-16 code units).

    A loop over a stack, not a recursion through generators: every payload hash and audit entry
    asks this of a whole document, and the loop answers it faster
    (docs/performance.md, "Figures behind the code")."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and not _bmp(v):
                return False
        elif isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str) or not (k.isascii() or _bmp(k)):
                    return False
                stack.append(item)
        elif isinstance(v, list):
            stack.extend(v)
        elif v is None or isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                return False
        else:
            return False
    return True


def _bmp(text: str) -> bool:
    """No character beyond the Basic Multilingual Plane, and no lone surrogate."""
    return max(text) <= "\uffff" and not any("\ud800" <= ch <= "\udfff" for ch in text)


# Sorted compact JSON, one encoder for every call: `json.dumps` with any argument builds a new
# one each time, a good part of what a small object takes
# (docs/performance.md, "Figures behind the code").
_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# What orjson would write where the standard library refuses (a datetime, a dataclass) it
# hands back, and so refuses too.
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def canonical_json(value: Any) -> str:
    """RFC 8785 (JCS) canonical JSON text of a JSON value."""
    if _plain(value):
        return compact_json(value)
    return rfc8785.dumps(value).decode("utf-8")


def compact_json(value: Any) -> str:
    """Deterministic compact JSON (sorted keys), the wire form of a JSON field."""
    try:
        return orjson.dumps(value, option=_SORTED).decode()
    except orjson.JSONEncodeError:
        return _COMPACT.encode(value)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# One decoder for every JSON field: `json.loads` with an argument builds a new one per call.
_JSON = json.JSONDecoder(parse_constant=_not_json)
# An integer that may not fit 64 bits has 19 digits or more (2**63 has 19): digits turned to 0,
# a run of 19 zeros finds one, faster than a regular expression
# (docs/performance.md, "Figures behind the code").
_ZEROED = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def _loads(text: str) -> Any:
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return _JSON.decode(text)
    if _LONG_RUN not in data.translate(_ZEROED):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # the standard library's answer, or its error
    return _JSON.decode(text)


def json_object(text: str) -> dict[str, Any]:
    """The JSON object `text` holds; ValueError (RecursionError when nested too deep) for
    anything else, as a JSON field's validation refuses it."""
    value = _loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON field holds {type(value).__name__}, not an object")
    return value


def _from_wire(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        value = value.decode(json.detect_encoding(value), "surrogatepass")  # as json.loads does
    if isinstance(value, str):
        return _loads(value)
    return value


JsonObject = Annotated[dict[str, Any], BeforeValidator(_from_wire)]


def field_of(model: object, name: str) -> Any:
    """`model`'s field `name`, or that of the call it carries (a StageRecord's `call`), or None
    when neither has it. `getattr` with a default is slow for a name a pydantic model lacks (its
    slow path raises and catches inside), this is not (docs/performance.md, "Figures behind the
    code"): stages read optional fields of every call this way."""
    fields = getattr(model, "__dict__", {})
    if name in fields:
        return fields[name]
    call = fields.get("call")
    return None if call is None else call.__dict__.get(name)


# Where a record whose schema says `"kept": true` keeps the bytes it was read from (its Avro body,
# in its model's `__dict__`, beside its fields): the codec writes that record again by copying
# them. A model is frozen, so they stay its encoding; a copy with changes drops them (and no stage
# changes a message's dict in place).
KEPT = "_wire"


class WireModel(BaseModel):
    """A toolgate message: frozen, closed, and mapped one-to-one onto an Avro record."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    avro_name: ClassVar[str]  # the Avro record's full name; every generated model sets it

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's copy, which refuses to change a field the model lacks; one with changes no
        longer holds the bytes it was read from (KEPT)."""
        if update and not update.keys() <= type(self).model_fields.keys():
            unknown = sorted(set(update) - set(type(self).model_fields))
            raise TypeError(f"{type(self).__name__} has no fields {unknown}")
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy.__dict__.pop(KEPT, None)
        return copy

    @classmethod
    def built(cls, values: dict[str, Any]) -> Self:
        """The model of `values`, which hold every field, each already of its field's type (the
        codec's compiled reader, whose schema enforced them), not validated again. It sets
        what `model_construct` sets, without that method's search for aliases and defaults, in a
        fraction of `model_construct`'s time or validation's
        (docs/performance.md, "Figures behind the code")."""
        model = _new(cls)
        _set(model, "__dict__", values)
        _fields_set(model, set(values))
        _extra(model, None)
        _private(model, None)
        return model


# How pydantic sets a model's state, without looking each name up again for every model built
# (docs/performance.md, "Figures behind the code").
_new = object.__new__
_set = object.__setattr__
_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_private = BaseModel.__dict__["__pydantic_private__"].__set__
