"""Reading a record whose text is not all UTF-8 (the codec's `decode_lenient`): an Avro string is
its length and its bytes, exactly as Avro bytes are, so the record is read with every string
taken as bytes, then each decoded: the top-level fields asked for keep bytes that are not UTF-8
as lone surrogates (`surrogateescape`), any other raises."""

from __future__ import annotations

import io
from typing import Any

from fastavro import schemaless_reader


def read_lenient(data: bytes, start: int, writer: Any, fields: frozenset[str]) -> tuple[dict[str, Any], int]:
    """The record at `start` of `data`, written with the parsed schema `writer`, as its fields'
    values with every string decoded (`fields` leniently); and where the record ended."""
    raw = strings_as_bytes(writer)
    buf = io.BytesIO(data)
    buf.seek(start)
    record = schemaless_reader(buf, raw, raw)
    if not isinstance(record, dict) or not isinstance(writer, dict):
        raise ValueError("not a record")
    texts = {
        f["name"]: _texts(f["type"], record[f["name"]], {}, "surrogateescape" if f["name"] in fields else "strict")
        for f in writer["fields"]
    }
    return texts, buf.tell()


def strings_as_bytes(schema: Any) -> Any:
    """A parsed schema with every `string` read as `bytes` (the same binary encoding)."""
    if schema == "string":
        return "bytes"
    if isinstance(schema, list):
        return [strings_as_bytes(s) for s in schema]
    if isinstance(schema, dict):
        return {
            k: (strings_as_bytes(v) if k in ("type", "fields", "items", "values") else v) for k, v in schema.items()
        }
    return schema


def _texts(schema: Any, value: Any, named: dict[str, Any], errors: str) -> Any:
    """Undo `strings_as_bytes` on a value read with it: every string back to text (bytes that
    are not UTF-8 raise, or with `surrogateescape` are kept as lone surrogates)."""
    if isinstance(schema, str):
        if schema == "string" and isinstance(value, bytes):
            return value.decode("utf-8", errors)
        return _texts(named[schema], value, named, errors) if schema in named else value
    if isinstance(schema, list):  # a union: the branch the value was read as
        for branch in schema:
            if branch == "null" and value is None:
                return None
        branches = [b for b in schema if b != "null"]
        return _texts(branches[0], value, named, errors) if len(branches) == 1 else value
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record":
            named[schema["name"]] = schema
            return {f["name"]: _texts(f["type"], value[f["name"]], named, errors) for f in schema["fields"]}
        if kind == "array":
            return [_texts(schema["items"], v, named, errors) for v in value]
        if kind == "map":
            return {k: _texts(schema["values"], v, named, errors) for k, v in value.items()}
        if isinstance(kind, str | list | dict):
            return _texts(kind, value, named, errors)
    return value
