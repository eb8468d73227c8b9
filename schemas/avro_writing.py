"""The writers the Avro compiler generates: a record's fields, each written in place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolgate.schemas.avro_base import CompilerBase, Source


class Writing(CompilerBase):
    def writer(self, schema: Mapping[str, Any]) -> str:
        name = self.record_function(schema, "write")
        if name in self.functions:
            return name
        self.functions[name] = []
        src = Source()
        if self.build.kept_of is not None and schema.get("kept"):
            src.line(f"w = {self.constant('KEPT', self.build.kept_of)}(d)")
            src.line("if w is not None:")
            src.line("    out += w")
            src.line("    return")
        if self.build.values_of is not None:
            src.line(f"d = {self.constant('VALUES', self.build.values_of)}(d)")
        for field in schema["fields"]:
            var = src.fresh("v")
            if "default" in field:
                default = self.constant("DEFAULT", field["default"])
                src.line(f"{var} = d.get({field['name']!r}, {default})")
            else:
                src.line(f"{var} = d.get({field['name']!r})")
            written = self.build.written.get((schema["name"], field["name"]))
            if written is not None:
                src.line(f"if {var} is not None: {var} = {self.constant('WRITTEN', written)}({var})")
            self._write(src, field["type"], var)
        self.functions[name] = [f"def {name}(out, d):", *(src.lines or ["    pass"])]
        return name

    def _write_varint(self, src: Source, value: str) -> None:
        src.line(f"if 0 <= {value} < 64: out.append({value} << 1)")
        src.line(f"else: write_long(out, {value})")

    def _write(self, src: Source, schema: Any, var: str) -> None:
        kind = self.kind(schema)
        schema = self.resolve(schema)
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
            table = self.constant("INDEX", {symbol: i for i, symbol in enumerate(schema["symbols"])})
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
            null, other = self.nullable(schema)
            src.line(f"if {var} is None: out.append({null << 1})")
            src.line("else:")
            src.depth += 1
            src.line(f"out.append({(1 - null) << 1})")
            self._write(src, other, var)
            src.depth -= 1
