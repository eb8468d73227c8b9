"""How the codec's compiled readers and writers make and take today's models (avro_compiled's
`Build`): each record's model built from the values its schema enforced, each JSON field parsed
when read and written as compact JSON, and a record whose schema says `"kept": true` (a Call)
holding the bytes it was read from, written again as they are."""

from __future__ import annotations

from typing import Any

from toolgate.schemas import models
from toolgate.schemas.avro_base import Build
from toolgate.schemas.errors import DecodeError
from toolgate.schemas.wire import KEPT, WireModel, compact_json, json_object


def model_classes() -> dict[str, type[WireModel]]:
    """The model of each record, by its full name (not a projection of one: codegen.py)."""
    classes: dict[str, type[WireModel]] = {}
    for name in models.__all__:
        obj = getattr(models, name)
        if isinstance(obj, type) and issubclass(obj, WireModel) and obj.avro_name.endswith(f".{name}"):
            classes[obj.avro_name] = obj
    return classes


def build_of(classes: dict[str, type[WireModel]], documents: dict[str, dict[str, Any]]) -> Build:
    """How the compiled codec reads and writes today's models.

    Read: each record's model built from the values its schema enforced (`WireModel.built`),
    its JSON fields parsed and checked to be objects; each enum symbol as its enum's member.
    That is what validating the record would do, without doing it again.
    Written: each record's fields taken from its model, each JSON field as compact JSON, with
    no `model_dump` into dicts first.
    With orjson's JSON (wire.py), a StageRecord of `invoice.create_draft` and an ExecutionResult
    are each read and written in less time than by validating them and by `model_dump`
    (docs/performance.md, "Figures behind the code")."""
    json_fields = {name: [f["name"] for f in documents[name]["fields"] if f.get("json")] for name in classes}
    enums = [name for name, doc in documents.items() if doc["type"] == "enum"]
    return Build(
        records={name: _maker(cls, json_fields[name]) for name, cls in classes.items()},
        enums={name: getattr(models, name.rpartition(".")[2]) for name in enums},
        values_of=_fields,
        written={(name, field): compact_json for name in classes for field in json_fields[name]},
        kept=_keep,
        kept_of=_kept,
    )


def _fields(model: WireModel) -> dict[str, Any]:
    return model.__dict__


def _keep(model: WireModel, body: bytes) -> WireModel:
    model.__dict__[KEPT] = body
    return model


def _kept(model: WireModel) -> bytes | None:
    return model.__dict__.get(KEPT)


def _maker(cls: type[WireModel], json_fields: list[str]) -> Any:
    if not json_fields:
        return cls.built

    def make(values: dict[str, Any]) -> WireModel:
        for name in json_fields:
            text = values[name]
            if text is not None:
                try:
                    values[name] = json_object(text)
                except (ValueError, RecursionError) as exc:
                    raise DecodeError(f"invalid {cls.avro_name}: {exc}") from exc
        return cls.built(values)

    return make
