"""The Avro schema files of `avro/` as documents: each by its full name, with the records and
enums defined inline in another as documents of their own. codegen.py generates the models
from them, and the codec compiles its readers and writers from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

AVRO_DIR = Path(__file__).parent / "avro"


def load_documents() -> dict[str, dict[str, Any]]:
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(AVRO_DIR.glob("*.avsc")):
        doc = json.loads(path.read_text())
        full = f"{doc['namespace']}.{doc['name']}"
        if path.name != f"{full}.avsc":
            raise ValueError(f"{path.name} must be named {full}.avsc")
        documents[full] = doc
    return documents


def inline_types(avro: Any, namespace: str, found: dict[str, dict[str, Any]]) -> None:
    if isinstance(avro, list):
        for member in avro:
            inline_types(member, namespace, found)
    elif isinstance(avro, dict):
        if avro.get("type") in ("record", "enum") and "name" in avro:
            full = avro["name"] if "." in avro["name"] else f"{namespace}.{avro['name']}"
            found.setdefault(full, {**avro, "namespace": full.rsplit(".", 1)[0]})
            for field in avro.get("fields", []):
                inline_types(field["type"], namespace, found)
        elif avro.get("type") == "array":
            inline_types(avro["items"], namespace, found)
        elif avro.get("type") == "map":
            inline_types(avro["values"], namespace, found)


def all_named_types() -> dict[str, dict[str, Any]]:
    """Every named type of the schemas, including records defined inline in another."""
    documents = load_documents()
    for full, doc in list(documents.items()):
        inline_types(doc, full.rsplit(".", 1)[0], documents)
    return documents
