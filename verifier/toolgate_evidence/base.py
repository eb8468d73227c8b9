"""Names every part of the verifier shares: the format, the statuses, and how a check ends."""

from __future__ import annotations

from datetime import UTC, datetime

FORMAT = "toolgate.evidence/v1"
OK, FAILED, SKIPPED = "ok", "failed", "skipped"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Failed(Exception):
    """A check that does not hold: its message is one sentence saying what does not."""


class Skipped(Exception):
    """A check that cannot be made on this bundle: its message says why."""
