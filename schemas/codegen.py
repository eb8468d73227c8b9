"""Generate `models/`, the pydantic in-process types, from the Avro schemas in `avro/`.

The `.avsc` files are the one definition of every field: the wire contract that outside
readers use and that CI checks for backward compatibility. This generator writes the
pydantic models from them, one module per family of schemas (`FAMILIES`) and an index,
`models/__init__.py`, that names every model; a unit test regenerates and fails when a
module is stale.

    python -m toolgate.schemas.codegen          # rewrite models/
    python -m toolgate.schemas.codegen --check  # exit 1 when models/ is stale

A field carrying JSON (`"json": "object"` on the Avro field) is a string on the wire and a
`dict` in process.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolgate.schemas.documents import all_named_types, inline_types

HERE = Path(__file__).parent
MODELS = HERE / "models"

# Which module of models/ holds the types of each schema file (and the types it defines inline).
# A family imports only from those before it here.
FAMILIES = {
    "common": ("Principal", "TaxonomyClass", "FieldError", "Verification", "Outcome"),
    "edge": ("ToolProposal", "Observation"),
    "stages": ("StageDecision", "Call", "StageRecord", "StageBatch", "ExecutionResult"),
    "approvals": ("ApprovalRequest", "ApprovalDecision"),
    "failures": ("DeadLetter",),
}

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


class _Generator:
    def __init__(self, documents: dict[str, dict[str, Any]]) -> None:
        self.documents = documents
        self.emitted: list[str] = []
        self.blocks: dict[str, str] = {}  # by full name, in the order emitted
        self.uses: dict[str, set[str]] = {}  # the named types each one's fields refer to
        self._using: list[str] = []  # the types being emitted, innermost last
        self.projections: dict[str, list[str]] = {}  # the projection models of each record, by its full name

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
        lines = [f"class {self.short(full)}(WireModel):", *self.docstring(doc)]
        lines.append(f'    avro_name: ClassVar[str] = "{full}"')
        lines += [self.field(f, namespace) for f in doc["fields"]]
        blocks = ["\n".join(lines)]
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
            inner = self.documents[inner_full]
            part = name + self.short(inner_full)
            said = f'    """The fields of a {self.short(inner_full)} that {name} reads."""'
            lines = [f"class {part}(WireModel):", said, ""]
            lines.append(f'    avro_name: ClassVar[str] = "{inner_full}"')
            lines += [self.field(g, namespace) for g in inner["fields"] if g["name"] in spec[f["name"]]]
            blocks.append("\n".join(lines))
            parts.append(part)
            body.append(self.field(f, namespace, py=part))
            reads += [f"{f['name']}.{g}" for g in spec[f["name"]]]
        lines = [f"class {name}(WireModel):", *self.docstring({"doc": spec["doc"]})]
        lines.append(f'    avro_name: ClassVar[str] = "{full}"')
        lines += ["    reads: ClassVar[frozenset[str]] = frozenset(", "        {"]
        lines += [f'            "{read}",' for read in sorted(reads)]
        lines += ["        }", "    )"]
        self.projections.setdefault(full, []).extend([*parts, name])
        return [*blocks, "\n".join(lines + body)]

    def docstring(self, doc: dict[str, Any]) -> list[str]:
        if not doc.get("doc"):
            return []
        text = textwrap.wrap(doc["doc"], width=88)
        if len(text) == 1:
            return [f'    """{text[0]}"""', ""]
        return [f'    """{text[0]}', *(f"    {t}" for t in text[1:]), '    """', ""]

    def enum_names(self) -> set[str]:
        return {self.short(n) for n, d in self.documents.items() if d["type"] == "enum"}


HEADER = '''"""{doc}
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations
'''

DOCS = {
    "common": "The types the other families share: who asks, the taxonomy, an outcome.",
    "edge": "The records agents write and read: a proposal and its observation.",
    "stages": "The records between stages: a call, a stage's decision, a batch, a result.",
    "approvals": "The records of approvals: a request for one and a decision on it.",
    "failures": "The record of what the workers could not handle: a dead letter.",
}


def _module(family: str, blocks: list[str], imported: dict[str, set[str]]) -> str:
    """One family's module: its header, the imports its blocks need, and the blocks."""
    body = "\n\n\n".join(blocks)
    standard = [
        line
        for line, used in (("from enum import StrEnum", "(StrEnum)"), ("from typing import ClassVar", "ClassVar["))
        if used in body
    ]
    wire = sorted(name for name in ("JsonObject", "WireModel") if name in body)
    third = ["from pydantic import Field"] if "Field(" in body else []
    ours = [_import(f"toolgate.schemas.models.{other}", names) for other, names in sorted(imported.items())]
    ours.append(_import("toolgate.schemas.wire", wire))
    groups = [group for group in (standard, third, sorted(ours)) if group]
    imports = "\n\n".join("\n".join(group) for group in groups)
    return HEADER.format(doc=DOCS[family]) + "\n" + imports + "\n\n\n" + body + "\n"


def _families(documents: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The family of each named type: that of the schema file that defines it."""
    family_of: dict[str, str] = {}
    for family, names in FAMILIES.items():
        for name in names:
            full = f"toolgate.{name}"
            inline: dict[str, dict[str, Any]] = {}
            inline_types(documents[full], "toolgate", inline)
            family_of.update(dict.fromkeys([full, *inline], family))
    if missing := sorted(set(documents) - set(family_of)):
        raise ValueError(f"no family in codegen.FAMILIES for {missing}")
    return family_of


def generate() -> dict[str, str]:
    """The source of each module of models/, by file name."""
    gen = _Generator(all_named_types())
    for full in sorted(gen.documents):
        gen.ensure(full)
    family_of = _families(gen.documents)
    modules: dict[str, str] = {}
    for family in FAMILIES:
        mine = [full for full in gen.blocks if family_of[full] == family]
        imported: dict[str, set[str]] = {}
        for full in mine:
            for used in gen.uses[full]:
                if family_of[used] != family:
                    imported.setdefault(family_of[used], set()).add(gen.short(used))
        modules[f"{family}.py"] = _module(family, [gen.blocks[full] for full in mine], imported)
    modules["__init__.py"] = _index(gen, family_of)
    return modules


def _index(gen: _Generator, family_of: dict[str, str]) -> str:
    """models/__init__.py: every model, by the name it has always been imported by."""
    names = {family: [gen.short(n) for n in gen.emitted if family_of[n] == family] for family in FAMILIES}
    for full, projections in gen.projections.items():
        names[family_of[full]] += projections
    lines = [_import(f"toolgate.schemas.models.{family}", names[family]) for family in sorted(FAMILIES)]
    exports = "\n".join(f'    "{name}",' for name in sorted(n for family in names.values() for n in family))
    header = HEADER.format(doc="Pydantic in-process types of toolgate's wire messages, a module per family.")
    return header + "\n" + "\n".join(lines) + f"\n\n__all__ = [\n{exports}\n]\n"


def _import(module: str, names: Iterable[str]) -> str:
    """An import line as ruff formats it: on one line if it fits in 120 characters."""
    line = f"from {module} import {', '.join(sorted(names))}"
    if len(line) <= 120:
        return line
    return f"from {module} import (\n" + "".join(f"    {name},\n" for name in sorted(names)) + ")"


def main(argv: list[str]) -> int:
    modules = generate()
    if "--check" in argv:
        stale = [name for name, source in modules.items() if _read(MODELS / name) != source]
        extra = sorted({path.name for path in MODELS.glob("*.py")} - set(modules))
        if stale or extra:
            print(f"schemas/models/ is stale ({', '.join(stale + extra)}): run python -m toolgate.schemas.codegen")
            return 1
        return 0
    MODELS.mkdir(exist_ok=True)
    for name, source in modules.items():
        (MODELS / name).write_text(source)
    return 0


def _read(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
