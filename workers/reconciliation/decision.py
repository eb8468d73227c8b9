"""Reconciliation's choices: what becomes of an idempotency key a crash left PENDING.

Pure: the key as the reconciler read it, the provider's answer to its status query (an effect,
workers/execution/effects.py, as execution's status query ends) and the time come in; one of a
closed set of outcomes comes out. `triage` says whether the provider must be asked; `resolve`
decides once it has answered. The reconciler (reconciler.py) asks with no transaction open and
applies the outcome under the key's row lock, and only if the row is still as it read it:
another reconciler or the execution stage may have settled it meanwhile.

    executor  status query  the provider's answer              -> outcome
    postgres  -             (not asked)                           Redrive: the effect's
                                                                  transaction never committed
    http      offered       (not asked yet)                       Ask
    http      offered       completed: Done                       Complete with the provider's result
    http      offered       never received the call: Failed,      Redrive
                            not final
    http      offered       failed: Failed, final                 FailFinal
    http      offered       Unknown, window still open            Leave: ask again next pass
    http      offered       Unknown, window closed                FailFinal: unverifiable
    http      none          (not asked)                           FailFinal: unverifiable
    python    -             (not asked)                           FailFinal: unverifiable

The window is the verification window, counted from the key's creation. A FailFinal answers
the agent fail-closed and dead-letters the request for an operator; a Redrive hands the key to
whichever execution worker receives the call again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from toolgate.workers.execution.effects import Done, Effect, Failed, Unknown

STAGE = "reconciliation"

NO_EFFECT = "no committed effect: re-driven"
PROVIDER_COMPLETED = "the provider reports the call completed"
NOT_RECEIVED = "the provider never received the call: re-driven"
PROVIDER_FAILED = "the provider reports the call failed"
UNVERIFIABLE = "the outcome cannot be verified: no status query"


@dataclass(frozen=True)
class PendingKey:
    """What the decision reads of a PENDING key whose lease expired."""

    executor: str  # the contract's executor kind: postgres, http or python
    status_query: bool  # the contract offers the provider's status query
    created_ms: int


# --- outcomes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ask:
    """Ask the provider's status query, then `resolve`."""


@dataclass(frozen=True)
class Redrive:
    detail: str
    action: ClassVar[str] = "redriven"


@dataclass(frozen=True)
class Complete:
    data: dict[str, Any]
    detail: str = PROVIDER_COMPLETED
    action: ClassVar[str] = "completed"


@dataclass(frozen=True)
class FailFinal:
    detail: str
    action: ClassVar[str] = "failed_final"

    @property
    def message(self) -> str:
        """What the fail-closed answer tells the agent."""
        return f"{self.detail}; whether the effect happened is unknown and an operator must verify it. Do not retry."


@dataclass(frozen=True)
class Leave:
    """Still unknown: the key stays PENDING and the next pass asks again."""

    detail: str
    action: ClassVar[str] = "unresolved"


Resolution = Redrive | Complete | FailFinal | Leave


def triage(key: PendingKey) -> Ask | Resolution:
    """What can be decided before anyone is asked."""
    if key.executor == "postgres":
        return Redrive(NO_EFFECT)
    if key.executor == "http" and key.status_query:
        return Ask()
    return FailFinal(UNVERIFIABLE)


def resolve(key: PendingKey, answer: Effect, *, now_ms: int, window_ms: int) -> Resolution:
    """What the provider's answer decides (a Done's data already scrubbed of secrets)."""
    match answer:
        case Done(data):
            return Complete(data)
        case Failed(final=False):
            return Redrive(NOT_RECEIVED)
        case Failed():
            return FailFinal(PROVIDER_FAILED)
        case Unknown(reason) if now_ms - key.created_ms < window_ms:
            return Leave(f"still unknown: {reason}")
        case Unknown():
            return FailFinal(UNVERIFIABLE)
