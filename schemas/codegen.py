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

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolgate.schemas.documents import all_named_types, inline_types
from toolgate.schemas.model_source import ModelSource

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
    gen = ModelSource(all_named_types())
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


def _index(gen: ModelSource, family_of: dict[str, str]) -> str:
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
