"""The record of what the workers could not handle: a dead letter.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from toolgate.schemas.models.common import TaxonomyClass
from toolgate.schemas.wire import WireModel


class PayloadKind(StrEnum):
    RECORD = "RECORD"
    STAGE_ITEM = "STAGE_ITEM"


class Header(WireModel):
    avro_name: ClassVar[str] = "toolgate.Header"
    key: str
    value: bytes | None = None


class DeadLetter(WireModel):
    """A record a stage could not handle, on tool.deadletter keyed by call_id: its original
    bytes and headers, where it came from, and why.
    """

    avro_name: ClassVar[str] = "toolgate.DeadLetter"
    dead_letter_id: str
    call_id: str | None = None
    stage: str
    source_topic: str
    source_partition: int
    source_offset: int
    payload_kind: PayloadKind
    key: bytes | None = None
    value: bytes
    headers: list[Header] = Field(default_factory=list)
    taxonomy_class: TaxonomyClass
    reason: str
    attempts: int = 1
    dead_lettered_at_ms: int
    produced_at_ms: int | None = None
