"""Facts about the resources a batch of calls names: the type the gates read, and what a round
must look up to fill it. Pure; `fact_loader.py` runs the lookups in Postgres.

A contract names its lookups (tenant binding, state checks, semantic rules, before state):
one parameterized query per lookup, returning `id`, `tenant_id` and the columns the rules use,
for the ids in `%(ids)s`. A round collects every (lookup, id) its calls need (`needed`) and runs
each distinct lookup once, for every tenant's calls at once. An id is a tenant's own, not the
deployment's (demo.invoices is keyed by tenant and id): a lookup may find one row per tenant for
it, and a call reads only its own tenant's (`owned`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]  # a resource's columns as the lookup returned them
Rows = Sequence[Row]  # the rows a lookup found for one id: one per tenant that has it
Facts = Mapping[tuple[str, str], Rows]  # (lookup, id) -> rows; absent: no such resource


def owned(rows: Rows | None, tenant_id: str) -> Row | None:
    """The tenant's own resource among the rows found for an id, or None: another tenant's
    resource is answered exactly as one that does not exist, so no answer tells whether it does.
    Fail closed: a row that does not say whose it is (no tenant_id column) is nobody's."""
    for row in rows or ():
        if row.get("tenant_id") == tenant_id:
            return row
    return None


def needed(refs: Iterable[tuple[str, Any]]) -> dict[str, set[str]]:
    """The ids to look up, per lookup: (lookup, argument value) pairs whose value is an id."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for lookup, value in refs:
        if isinstance(value, str):
            wanted[lookup].add(value)
    return wanted
