"""The bounds a tool's own statements run within, inside the transaction that runs them
(workers/execution/executors.py): how long a statement may run and wait on a lock, and, for a
READ_ONLY tool, that it may not write.

Every setting is transaction-local (`set_config(..., true)`, as `SET LOCAL`): it ends with the
transaction, whatever happens. The limits are set before the effects and set back to the
values they replaced after them (`PRIOR`), so toolgate's own writes that follow in the same
transaction (keys, outbox rows, audit entries) are never cut by a call's deadline.

A READ_ONLY tool's statements run in a savepoint made read-only (`READ_ONLY`, then `END_READ`).
Postgres lets a read-write transaction turn read-only at any time, even after it wrote, and
only inside the savepoint: its end, released or rolled back, gives the transaction back its
read-write mode (tests/integration/test_bounded_effects.py holds the server to it). Inside it,
a statement that would write is refused with SQLSTATE 25006, and it may not turn read-write
again (25001). Writes to the session's own temporary tables stay allowed there, as in any
read-only transaction: they change nothing another session sees.
"""

from __future__ import annotations

from toolgate.store.batch import Statement

# The bounds, and the values they replace kept aside (transaction-local placeholders) to be
# set back by `PRIOR`: one statement each way, no read of pg_settings (whose full scan cost the
# server ~0.5 ms a round, measured). The subquery (OFFSET 0: not flattened) runs first.
LIMITS = (
    "SELECT set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true) FROM (SELECT "
    "set_config('toolgate.prior_statement_timeout', current_setting('statement_timeout'), true), "
    "set_config('toolgate.prior_lock_timeout', current_setting('lock_timeout'), true) OFFSET 0) AS prior"
)
PRIOR = (
    "SELECT set_config('statement_timeout', current_setting('toolgate.prior_statement_timeout'), true), "
    "set_config('lock_timeout', current_setting('toolgate.prior_lock_timeout'), true)"
)
READ_ONLY_SAVEPOINT = "SAVEPOINT toolgate_read_only"
READ_ONLY = "SELECT set_config('transaction_read_only', 'on', true)"
END_READ = "RELEASE SAVEPOINT toolgate_read_only"


def limits(statement_ms: int, lock_ms: int) -> Statement:
    """The statement that bounds what follows in the transaction (milliseconds, each at least 1:
    0 would mean no bound at all)."""
    return LIMITS, (str(max(1, statement_ms)), str(max(1, lock_ms)))
