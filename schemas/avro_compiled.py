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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as member
from typing import Any

Reader = Callable[[bytes, int], tuple[Any, int]]
Writer = Callable[[bytearray, Any], None]  # a mapping of the fields, or what `Build.values_of` takes

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
PRIMITIVES = frozenset({"null", "boolean", "int", "long", "bytes", "string"})


class Unsupported(ValueError):
    """A schema this compiler does not cover; the caller keeps fastavro for it."""


def read_long(b: bytes, p: int) -> tuple[int, int]:
    """A zig-zag varint at `p`: its value and the position after it."""
    c = b[p]
    p += 1
    n = c & 0x7F
    shift = 7
    while c & 0x80:
        c = b[p]
        p += 1
        n |= (c & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), p


def read_blob(b: bytes, p: int) -> tuple[bytes, int]:
    """The length-prefixed bytes at `p` and the position after them."""
    size, p = read_long(b, p)
    end = p + size
    if size < 0 or end > len(b):
        raise EOFError("a length past the end")
    return b[p:end], end


def write_long(out: bytearray, v: int) -> None:
    if not LONG_MIN <= v <= LONG_MAX:
        raise OverflowError(f"{v} does not fit an Avro long")
    n = (v << 1) ^ (v >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


@dataclass(frozen=True)
class Build:
    """What a reader makes of each record (by full name, from the dict of its fields) and of
    each enum symbol (by the enum's full name): a named type it lacks is read as a dict or a
    symbol. Where a writer finds a record's fields, and what it makes of a field (by record
    and field name) before it writes it."""

    records: Mapping[str, Callable[[dict[str, Any]], Any]] = member(default_factory=dict)
    enums: Mapping[str, Callable[[str], Any]] = member(default_factory=dict)
    values_of: Callable[[Any], Mapping[str, Any]] | None = None
    written: Mapping[tuple[str, str], Callable[[Any], Any]] = member(default_factory=dict)


class _Source:
    """Python source being generated, with indentation and fresh local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.count = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"


class _Compiler:
    def __init__(self, named: Mapping[str, Any], build: Build) -> None:
        self.named = named
        self.build = build
        self.constants: dict[str, Any] = {"read_long": read_long, "read_blob": read_blob, "write_long": write_long}
        self.functions: dict[str, list[str]] = {}
        self._skipping: set[str] = set()  # records being stepped over (`_skip`)

    # --- shared ---------------------------------------------------------------------------

    def _resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            if schema not in self.named:
                raise Unsupported(f"unknown named type {schema!r}")
            return self.named[schema]
        return schema

    def _kind(self, schema: Any) -> str:
        schema = self._resolve(schema)
        if isinstance(schema, str):
            return schema
        if isinstance(schema, list):
            return "union"
        kind = schema.get("type")
        if isinstance(kind, str) and kind in PRIMITIVES and not schema.get("logicalType"):
            return kind
        if kind in ("record", "enum", "array"):
            return str(kind)
        raise Unsupported(f"type {kind!r}")

    def _nullable(self, schema: list[Any]) -> tuple[int, Any]:
        """(index of null, the other branch) of a two-branch union with null."""
        if len(schema) == 2 and "null" in schema:
            null = schema.index("null")
            other = schema[1 - null]
            if self._kind(other) != "union":
                return null, other
        raise Unsupported(f"union {schema!r}")

    def _constant(self, stem: str, value: Any) -> str:
        """A name for `value` in the generated module, unique across all its functions."""
        name = f"{stem}_{len(self.constants)}"
        self.constants[name] = value
        return name

    def _record_function(self, schema: Mapping[str, Any], prefix: str) -> str:
        full = schema["name"]
        return f"{prefix}_{full.replace('.', '_')}"

    # --- readers --------------------------------------------------------------------------

    def reader(self, schema: Mapping[str, Any]) -> str:
        name = self._record_function(schema, "read")
        if name in self.functions:
            return name
        self.functions[name] = []  # claimed first: a record may hold itself
        src = _Source()
        values = []
        for field in schema["fields"]:
            var = src.fresh("v")
            self._read(src, field["type"], var)
            values.append(f"{field['name']!r}: {var}")
        record = f"{{{', '.join(values)}}}"
        make = self.build.records.get(schema["name"])
        if make is not None:
            record = f"{self._constant('MAKE', make)}({record})"
        src.line(f"return {record}, p")
        self.functions[name] = [f"def {name}(b, p):", "    size = len(b)", *src.lines]
        return name

    def _read_varint(self, src: _Source, var: str) -> None:
        src.line("c = b[p]")
        src.line(f"if c < 128: {var} = (c >> 1) ^ -(c & 1); p += 1")
        src.line(f"else: {var}, p = read_long(b, p)")

    def _read_blob(self, src: _Source, var: str, decode: str) -> None:
        """`var` = the bytes (or text) at `p`; a length under 64 is one even byte."""
        start = src.fresh("q")
        src.line("c = b[p]")
        src.line("if not c & 129:")
        src.line(f"    {start} = p + 1; p = {start} + (c >> 1)")
        src.line("    if p > size: raise EOFError('a length past the end')")
        src.line(f"    {var} = {decode.format(f'b[{start}:p]')}")
        src.line(f"else: {var}, p = read_blob(b, p); {var} = {decode.format(var)}")

    def _blocks(self, src: _Source, item: Callable[[], None]) -> None:
        """An array's blocks at `p`, `item` generating what is done with each of their items. A
        block that also says its size in bytes has that size read past."""
        count = src.fresh("k")
        self._read_varint(src, count)
        src.line(f"while {count}:")
        src.depth += 1
        src.line(f"if {count} < 0: {count} = -{count}; _, p = read_long(b, p)")
        src.line(f"for _ in range({count}):")
        src.depth += 1
        item()
        src.depth -= 1
        self._read_varint(src, count)
        src.depth -= 1

    def _read(self, src: _Source, schema: Any, var: str) -> None:
        kind = self._kind(schema)
        schema = self._resolve(schema)
        if kind == "null":
            src.line(f"{var} = None")
        elif kind == "boolean":
            src.line(f"{var} = b[p] != 0; p += 1")
        elif kind in ("int", "long"):
            self._read_varint(src, var)
        elif kind == "bytes":
            self._read_blob(src, var, "bytes({})")
        elif kind == "string":
            self._read_blob(src, var, "{}.decode()")
        elif kind == "enum":
            as_value = self.build.enums.get(schema["name"], str)
            symbols = self._constant("SYMBOLS", tuple(as_value(symbol) for symbol in schema["symbols"]))
            index = src.fresh("i")
            self._read_varint(src, index)
            src.line(f"if {index} < 0: raise ValueError('a negative enum index')")
            src.line(f"{var} = {symbols}[{index}]")
        elif kind == "record":
            src.line(f"{var}, p = {self.reader(schema)}(b, p)")
        elif kind == "array":
            item = src.fresh("x")
            src.line(f"{var} = []")

            def read_item() -> None:
                self._read(src, schema["items"], item)
                src.line(f"{var}.append({item})")

            self._blocks(src, read_item)
        else:  # a union with null
            null, other = self._nullable(schema)
            index = src.fresh("i")
            self._read_varint(src, index)
            src.line(f"if {index} == {null}: {var} = None")
            src.line(f"elif {index} == {1 - null}:")
            src.depth += 1
            self._read(src, other, var)
            src.depth -= 1
            src.line(f"else: raise ValueError('union branch ' + str({index}) + ' does not exist')")

    def head(self, schema: Mapping[str, Any], names: frozenset[str]) -> str:
        """A reader of the leading fields of a record up to the last of `names`: those it
        returns (a dict), the others it steps over without making anything of them; nothing
        after the last is looked at."""
        fields = [field["name"] for field in schema["fields"]]
        if not names or not names <= set(fields):
            raise Unsupported(f"fields {sorted(names - set(fields))} are not in {schema['name']}")
        name = self._record_function(schema, "head")
        src = _Source()
        values = []
        last = max(fields.index(n) for n in names)
        for field in schema["fields"][: last + 1]:
            if field["name"] in names:
                var = src.fresh("v")
                self._read(src, field["type"], var)
                values.append(f"{field['name']!r}: {var}")
            else:
                self._skip(src, field["type"])
        src.line(f"return {{{', '.join(values)}}}, p")
        self.functions[name] = [f"def {name}(b, p):", "    size = len(b)", *src.lines]
        return name

    def _skip_varint(self, src: _Source) -> None:
        src.line("c = b[p]; p += 1")
        src.line("while c & 128: c = b[p]; p += 1")

    def _skip(self, src: _Source, schema: Any) -> None:
        """Step `p` over a value of `schema`, checking what reading it would check of its framing."""
        kind = self._kind(schema)
        schema = self._resolve(schema)
        if kind == "null":
            return
        if kind == "boolean":
            src.line("p += 1")
        elif kind in ("int", "long", "enum"):
            self._skip_varint(src)
        elif kind in ("bytes", "string"):
            length = src.fresh("n")
            self._read_varint(src, length)
            src.line(f"if {length} < 0: raise EOFError('a negative length')")
            src.line(f"p += {length}")
            src.line("if p > size: raise EOFError('a length past the end')")
        elif kind == "record":
            if schema["name"] in self._skipping:
                raise Unsupported(f"a record that holds itself ({schema['name']}) is not stepped over")
            self._skipping.add(schema["name"])
            for field in schema["fields"]:
                self._skip(src, field["type"])
            self._skipping.discard(schema["name"])
        elif kind == "array":

            def skip_item() -> None:
                self._skip(src, schema["items"])
                src.line("pass")

            # Item by item even in a block that also says its size in bytes, as the reader reads
            # it: the size is never trusted to move `p`.
            self._blocks(src, skip_item)
        else:
            null, other = self._nullable(schema)
            index = src.fresh("i")
            self._read_varint(src, index)
            src.line(f"if {index} == {1 - null}:")
            src.depth += 1
            self._skip(src, other)
            src.line("pass")
            src.depth -= 1
            src.line(f"elif {index} != {null}: raise ValueError('union branch ' + str({index}) + ' does not exist')")

    # --- writers --------------------------------------------------------------------------

    def writer(self, schema: Mapping[str, Any]) -> str:
        name = self._record_function(schema, "write")
        if name in self.functions:
            return name
        self.functions[name] = []
        src = _Source()
        if self.build.values_of is not None:
            src.line(f"d = {self._constant('VALUES', self.build.values_of)}(d)")
        for field in schema["fields"]:
            var = src.fresh("v")
            if "default" in field:
                default = self._constant("DEFAULT", field["default"])
                src.line(f"{var} = d.get({field['name']!r}, {default})")
            else:
                src.line(f"{var} = d.get({field['name']!r})")
            written = self.build.written.get((schema["name"], field["name"]))
            if written is not None:
                src.line(f"if {var} is not None: {var} = {self._constant('WRITTEN', written)}({var})")
            self._write(src, field["type"], var)
        self.functions[name] = [f"def {name}(out, d):", *(src.lines or ["    pass"])]
        return name

    def _write_varint(self, src: _Source, value: str) -> None:
        src.line(f"if 0 <= {value} < 64: out.append({value} << 1)")
        src.line(f"else: write_long(out, {value})")

    def _write(self, src: _Source, schema: Any, var: str) -> None:
        kind = self._kind(schema)
        schema = self._resolve(schema)
        if kind == "null":
            src.line(f"if {var} is not None: raise ValueError('not null: ' + repr({var}))")
        elif kind == "boolean":
            src.line(f"out.append(1 if {var} else 0)")
        elif kind in ("int", "long"):
            src.line(f"if {var}.__class__ is not int: {var} = {var}.__index__()")
            self._write_varint(src, var)
        elif kind in ("bytes", "string"):
            blob = src.fresh("s")
            if kind == "string":
                src.line(f"{blob} = {var}.encode()")
            else:
                src.line(f"{blob} = bytes({var})")
            size = src.fresh("n")
            src.line(f"{size} = len({blob})")
            self._write_varint(src, size)
            src.line(f"out += {blob}")
        elif kind == "enum":
            table = self._constant("INDEX", {symbol: i for i, symbol in enumerate(schema["symbols"])})
            small = len(schema["symbols"]) < 64  # every index a one-byte varint
            src.line(f"out.append({table}[{var}] << 1)" if small else f"write_long(out, {table}[{var}])")
        elif kind == "record":
            src.line(f"{self.writer(schema)}(out, {var})")
        elif kind == "array":
            item = src.fresh("x")
            src.line(f"if {var}:")
            src.depth += 1
            size = src.fresh("n")
            src.line(f"{size} = len({var})")
            self._write_varint(src, size)
            src.line(f"for {item} in {var}:")
            src.depth += 1
            self._write(src, schema["items"], item)
            src.depth -= 2
            src.line("out.append(0)")
        else:
            null, other = self._nullable(schema)
            src.line(f"if {var} is None: out.append({null << 1})")
            src.line("else:")
            src.depth += 1
            src.line(f"out.append({(1 - null) << 1})")
            self._write(src, other, var)
            src.depth -= 1


def compile_head(schema: Mapping[str, Any], names: frozenset[str], build: Build | None = None) -> Reader:
    """A reader of only the top-level fields `names` of a record of `schema` (a dict of them),
    which reads the body no further than the last of them (`_Compiler.head`)."""
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise Unsupported("only a record is compiled")
    compiler = _Compiler(schema.get("__named_schemas", {}), build or Build())
    head = compiler.head(schema, names)
    namespace = dict(compiler.constants)
    source = "\n".join(line for lines in compiler.functions.values() for line in lines)
    exec(compile(source, f"<avro head of {schema['name']}>", "exec"), namespace)  # our own source, from a schema
    return namespace[head]  # type: ignore[no-any-return]


def compile_codec(schema: Mapping[str, Any], build: Build | None = None) -> tuple[Reader, Writer]:
    """A reader and a writer of the body of a record of `schema`, a schema parsed by fastavro
    (named types it refers to by name are in its `__named_schemas`); the reader makes what
    `build` says of each record and enum."""
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        raise Unsupported("only a record is compiled")
    compiler = _Compiler(schema.get("__named_schemas", {}), build or Build())
    read, write = compiler.reader(schema), compiler.writer(schema)
    namespace = dict(compiler.constants)
    source = "\n".join(line for lines in compiler.functions.values() for line in lines)
    exec(compile(source, f"<avro {schema['name']}>", "exec"), namespace)  # our own source, from a schema
    return namespace[read], namespace[write]
