"""Avro binary bodies read and written by Python compiled from a schema, for the codec's hot path.

fastavro interprets a schema at every value it reads or writes, a StageRecord has ~40 values,
and every stage reads and writes each call's record. This module turns a parsed schema into
straight-line Python source (one function per named record, every primitive read or written in
place, one-byte varints and short strings without a call), which reads and writes that record in
less time (docs/performance.md, "Figures behind the code").

It covers what toolgate's schemas use: null, boolean, int, long, bytes, string, enum, array,
record, and a union of null with one other type. `compile_codec` raises `Unsupported` for
anything else, and the codec then keeps fastavro for that schema. Only a writer's own schema is
compiled: reading an older release's record (Avro schema resolution) stays with fastavro.

The bytes are fastavro's, value for value: a single block per non-empty array, unions by branch
index, zig-zag varints. A body that ends early, has a negative length, names a branch or
symbol that does not exist, or is not UTF-8 where a string is raises (IndexError, EOFError,
ValueError, UnicodeDecodeError), as fastavro does; the codec turns each into a DecodeError.

A reader returns a record as a dict of its fields, an enum as its symbol, and a writer takes a
record as a mapping of its fields. A `Build` changes both ends: the reader returns what
`build.records[name]` makes of each record's dict and each enum symbol mapped through
`build.enums[name]`; the writer takes each record's fields from `build.values_of(record)` and
writes a field through `build.written[(record, field)]` first. The codec reads and writes its
models this way: no validation again of what the schema enforced, and no dump into dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolgate.schemas.avro_base import Build, Reader, Unsupported, Writer
from toolgate.schemas.avro_reading import Reading
from toolgate.schemas.avro_writing import Writing


class _Compiler(Reading, Writing):
    """Readers and writers of one schema, generated into one namespace."""


def _run(compiler: _Compiler, label: str) -> dict[str, Any]:
    """The namespace the compiler's generated functions are defined in."""
    namespace = dict(compiler.constants)
    source = "\n".join(line for lines in compiler.functions.values() for line in lines)
    exec(compile(source, label, "exec"), namespace)  # our own source, from a schema
    return namespace


def compile_head(schema: Mapping[str, Any], names: frozenset[str], build: Build | None = None) -> Reader:
    """A reader of only the top-level fields `names` of a record of `schema` (a dict of them),
    which reads the body no further than the last of them (`Reading.head`, schemas/avro_reading.py)."""
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise Unsupported("only a record is compiled")
    compiler = _Compiler(schema.get("__named_schemas", {}), build or Build())
    head = compiler.head(schema, names)
    return _run(compiler, f"<avro head of {schema['name']}>")[head]  # type: ignore[no-any-return]


def compile_codec(schema: Mapping[str, Any], build: Build | None = None) -> tuple[Reader, Writer]:
    """A reader and a writer of the body of a record of `schema`, a schema parsed by fastavro
    (named types it refers to by name are in its `__named_schemas`); the reader makes what
    `build` says of each record and enum."""
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise Unsupported("only a record is compiled")
    compiler = _Compiler(schema.get("__named_schemas", {}), build or Build())
    read, write = compiler.reader(schema), compiler.writer(schema)
    namespace = _run(compiler, f"<avro {schema['name']}>")
    return namespace[read], namespace[write]
