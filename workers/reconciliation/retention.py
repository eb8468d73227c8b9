"""What toolgate forgets, and when: the age past which each table that grows with every call is
pruned.

Pure: the configured windows and what the readers of each table still need come in; one age
per table comes out. An operator configures two windows, `retention_days` for the history of
finished calls and `retention_tombstone_days` for the tombstones of expired idempotency keys:
the key of an operation that ended (which never runs again, idempotency.plan), and every expired
key of a contract that refuses one (`expired_key: reject`: the refusal needs the key to still
exist). Neither may cut below what a reader needs; a window below a floor is raised to it, and
the reason said:

    table                 pruned when older than                 floor (a reader that needs it)
    calls                 history, and no approval of it is kept  the proposal window: a replay
                                                                  older than it is refused as stale
    repair_attempts       history                                 the proposal window
    usage_events          history                                 the longest deduplication window
                                                                  (policy skips what it counted) and
                                                                  the longest rate window
    usage_daily           history, in whole UTC days             2 days (today's budget, and
                                                                  yesterday's near midnight)
    approvals, decisions  history since the decision; PENDING    the proposal window
                          never
    read_outcomes         the proposal window (a copy of a read   the proposal window
                          past it is refused as stale before
                          it could be answered from one)
    call_decisions        history                                 none: what-if and `policy decided`
                                                                  read what is kept
    observations          history (call_decisions' age)           none: `toolgate evidence` reads
                                                                  what is kept
    dead_letter_actions   history                                the dead-letter topic's retention:
                                                                  a letter still on the topic keeps
                                                                  its action, so it is not undone
    idempotency_keys      EXPIRED for history; a tombstone (an   the longest deduplication window;
                          operation that ended, or a contract    a tombstone also the dead-letter
                          that refuses an expired key) for the   topic's retention, so no letter an
                          tombstone window, stripped of its      operator may still replay outlives
                          request and outcome after history;     the key that refuses it
                          no other status ever

The audit log and its checkpoints are never pruned: their retention is a compliance decision
(the seeds: typically 1-7 years), made by their owner with the log archived and verified first.
The outbox prunes its own sent rows (workers/outbox/relay.py).
"""

from __future__ import annotations

from dataclasses import dataclass

DAY_S = 86_400.0


@dataclass(frozen=True)
class Needs:
    """What the readers of the pruned tables need kept, in seconds."""

    proposal_window_s: float  # proposal_max_age + future skew
    dedupe_window_s: float  # the longest idempotency ttl among the contracts
    rate_window_s: float  # the longest rate window, of the contracts or granted by the policy
    deadletter_retention_s: float  # the dead-letter topic's retention


@dataclass(frozen=True)
class Ages:
    """How old (seconds) a row must be before it is pruned, per table."""

    calls: float
    repair_attempts: float
    usage_events: float
    usage_daily_days: int
    approvals: float
    read_outcomes: float
    call_decisions: float
    dead_letter_actions: float
    expired_keys: float
    key_tombstones: float
    raised: tuple[str, ...]  # which configured windows a floor raised, and why


def ages(history_days: float, tombstone_days: float, needs: Needs) -> Ages:
    history = history_days * DAY_S
    raised: list[str] = []

    def at_least(table: str, floor: float, why: str, window: float = history) -> float:
        if window < floor:
            raised.append(f"{table}: {window:.0f} s raised to {floor:.0f} s ({why})")
            return floor
        return window

    keys = at_least("idempotency_keys", needs.dedupe_window_s, "the longest deduplication window")
    tombstones = at_least(
        "idempotency_key_tombstones",
        max(keys, needs.deadletter_retention_s),
        "the longest deduplication window and the dead-letter topic's retention",
        tombstone_days * DAY_S,
    )
    return Ages(
        calls=at_least("calls", needs.proposal_window_s, "the proposal window"),
        repair_attempts=at_least("repair_attempts", needs.proposal_window_s, "the proposal window"),
        usage_events=at_least(
            "usage_events",
            max(needs.dedupe_window_s, needs.rate_window_s),
            "the longest deduplication or rate window",
        ),
        usage_daily_days=max(2, int(history // DAY_S)),
        approvals=at_least("approvals", needs.proposal_window_s, "the proposal window"),
        read_outcomes=needs.proposal_window_s,
        call_decisions=history,
        dead_letter_actions=at_least(
            "dead_letter_actions", needs.deadletter_retention_s, "the dead-letter topic's retention"
        ),
        expired_keys=keys,
        key_tombstones=tombstones,
        raised=tuple(raised),
    )
