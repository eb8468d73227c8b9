"""Dead letters for calls that a stage settled from Postgres (not from a consumed record)."""

from __future__ import annotations

from toolgate.schemas.hashing import fingerprint
from toolgate.schemas.models import DeadLetter, Header, PayloadKind, StageRecord, TaxonomyClass


def for_request(
    record: StageRecord, request: bytes, *, stage: str, taxonomy: TaxonomyClass, reason: str, now_ms: int
) -> DeadLetter:
    """A dead letter holding a call's executable request, replayable onto tool.executable."""
    return DeadLetter(
        dead_letter_id=f"dl_{fingerprint(f'{stage}:{record.call.call_id}:{now_ms}', 24)}",
        call_id=record.call.call_id,
        stage=stage,
        source_topic="executable",
        source_partition=record.call.home_partition,
        source_offset=-1,
        payload_kind=PayloadKind.STAGE_ITEM,
        value=request,
        headers=[Header(key="traceparent", value=record.traceparent.encode())],
        taxonomy_class=taxonomy,
        reason=reason,
        attempts=record.attempt,
        dead_lettered_at_ms=now_ms,
    )
