"""The readers the Avro compiler generates: a whole record, the leading fields of one (a
head), and stepping over a value without making anything of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from toolgate.schemas.avro_base import CompilerBase, Source, Unsupported


class Reading(CompilerBase):
    def reader(self, schema: Mapping[str, Any]) -> str:
        name = self.record_function(schema, "read")
        if name in self.functions:
            return name
        self.functions[name] = []  # claimed first: a record may hold itself
        src = Source()
        kept = self.build.kept is not None and schema.get("kept")
        if kept:
            src.line("start = p")
        values = []
        for field in schema["fields"]:
            var = src.fresh("v")
            self._read(src, field["type"], var)
            values.append(f"{field['name']!r}: {var}")
        record = f"{{{', '.join(values)}}}"
        make = self.build.records.get(schema["name"])
        if make is not None:
            record = f"{self.constant('MAKE', make)}({record})"
        if kept:
            record = f"{self.constant('KEEP', self.build.kept)}({record}, b[start:p])"
        src.line(f"return {record}, p")
        self.functions[name] = [f"def {name}(b, p):", "    size = len(b)", *src.lines]
        return name

    def _read_varint(self, src: Source, var: str) -> None:
        src.line("c = b[p]")
        src.line(f"if c < 128: {var} = (c >> 1) ^ -(c & 1); p += 1")
        src.line(f"else: {var}, p = read_long(b, p)")

    def _read_blob(self, src: Source, var: str, decode: str) -> None:
        """`var` = the bytes (or text) at `p`; a length under 64 is one even byte."""
        start = src.fresh("q")
        src.line("c = b[p]")
        src.line("if not c & 129:")
        src.line(f"    {start} = p + 1; p = {start} + (c >> 1)")
        src.line("    if p > size: raise EOFError('a length past the end')")
        src.line(f"    {var} = {decode.format(f'b[{start}:p]')}")
        src.line(f"else: {var}, p = read_blob(b, p); {var} = {decode.format(var)}")

    def _blocks(self, src: Source, item: Callable[[], None]) -> None:
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

    def _read(self, src: Source, schema: Any, var: str) -> None:
        kind = self.kind(schema)
        schema = self.resolve(schema)
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
            symbols = self.constant("SYMBOLS", tuple(as_value(symbol) for symbol in schema["symbols"]))
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
            null, other = self.nullable(schema)
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
        after the last is looked at. A name `a.b` reads field `b` of the record in field `a`, as
        a dict of such names, only when `a` is the last field read."""
        wanted: dict[str, set[str]] = {}
        for dotted in names:
            top, _, inner = dotted.partition(".")
            wanted.setdefault(top, set()).update([inner] if inner else [])
        fields = [field["name"] for field in schema["fields"]]
        if not names or not wanted.keys() <= set(fields):
            raise Unsupported(f"fields {sorted(wanted.keys() - set(fields))} are not in {schema['name']}")
        name = self.record_function(schema, "head")
        src = Source()
        values = []
        last = max(fields.index(n) for n in wanted)
        for field in schema["fields"][: last + 1]:
            if field["name"] not in wanted:
                self._skip(src, field["type"])
                continue
            var = src.fresh("v")
            if parts := wanted[field["name"]]:
                if fields.index(field["name"]) != last or self.kind(field["type"]) != "record":
                    raise Unsupported(f"{field['name']}: only the last field read, a record, is read in part")
                src.line(f"{var}, p = {self.head(self.resolve(field['type']), frozenset(parts))}(b, p)")
            else:
                self._read(src, field["type"], var)
            values.append(f"{field['name']!r}: {var}")
        src.line(f"return {{{', '.join(values)}}}, p")
        self.functions[name] = [f"def {name}(b, p):", "    size = len(b)", *src.lines]
        return name

    def _skip_varint(self, src: Source) -> None:
        src.line("c = b[p]; p += 1")
        src.line("while c & 128: c = b[p]; p += 1")

    def _skip(self, src: Source, schema: Any) -> None:
        """Step `p` over a value of `schema`, checking what reading it would check of its framing."""
        kind = self.kind(schema)
        schema = self.resolve(schema)
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
            null, other = self.nullable(schema)
            index = src.fresh("i")
            self._read_varint(src, index)
            src.line(f"if {index} == {1 - null}:")
            src.depth += 1
            self._skip(src, other)
            src.line("pass")
            src.depth -= 1
            src.line(f"elif {index} != {null}: raise ValueError('union branch ' + str({index}) + ' does not exist')")
