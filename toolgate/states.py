"""The states Postgres keeps for a call, one enum per table column, spelled as the column's
CHECK constraint spells them (`ops/migrations/0001_toolgate.sql`).

StrEnum members compare equal to their text, so a row read back from psycopg (`"PENDING"`)
and `KeyStatus.PENDING` are the same value, and a member passes as a query parameter as is.
"""

from __future__ import annotations

from enum import StrEnum


class KeyStatus(StrEnum):
    """`toolgate.idempotency_keys.status`: the seeds' idempotency states."""

    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED_RETRYABLE = "FAILED_RETRYABLE"
    FAILED_FINAL = "FAILED_FINAL"
    COMPENSATED = "COMPENSATED"
    EXPIRED = "EXPIRED"


# How an operation ends: its outcome is final, and it never runs again.
ENDED = (KeyStatus.COMPLETED, KeyStatus.FAILED_FINAL, KeyStatus.COMPENSATED)


class TicketStatus(StrEnum):
    """`toolgate.approvals.status`: an approval ticket, from held to decided."""

    PENDING = "PENDING"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    AUTO_DENIED = "AUTO_DENIED"
    EDITED = "EDITED"  # an approver approved edited arguments instead: the edited call re-entered, this one never runs

    @property
    def closed(self) -> bool:
        return self in (TicketStatus.DENIED, TicketStatus.AUTO_DENIED)


class RegistryStatus(StrEnum):
    """`status` of a registered agent, agent key or approver."""

    ACTIVE = "active"
    REVOKED = "revoked"


class StageOutcome(StrEnum):
    """`StageDecision.outcome`: what a gate decided about a call it passed on."""

    PASS = "pass"  # validation
    ALLOW = "allow"  # policy
    APPROVED = "approved"  # approval-wait: enough distinct approvers
    EDITED = "edited"  # validation: an approver's edit of a held call, re-entered (detail: contracts/edits.py's note)
