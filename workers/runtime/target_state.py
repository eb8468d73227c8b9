"""The target's state an approval is bound to.

A contract whose binding names a `confirmation.before_state` lookup shows the approver the
target as it is (`before_state`), and binds the approval to its *state version*: the SHA-256
of the canonical JSON of the whole row that lookup returns. Approval-wait computes it when it
holds the call; the approver's signed decision names it; execution reads the row again
(under FOR UPDATE in the effect's transaction for a Postgres effect) and refuses with
STALE_STATE if the version moved. Pure, apart from the row the caller read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from toolgate.contracts.contract import Contract
from toolgate.schemas.models import StageRecord
from toolgate.schemas.wire import canonical_json
from toolgate.workers.runtime.facts import Facts, owned

HIDDEN = ("id", "tenant_id")  # what the lookup needs, not what the approver needs to see


def spec(contract: Contract) -> Mapping[str, Any] | None:
    spec: Mapping[str, Any] | None = (contract.binding.get("confirmation") or {}).get("before_state")
    return spec


def refs(record: StageRecord, contract: Contract) -> list[tuple[str, Any]]:
    """(lookup, id) of the target, if the contract binds approvals to its state."""
    found = spec(contract)
    return [(found["lookup"], record.call.arguments.get(found["argument"]))] if found else []


def _json(row: Mapping[str, Any]) -> dict[str, Any]:
    return dict(json.loads(json.dumps(dict(row), default=str)))


def current(record: StageRecord, contract: Contract, rows: Facts) -> dict[str, Any] | None:
    """The target's row as found, if it exists and is the call's tenant's."""
    for lookup, value in refs(record, contract):
        row = owned(rows.get((lookup, str(value))), record.call.tenant_id)
        return None if row is None else _json(row)
    return None


ABSENT = "absent"


def version(row: Mapping[str, Any] | None) -> str:
    """The state version of a target row (ABSENT when there is none)."""
    if row is None:
        return ABSENT
    return "sha256:" + hashlib.sha256(canonical_json(_json(row)).encode()).hexdigest()


def bound_version(record: StageRecord, contract: Contract, rows: Facts) -> str | None:
    """The version an approval of this call binds; None when the contract binds no state."""
    return version(current(record, contract, rows)) if spec(contract) else None


def shown(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The before state on the approver's card."""
    return None if row is None else {k: v for k, v in _json(row).items() if k not in HIDDEN}
