"""What the Avro compiler (schemas/avro_compiled.py) shares between reading and writing: the
varints every generated function calls, the `Build` that says what a record becomes, the source
being generated, and the resolution of a schema into the kinds the compiler covers."""

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
    # A record whose schema says `"kept": true`: the reader hands `kept(made, body)` its body's bytes
    # beside what it made of it, and the writer writes `kept_of(record)` as they are, when not None.
    kept: Callable[[Any, bytes], Any] | None = None
    kept_of: Callable[[Any], bytes | None] | None = None


class Source:
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


class CompilerBase:
    """The state of one compilation and the resolution every reader and writer uses."""

    def __init__(self, named: Mapping[str, Any], build: Build) -> None:
        self.named = named
        self.build = build
        self.constants: dict[str, Any] = {"read_long": read_long, "read_blob": read_blob, "write_long": write_long}
        self.functions: dict[str, list[str]] = {}
        self._skipping: set[str] = set()  # records being stepped over (`_skip`)

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            if schema not in self.named:
                raise Unsupported(f"unknown named type {schema!r}")
            return self.named[schema]
        return schema

    def kind(self, schema: Any) -> str:
        schema = self.resolve(schema)
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

    def nullable(self, schema: list[Any]) -> tuple[int, Any]:
        """(index of null, the other branch) of a two-branch union with null."""
        if len(schema) == 2 and "null" in schema:
            null = schema.index("null")
            other = schema[1 - null]
            if self.kind(other) != "union":
                return null, other
        raise Unsupported(f"union {schema!r}")

    def constant(self, stem: str, value: Any) -> str:
        """A name for `value` in the generated module, unique across all its functions."""
        name = f"{stem}_{len(self.constants)}"
        self.constants[name] = value
        return name

    def record_function(self, schema: Mapping[str, Any], prefix: str) -> str:
        full = schema["name"]
        return f"{prefix}_{full.replace('.', '_')}"
