"""toolgate's store: every query of its Postgres tables, a module per table family, each with its
named statements, the typed rows they return and the functions that send them; `db.py` (pools,
JSON, transient errors) and `batch.py` (a transaction's statements in one round trip) are how
every module sends. Stages, operators' commands and the CLI ask the store; none of them writes SQL
(tests/unit/test_sql_in_store.py). Schema changes are the migrations' (ops/migrations/)."""
