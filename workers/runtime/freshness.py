"""How old a record between stages may be: a genuine record replayed later is stale.

The stage MAC proves that a toolgate stage wrote a record, not when: a record captured from an
internal topic (tool.validated, tool.authorized, tool.executable, tool.results) verifies
forever. So every StageBatch says when its stage produced it (`produced_at_ms`, inside the bytes
the MAC covers), and every consumer of an internal topic refuses one produced too long ago, or
too far ahead of its own clock, before it decodes a single call:

    the batch's produced_at_ms                        what the consumer does
    within [now - max age, now + skew]                reads its calls
    older than the max age                            Stale: dead-lettered with its bytes, audited
    further ahead than the skew (a clock ahead)       Stale, likewise
    0 (written by a release before the field)         Stale, likewise

Pure: the time is passed in. The bound is `TOOLGATE_RECORD_MAX_AGE_SECONDS` (900 s by default,
the proposal window: nothing older than a proposal may be is acted on), and the skew the
proposal skew. A stale record is never answered (its call was, or will be, answered by its first
delivery); an operator sends one on past the bound only with `toolgate dlq replay
--allow-stale`, which stamps it anew and keeps its original age in `first_produced_at_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.settings import Settings


@dataclass(frozen=True)
class Bound:
    """How far a time may lie from now: back (max age) and ahead (skew). A record's production
    time is held to `of`, a proposal's created_at to `for_proposals` (workers/validation/identity.py)."""

    max_age_ms: int
    future_ms: int

    @classmethod
    def of(cls, settings: Settings) -> Bound:
        return cls(int(settings.record_max_age_seconds * 1000), int(settings.proposal_future_skew_seconds * 1000))

    @classmethod
    def for_proposals(cls, settings: Settings) -> Bound:
        return cls(int(settings.proposal_max_age_seconds * 1000), int(settings.proposal_future_skew_seconds * 1000))


def stale(produced_at_ms: int, now_ms: int, bound: Bound) -> str | None:
    """Why a record produced at `produced_at_ms` may not be acted on at `now_ms`; None if it may."""
    if produced_at_ms <= 0:
        return "it says nothing of when it was produced (a release before freshness): it may be a replay"
    age = now_ms - produced_at_ms
    if age > bound.max_age_ms:
        return (
            f"it was produced {age // 1000} s ago, past the bound of {bound.max_age_ms // 1000} s: "
            "a replay, or a backlog older than the bound"
        )
    if -age > bound.future_ms:
        return f"it was produced {-age // 1000} s in the future, past the skew of {bound.future_ms // 1000} s"
    return None
