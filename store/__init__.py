"""toolgate's store: every query of its Postgres tables, a module per table family, each with its
named statements, the typed rows they return and the functions that send them; `db.py` (pools,
JSON, transient errors) and `batch.py` (a transaction's statements in one round trip) are how
every module sends. Stages, operators' commands and the CLI ask the store; none of them writes SQL
(tests/unit/test_sql_in_store.py). Schema changes are the migrations' (ops/migrations/).

How a statement is written: once, as a named constant, for every way it may be sent. An array
parameter is `%b` (`ANY(%b)`, `unnest(%(name)b::text[])`): sent alone it goes in binary, which
costs the client a fraction of psycopg's text arrays (docs/performance.md, "Cheaper statements
and admissions"); every other parameter is `%s`. A batch binds both as literals (batch.py), so no
statement is rewritten for the way it goes.

How a statement is sent, one rule: what the caller must wait on decides.

    the statements                                      sent with
    one, or each needing the answer of the one before   `conn.execute` (`db.keyed` for a round's
                                                         keys joined to a table without bound)
    a transaction's statements that need no answer      `batch.run` in `batch.transaction`, with
    before the next and carry small values (the           BEGIN and COMMIT in the batches: the
    policy round, the audit chain's lock and tail)        fewest round trips and the least CPU
    a transaction's writes carrying large arrays or     a psycopg pipeline (`conn.pipeline()`),
    bytes (keys, requests, outbox payloads), or one       whose results are read after its sync:
    statement for many rows' own result sets              binary values, `executemany`
                                                          (execution's recording and effects)

Several rows of one statement go as one multi-row statement (`unnest` of arrays, or
`jsonb_to_recordset` of `db.rows_json`), not a statement per row; `executemany` only where each
row must answer on its own (a tool's statement) or the rows are few (compensations marked).
"""
