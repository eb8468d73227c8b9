"""Avro single-object encoding of toolgate's wire models (fastavro).

Every value toolgate writes starts with the two marker bytes C3 01 and the 8-byte
little-endian CRC-64-AVRO fingerprint of its writer schema, then the Avro binary body, as
the Avro specification's single-object encoding says. Any reader that holds the schema files
resolves the writer's schema from the fingerprint; this codec also knows every released
schema version (`avro/released/<version>/`), so records written by an older release are
read into today's models by Avro schema resolution.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form
from fastavro.types import Schema

from toolgate.schemas.avro_base import Reader, Unsupported, Writer
from toolgate.schemas.avro_compiled import compile_codec, compile_head
from toolgate.schemas.documents import all_named_types
from toolgate.schemas.errors import DecodeError as DecodeError  # where it has always been imported from
from toolgate.schemas.lenient import read_lenient
from toolgate.schemas.model_build import build_of, model_classes
from toolgate.schemas.upgrades import upgrade_of
from toolgate.schemas.wire import WireModel, compact_json

MARKER = b"\xc3\x01"
HEADER_LEN = len(MARKER) + 8
AVRO_DIR = Path(__file__).parent / "avro"

M = TypeVar("M", bound=WireModel)
P = TypeVar("P", bound=WireModel)


def schema_fingerprint(parsed: Schema) -> bytes:
    return bytes.fromhex(str(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO")))


JsonPath = tuple[str, ...]


def _json_paths(documents: dict[str, dict[str, Any]], full: str, namespace: str) -> list[JsonPath]:
    """Paths of the JSON-carrying fields of a record, through nested records."""
    paths: list[JsonPath] = []
    for field in documents[full]["fields"]:
        if field.get("json"):
            paths.append((field["name"],))
            continue
        kind = field["type"]
        nested = None
        if isinstance(kind, str):
            nested = kind if "." in kind else f"{namespace}.{kind}"
        elif isinstance(kind, dict) and kind.get("type") == "record":
            nested = f"{namespace}.{kind['name']}"
        if nested and documents.get(nested, {}).get("type") == "record":
            for sub in _json_paths(documents, nested, namespace):
                paths.append((field["name"], *sub))
    return paths


def _to_wire(record: dict[str, Any], paths: list[JsonPath]) -> dict[str, Any]:
    for path in paths:
        parent = record
        for name in path[:-1]:
            parent = parent[name]
        value = parent[path[-1]]
        if value is not None:
            parent[path[-1]] = compact_json(value)
    return record


class Codec:
    def __init__(self, avro_dir: Path = AVRO_DIR) -> None:
        self._classes = model_classes()
        self._writers: dict[type[WireModel], tuple[bytes, Schema]] = {}
        # fingerprint -> (model class, writer schema, reader schema)
        self._readers: dict[bytes, tuple[type[WireModel], Schema, Schema]] = {}
        # Today's schemas, compiled (avro_compiled): less time to read and to write than fastavro's.
        self._compiled_writers: dict[type[WireModel], tuple[bytes, Writer]] = {}
        self._compiled_readers: dict[bytes, tuple[type[WireModel], Reader]] = {}
        # a projection -> the reader of only its fields (`project`), made when first asked
        # A projection's compiled reader, and the models of the records it reads in part.
        self._heads: dict[type[WireModel], tuple[Reader, tuple[tuple[str, type[WireModel]], ...]]] = {}
        # fingerprint -> what makes a record of that older release today's shape (upgrades.py)
        self._upgrades: dict[bytes, Callable[[dict[str, Any]], dict[str, Any]]] = {}
        documents = all_named_types()
        self._build = build = build_of(self._classes, documents)
        self._json_paths = {cls: _json_paths(documents, name, "toolgate") for name, cls in self._classes.items()}
        for path in sorted(avro_dir.glob("*.avsc")):
            cls = self._classes.get(path.name.removesuffix(".avsc"))
            if cls is None:  # an enum: not encoded on its own
                continue
            parsed = load_schema(str(path))
            fp = schema_fingerprint(parsed)
            self._writers[cls] = (fp, parsed)
            self._readers[fp] = (cls, parsed, parsed)
            try:
                reader, writer = compile_codec(parsed, build)  # type: ignore[arg-type]
            except Unsupported:
                continue
            self._compiled_writers[cls] = (MARKER + fp, writer)
            self._compiled_readers[fp] = (cls, reader)
        for release in sorted((avro_dir / "released").glob("*")):
            for path in sorted(release.glob("*.avsc")):
                cls = self._classes.get(path.name.removesuffix(".avsc"))
                if cls is None:
                    continue
                old = load_schema(str(path))
                fp = schema_fingerprint(old)
                upgrade = upgrade_of(old)  # type: ignore[arg-type]
                if upgrade is None:
                    self._readers.setdefault(fp, (cls, old, self._writers[cls][1]))
                elif fp not in self._readers:  # read with its own schema, then brought to today's shape
                    self._readers[fp] = (cls, old, old)
                    self._upgrades[fp] = upgrade

    def fingerprint_of(self, cls: type[WireModel]) -> bytes:
        return self._writers[cls][0]

    def schema_of(self, cls: type[WireModel]) -> Schema:
        return self._writers[cls][1]

    def encode(self, model: WireModel) -> bytes:
        compiled = self._compiled_writers.get(type(model))
        if compiled is not None:
            header, writer = compiled
            out = bytearray(header)
            writer(out, model)
            return bytes(out)
        fp, parsed = self._writers[type(model)]
        buf = io.BytesIO()
        buf.write(MARKER)
        buf.write(fp)
        schemaless_writer(buf, parsed, _to_wire(model.model_dump(), self._json_paths[type(model)]))
        return buf.getvalue()

    def decode(self, data: bytes, expected: type[M]) -> M:
        """Decode a single-object-encoded record; DecodeError unless it is an `expected`."""
        model = self.model_of(data)
        if not isinstance(model, expected):
            raise DecodeError(f"expected {expected.avro_name}, found {model.avro_name}")
        return model

    def model_of(self, data: bytes) -> WireModel:
        """The model a single-object-encoded record holds: made by the compiled reader of
        today's schema, or read by fastavro (an older release's schema, resolved) and validated."""
        if len(data) < HEADER_LEN or data[:2] != MARKER:
            raise DecodeError("not an Avro single-object encoded record (bad marker)")
        compiled = self._compiled_readers.get(bytes(data[2:HEADER_LEN]))
        if compiled is not None:
            return _read_compiled(bytes(data), *compiled)
        cls, record = self._read_resolved(data)
        try:
            return cls.model_validate(record)
        except (ValueError, RecursionError) as exc:
            raise DecodeError(f"invalid {cls.avro_name}: {exc}") from exc

    def project(self, data: bytes, projection: type[P]) -> P | None:
        """Only the fields a projection of a record reads (`projection.reads`, codegen.py): the
        record's body read no further than the last of them, nothing made of the fields before
        it but these (avro_compiled's `compile_head`); JSON fields left unread. None for a record
        an older release wrote: read that one whole (`decode`). DecodeError for what is not the
        projected record, or whose body ends before the last field read; what follows it is
        not checked."""
        if len(data) < HEADER_LEN or data[:2] != MARKER:
            raise DecodeError("not an Avro single-object encoded record (bad marker)")
        fp = bytes(data[2:HEADER_LEN])
        whole = self._classes[projection.avro_name]
        compiled = self._compiled_readers.get(fp)
        if compiled is None:
            known = self._readers.get(fp)
            if known is None:
                raise DecodeError(f"unknown schema fingerprint {fp.hex()}")
            if known[0] is not whole:
                raise DecodeError(f"expected {whole.avro_name}, found {known[0].avro_name}")
            return None
        if compiled[0] is not whole:
            raise DecodeError(f"expected {whole.avro_name}, found {compiled[0].avro_name}")
        head = self._heads.get(projection)
        if head is None:
            head = self._heads[projection] = self._head(projection, fp)
        reader, in_part = head
        try:
            values, _ = reader(bytes(data), HEADER_LEN)
        except Exception as exc:  # IndexError or EOFError (too short), ValueError, UnicodeDecodeError
            raise DecodeError(f"corrupt {whole.avro_name} body: {exc}") from exc
        for name, model in in_part:  # a record read in part: its own projection's model
            values[name] = model.built(values[name])
        return projection.built(values)

    def _head(self, projection: type[WireModel], fp: bytes) -> tuple[Reader, tuple[tuple[str, type[WireModel]], ...]]:
        """The reader of what `projection` reads, compiled, and the models of the records it
        reads in part (a name `a.b` in its `reads`), by field."""
        names: frozenset[str] = projection.reads  # type: ignore[attr-defined]
        reader = compile_head(self._readers[fp][1], names, self._build)  # type: ignore[arg-type]
        tops = sorted({name.partition(".")[0] for name in names if "." in name})
        return reader, tuple((top, projection.model_fields[top].annotation) for top in tops)  # type: ignore[misc]

    def _read_resolved(self, data: bytes) -> tuple[type[WireModel], dict[str, Any]]:
        reader = self._readers.get(bytes(data[2:HEADER_LEN]))
        if reader is None:
            raise DecodeError(f"unknown schema fingerprint {data[2:HEADER_LEN].hex()}")
        cls, writer_schema, reader_schema = reader
        buf = io.BytesIO(data)
        buf.seek(HEADER_LEN)
        try:
            record = schemaless_reader(buf, writer_schema, reader_schema)
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, ...
            raise DecodeError(f"corrupt {cls.avro_name} body: {exc}") from exc
        if buf.tell() != len(data):
            raise DecodeError(f"{len(data) - buf.tell()} trailing bytes after {cls.avro_name}")
        if not isinstance(record, dict):
            raise DecodeError(f"{cls.avro_name} body is not a record")
        upgrade = self._upgrades.get(bytes(data[2:HEADER_LEN]))
        return cls, record if upgrade is None else upgrade(record)

    def decode_lenient(self, data: bytes, expected: type[M], fields: frozenset[str]) -> M:
        """Like `decode`, but text of the top-level `fields` that is not valid UTF-8 is kept, its
        bytes carried as lone surrogates (`surrogateescape`), instead of spoiling the whole
        record: a proposal whose argument text holds invalid UTF-8 still names its call and can
        still be answered. Any other field that is not UTF-8 still makes it a DecodeError. An
        Avro string is its length and its bytes, exactly as Avro bytes are, so the record is
        read with every string taken as bytes, then each decoded (schemas/lenient.py)."""
        try:
            return self.decode(data, expected)
        except DecodeError as exc:
            if not isinstance(exc.__cause__, UnicodeDecodeError):
                raise
        cls, writer, _ = self._readers[bytes(data[2:HEADER_LEN])]
        if cls is not expected:
            raise DecodeError(f"expected {expected.avro_name}, found {cls.avro_name}")
        try:
            texts, end = read_lenient(data, HEADER_LEN, writer, fields)
            model = cls.model_validate(texts)
        except Exception as exc:
            raise DecodeError(f"corrupt {cls.avro_name} body: {exc}") from exc
        if end != len(data):
            raise DecodeError(f"{len(data) - end} trailing bytes after {cls.avro_name}")
        return model


def _read_compiled(data: bytes, cls: type[WireModel], reader: Reader) -> WireModel:
    try:
        model, end = reader(data, HEADER_LEN)
    except DecodeError:  # a JSON field that is not a JSON object
        raise
    except Exception as exc:  # IndexError or EOFError (too short), ValueError, UnicodeDecodeError
        raise DecodeError(f"corrupt {cls.avro_name} body: {exc}") from exc
    if end != len(data):
        raise DecodeError(f"{len(data) - end} trailing bytes after {cls.avro_name}")
    return model  # type: ignore[no-any-return]


@cache
def codec() -> Codec:
    """The process-wide codec (schemas are read once); one that counts what it does when
    TOOLGATE_CODEC_COUNTS names a directory (codec_counts.py, for measuring a call's path)."""
    counts = os.environ.get("TOOLGATE_CODEC_COUNTS")
    if counts:
        from toolgate.schemas.codec_counts import counting  # only a measured process loads it

        return counting(counts)
    return Codec()
