"""How long a call's Postgres statement may run and wait on a lock, whether it may write, and
what it means when one of these bounds cut it. Pure: the executor (executors.py) sets the
bounds in the effect's transaction (store/bounds.py) and asks here what a cut means.

The bound is the call's time left: its deadline (retry.py `deadline_for`: the contract's
`runtime.timeout_ms`, its timeout class's ceiling, the proposal's own deadline) less the time
already gone. Statements that run together (a round's, in one pipeline) share the least time
left of theirs; a round that one of them overruns runs again with a savepoint per call, each
with its own. A lock may be waited on for half of that, so a statement stuck behind another
transaction's lock is told apart from one that ran long (both timers run; Postgres reports
whichever fired first).

    the server's SQLSTATE           the call gets                       its key
    57014 statement timeout         TIMEOUT statement_timeout           FAILED_RETRYABLE
    55P03 lock timeout              STALE_STATE lock_timeout            FAILED_RETRYABLE
    25006 write in a READ_ONLY      POLICY_VIOLATION                    (a read has none)
          tool's statement          mutation_class_violation, and the
                                    tool version is quarantined

The same bounds hold the re-read of an approved call's target under FOR UPDATE (tickets.py
`state_now`), in a savepoint before the effect: a target another transaction holds is waited on
for half the call's time left, and a read a bound cut (`Cut`) answers the call as its own
statement's cut would (`read_cut`), before its ticket is consumed. Both send their statements
as one bounded section (store/bounds.py `section`: one pipeline, one round trip).

A cut statement was rolled back by the server: nothing it did remains, so its key may run
again (FAILED_RETRYABLE), and the answer is retryable. A lock wait past its bound is the seeds'
state-consistency failure ("verify the target resource exists, is current, unlocked, and in
valid state": STALE_STATE): another transaction holds the target, and what it commits may
change it; refresh and re-plan. A write attempted by a tool declared READ_ONLY is the seeds'
mutation-class violation (their alert MUTATION_CLASS_VIOLATION; the seeds' taxonomy has no
class of that name): a governance failure, POLICY_VIOLATION, fail closed, with the code
`mutation_class_violation`, and the tool version quarantined (store/quarantine.py) until an
operator has looked. A contract's `error_taxonomy_mapping` may name other classes for the
first two; none can hide a mutation-class violation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import MUTATION_CLASS_VIOLATION
from toolgate.workers.execution.effects import Failed, Job, failed

# What the server says when a bound cut a statement, by SQLSTATE.
STATEMENT_TIMEOUT = "57014"  # query_canceled: statement_timeout (or an operator's cancel)
LOCK_TIMEOUT = "55P03"  # lock_not_available: lock_timeout
READ_ONLY_VIOLATION = "25006"  # read_only_sql_transaction: a write in a read-only transaction
CUT = frozenset({STATEMENT_TIMEOUT, LOCK_TIMEOUT})  # psycopg calls both OperationalError: not a lost connection

MAX_MS = 2**31 - 1  # the most Postgres takes for a timeout (ms, an int)
LOCK_SHARE = 2  # a lock may be waited on for 1/LOCK_SHARE of the statement's time


@dataclass(frozen=True)
class Limits:
    """The bounds of statements that run together: milliseconds, each at least 1."""

    statement_ms: int
    lock_ms: int


def limits(jobs: list[Job], now_ms: int) -> Limits:
    """The least time left of these calls' deadlines, for their statements and their lock waits."""
    left = min(MAX_MS, max(1, min(job.deadline_ms for job in jobs) - now_ms))
    return Limits(left, max(1, left // LOCK_SHARE))


@dataclass(frozen=True)
class Cut:
    """A read of a call's target that a bound cut: the server's SQLSTATE (one of CUT) and the
    bounds the read ran within."""

    sqlstate: str
    limits: Limits


def read_cut(job: Job, found: Cut) -> Failed:
    """What a cut read of the call's target means: what a cut of its own statement would."""
    answer = cut(job, found.sqlstate, found.limits, job.contract.document["observability"]["error_taxonomy_mapping"])
    if answer is None:
        raise ValueError(f"SQLSTATE {found.sqlstate} is no bound's cut")
    return answer


def read_only(job: Job) -> bool:
    """Whether the call's statements run read-only: its tool is declared READ_ONLY."""
    return not job.contract.is_mutation


# A bound's cut, by the SQLSTATE the server cancels the statement with: the taxonomy class it
# means unless the contract's error_taxonomy_mapping names another, its code, and what the agent
# hears of the call's limits. Either way the server rolled the statement back: never final.
CUTS: dict[str, tuple[TaxonomyClass, str, Callable[[Limits], str]]] = {
    STATEMENT_TIMEOUT: (
        TaxonomyClass.TIMEOUT,
        "statement_timeout",
        lambda limit: (
            f"the statement did not finish within {limit.statement_ms} ms, the call's time left; the server "
            "cancelled it and rolled it back: nothing was changed"
        ),
    ),
    LOCK_TIMEOUT: (
        TaxonomyClass.STALE_STATE,
        "lock_timeout",
        lambda limit: (
            f"the statement waited {limit.lock_ms} ms for a lock another transaction holds on its target; the "
            "server cancelled it and rolled it back: nothing was changed. Refresh the target's state and re-plan"
        ),
    ),
}


def cut(job: Job, sqlstate: str, limit: Limits, mapping: Mapping[str, str]) -> Failed | None:
    """What a statement refused with `sqlstate` means, when a bound refused it (None: it was
    refused for another reason, the executor's general mapping decides)."""
    if sqlstate == READ_ONLY_VIOLATION and read_only(job):
        return violation(job)
    if sqlstate not in CUTS:
        return None
    default, code, said = CUTS[sqlstate]
    return failed(_mapped(mapping.get(sqlstate), default), code, said(limit), final=False)


def violation(job: Job) -> Failed:
    """A READ_ONLY tool's statement tried to write: refused, fail closed."""
    c = job.contract
    message = (
        f"{c.name} {c.version} is declared READ_ONLY, but its statement tried to write; nothing was written. "
        "The tool version is quarantined until an operator releases it"
    )
    return failed(TaxonomyClass.POLICY_VIOLATION, MUTATION_CLASS_VIOLATION, message, final=True)


def violated(effect: object) -> bool:
    """Whether an effect is a mutation-class violation (the tool version is to be quarantined)."""
    return isinstance(effect, Failed) and any(e.code == MUTATION_CLASS_VIOLATION for e in effect.errors)


def _mapped(name: str | None, default: TaxonomyClass) -> TaxonomyClass:
    return TaxonomyClass(name) if name is not None and name in TaxonomyClass.__members__ else default
