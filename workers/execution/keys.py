"""The idempotency key rows execution writes (`toolgate.idempotency_keys`), built from its calls.

Pure: the reservation step reserves new keys as PENDING (leased to this process) and re-drives
existing ones the plan lets run again (`reservation`, `redrive_row`); the recording step settles
each key with its status and stored response (`settlement`). The driver (performer.py) sends
them with store/keys.py's statements, inside the step's transaction.

A round whose effects all run in Postgres reserves and records in one transaction, so no one
ever sees its new keys PENDING: it only locks the keys that exist (LockKeys), and the recording
inserts each new key once, with its end (`settled_row`, store/keys.py `insert_settled`), instead
of inserting it PENDING and updating it. That update was never a HOT one (it changes the status
of partial indexes): it wrote a second row version and three index entries per call, and left
the first for autovacuum. Measured with pg_stat_statements at 1,000 calls/s, the update was the
stage's costliest statement. Another transaction may insert the same key after the lock read
found none: then the insert finds it taken (performer.KeyTaken), and the round runs again and
finds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolgate.schemas.models import ExecutionResult
from toolgate.states import KeyStatus
from toolgate.workers.execution.answers import stored_response

if TYPE_CHECKING:
    from toolgate.workers.execution.machine import Arrived


def reservation(call: Arrived) -> dict[str, Any]:
    """What a new key records of the call that reserves it."""
    return {
        "tenant_id": call.record.call.tenant_id,
        "idempotency_key": call.key,
        "request_hash": call.record.call.request_hash,
        "tool_name": call.record.call.tool_name,
        "tool_version": call.record.call.tool_version,
        "executor": call.job.contract.executor["kind"],
        "call_id": call.record.call.call_id,
        "home_partition": call.record.call.home_partition,
        "request": call.raw,  # the bytes as received: no re-encoding
        "ttl": call.job.contract.idempotency_ttl_seconds,
    }


def redrive_row(call: Arrived, attempt: int) -> dict[str, Any]:
    """An existing key this call runs again, as this attempt, leased to this process."""
    return {
        "tenant_id": call.record.call.tenant_id,
        "idempotency_key": call.key or "",
        "attempt": attempt,
        "call_id": call.record.call.call_id,
        "request": call.raw,  # the bytes as received: no re-encoding
        "request_hash": call.record.call.request_hash,
        "ttl": call.job.contract.idempotency_ttl_seconds,
    }


def settlement(tenant_id: str, key: str, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A key's end: its status, the response a repeat replays, and its error class."""
    return {
        "tenant_id": tenant_id,
        "idempotency_key": key,
        "status": status,
        "response": stored_response(res) if status != KeyStatus.PENDING else None,
        "error_code": None if status == KeyStatus.COMPLETED else str(res.outcome.taxonomy_class),
    }


def settled_row(call: Arrived, res: ExecutionResult, status: KeyStatus) -> dict[str, Any]:
    """A new key as `insert_settled` writes it: its reservation and its end at once (the driver
    stores the response as JSON text)."""
    return {**reservation(call), **settlement(call.record.call.tenant_id, call.key or "", res, status)}
