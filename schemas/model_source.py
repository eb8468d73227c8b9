"""The source of the pydantic model of each Avro named type (codegen.py writes them into models/).

A record becomes a frozen `WireModel` with its schema's fields in their order, an enum a
`StrEnum`; a record's `"projections"` become models of only the fields a reader needs, and of a
record nested in one, only the fields it names (the codec's `project` reads just those). Where
such a part is a record's leading fields, the record extends it: its fields said once, its wire
order kept.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

PRIMITIVES = {
    "string": "str",
    "boolean": "bool",
    "int": "int",
    "long": "int",
    "float": "float",
    "double": "float",
    "bytes": "bytes",
    "null": "None",
}


class ModelSource:
    """The source of each named type's model, made as each is first needed (`ensure`): its
    block, the named types it refers to, and the projections of each record."""

    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.emitted: list[str] = []
        self.blocks: dict[str, str] = {}  # by full name, in the order emitted
        self.uses: dict[str, set[str]] = {}  # the named types each one's fields refer to
        self._using: list[str] = []  # the types being emitted, innermost last
        self.projections: dict[str, list[str]] = {}  # the projection models of each record, by its full name
        self.leading = self.leading_parts()

    def short(self, name: str) -> str:
        return name.rsplit(".", 1)[-1]

    def full(self, name: str, namespace: str) -> str:
        return name if "." in name else f"{namespace}.{name}"

    def type_of(self, avro: Any, namespace: str) -> str:
        if isinstance(avro, str):
            if avro in PRIMITIVES:
                return PRIMITIVES[avro]
            full = self.full(avro, namespace)
            self.ensure(full)
            self.uses[self._using[-1]].add(full)
            return self.short(full)
        if isinstance(avro, list):
            members = [self.type_of(m, namespace) for m in avro]
            members.sort(key=lambda m: m == "None")
            return " | ".join(members)
        kind = avro["type"]
        if kind in PRIMITIVES:
            return PRIMITIVES[kind]
        if kind == "array":
            return f"list[{self.type_of(avro['items'], namespace)}]"
        if kind == "map":
            return f"dict[str, {self.type_of(avro['values'], namespace)}]"
        if kind in ("record", "enum"):
            full = self.full(avro["name"], avro.get("namespace", namespace))
            self.documents.setdefault(full, {**avro, "namespace": full.rsplit(".", 1)[0]})
            self.ensure(full)
            self.uses[self._using[-1]].add(full)
            return self.short(full)
        raise ValueError(f"unsupported Avro type {avro!r}")

    def ensure(self, full: str) -> None:
        if full in self.emitted:
            return
        self.emitted.append(full)
        self.uses[full] = set()
        self._using.append(full)
        doc = self.documents[full]
        self.blocks[full] = self.enum(full, doc) if doc["type"] == "enum" else self.record(full, doc)
        self._using.pop()

    def enum(self, full: str, doc: dict[str, Any]) -> str:
        lines = [f"class {self.short(full)}(StrEnum):", *self.docstring(doc)]
        lines += [f'    {s} = "{s}"' for s in doc["symbols"]]
        return "\n".join(lines)

    def record(self, full: str, doc: dict[str, Any]) -> str:
        namespace = full.rsplit(".", 1)[0]
        projected, leading = self.leading.get(full, ("", []))
        blocks = [self.part(projected, full, leading, namespace)] if leading else []
        base = projected + self.short(full) if leading else "WireModel"
        lines = [f"class {self.short(full)}({base}):", *self.docstring(doc)]
        lines.append(f'    avro_name: ClassVar[str] = "{full}"')
        lines += [self.field(f, namespace) for f in doc["fields"][len(leading) :]]
        blocks.append("\n".join(lines))
        for name, projection in doc.get("projections", {}).items():
            blocks += self.projection(full, doc, name, projection)
        return "\n\n\n".join(blocks)

    def field(self, f: dict[str, Any], namespace: str, py: str | None = None) -> str:
        """A field's line: its name, its type (`py` in place of the schema's) and its default."""
        py = py or self.type_of(f["type"], namespace)
        if f.get("json"):
            py = "JsonObject | None" if "None" in py.split(" | ") else "JsonObject"
        default = ""
        if "default" in f:
            value = f["default"]
            if isinstance(value, list):
                default = " = Field(default_factory=list)"
            elif isinstance(value, str) and py in self.enum_names():
                default = f" = {py}.{value}"
            else:
                default = " = " + (json.dumps(value) if isinstance(value, str) else repr(value))
        return f"    {f['name']}: {py}{default}"

    def projection(self, full: str, doc: dict[str, Any], name: str, spec: dict[str, Any]) -> list[str]:
        """A projection of a record (the schema's `"projections"`): a model of only the fields a
        reader needs (the codec's `project` reads just those), and of a nested record in the last
        of them, only the fields `spec[field]` names (a model of its own, `name` + the field's
        record name)."""
        namespace = full.rsplit(".", 1)[0]
        blocks: list[str] = []
        parts: list[str] = []
        body: list[str] = []
        reads: list[str] = []
        for f in (f for f in doc["fields"] if f["name"] in spec["fields"]):
            if f["name"] not in spec:
                body.append(self.field(f, namespace))
                reads.append(f["name"])
                continue
            inner_full = self.full(f["type"], namespace)
            if self.leading.get(inner_full, ("",))[0] != name:  # else made with its record, which extends it
                blocks.append(self.part(name, inner_full, spec[f["name"]], namespace))
            parts.append(name + self.short(inner_full))
            body.append(self.field(f, namespace, py=parts[-1]))
            reads += [f"{f['name']}.{g}" for g in spec[f["name"]]]
        lines = [f"class {name}(WireModel):", *self.docstring({"doc": spec["doc"]})]
        lines.append(f'    avro_name: ClassVar[str] = "{full}"')
        lines += ["    reads: ClassVar[frozenset[str]] = frozenset(", "        {"]
        lines += [f'            "{read}",' for read in sorted(reads)]
        lines += ["        }", "    )"]
        self.projections.setdefault(full, []).extend([*parts, name])
        return [*blocks, "\n".join(lines + body)]

    def part(self, name: str, full: str, read: list[str], namespace: str) -> str:
        """The model of the fields `read` of the record `full` that the projection `name` reads."""
        said = f'    """The fields of a {self.short(full)} that {name} reads."""'
        lines = [f"class {name}{self.short(full)}(WireModel):", said, ""]
        lines.append(f'    avro_name: ClassVar[str] = "{full}"')
        lines += [self.field(g, namespace) for g in self.documents[full]["fields"] if g["name"] in read]
        return "\n".join(lines)

    def leading_parts(self) -> dict[str, tuple[str, list[str]]]:
        """The records a projection reads in part (`projection`) whose part is their leading
        fields: the projection's name and those fields, by record. Such a record extends its part
        (the wire order stays the record's), so its leading fields are said once."""
        found: dict[str, tuple[str, list[str]]] = {}
        for outer_full, outer in self.documents.items():
            for name, spec in outer.get("projections", {}).items():
                for f in (f for f in outer["fields"] if f["name"] in spec["fields"] and f["name"] in spec):
                    full = self.full(f["type"], outer_full.rsplit(".", 1)[0])
                    leading = [g["name"] for g in self.documents[full]["fields"]][: len(spec[f["name"]])]
                    if set(leading) == set(spec[f["name"]]):
                        found[full] = (name, leading)
        return found

    def docstring(self, doc: dict[str, Any]) -> list[str]:
        if not doc.get("doc"):
            return []
        text = textwrap.wrap(doc["doc"], width=88)
        if len(text) == 1:
            return [f'    """{text[0]}"""', ""]
        return [f'    """{text[0]}', *(f"    {t}" for t in text[1:]), '    """', ""]

    def enum_names(self) -> set[str]:
        return {self.short(n) for n, d in self.documents.items() if d["type"] == "enum"}
