"""The reads of a call's evidence bundle (docs/evidence.md): each source table's rows of one call,
timestamps as the text the bundle carries (RFC 3339 UTC, microseconds: the audit log's form), and
the audit log's leaf hashes streamed for inclusion proofs. Only reads; ops/evidence.py assembles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from toolgate.store.audit import AT_TEXT
from toolgate.store.audit_tree import HEAD_COLUMNS, Head

LEAVES_AT_ONCE = 5000


def _at(column: str, name: str | None = None) -> str:
    return f"{AT_TEXT.format(column)} AS {name or column.split('.')[-1]}"


CALL = (
    "SELECT tenant_id, call_id, proposal_digest, agent_id, signed_document, signature, signature_proof, "
    "arguments FROM toolgate.calls WHERE tenant_id = %s AND call_id = %s"
)
TENANTS_OF = """
SELECT tenant_id FROM toolgate.calls WHERE call_id = %(call)s
UNION SELECT tenant_id FROM toolgate.call_decisions WHERE call_id = %(call)s
UNION SELECT tenant_id FROM toolgate.evidence_bundles WHERE call_id = %(call)s
ORDER BY 1
"""
AGENT_KEY = (
    f"SELECT agent_id, key_id, public_key, status, {_at('created_at', 'registered_at')}, {_at('revoked_at')} "
    "FROM toolgate.agent_keys WHERE agent_id = %s AND key_id = %s"
)
TICKET = f"""
SELECT approval_id, tool_name, tool_version, payload_hash, state_version, risk_class, required_approvals,
    distinct_approvers, approver_groups, status, {_at("created_at")}, {_at("expires_at")}, {_at("decided_at")},
    consumed_by, packet"""
APPROVAL = f"""{TICKET}
FROM toolgate.approvals WHERE tenant_id = %s AND call_id = %s ORDER BY created_at DESC, approval_id DESC LIMIT 1
"""
# The ticket an edited call's ticket was edited from (migration 0032's edit_of), with the edit's decision id.
EDITED_FROM = f"""{TICKET}, edit_decision_id
FROM toolgate.approvals WHERE approval_id = (SELECT edit_of FROM toolgate.approvals WHERE approval_id = %s)
"""
APPROVAL_DECISIONS = f"""
SELECT decision_id, approver_id, verdict, {_at("decided_at")}, signed, signature
FROM toolgate.approval_decisions WHERE approval_id = %s ORDER BY decided_at, decision_id
"""
EDIT_DECISION = f"""
SELECT decision_id, approver_id, verdict, {_at("decided_at")}, signed, signature
FROM toolgate.approval_decisions WHERE approval_id = %s AND decision_id = %s
"""
# An approver's key as registered when its decision on the call's tickets (an edited call's: its own
# and the one it was edited from) was counted, kept with the decision (0036): a key rotated since
# would not verify the decision. Rows before 0036, and an unsigned row: the current key.
APPROVERS = f"""
SELECT p.approver_id,
    coalesce((SELECT d.public_key FROM toolgate.approval_decisions d
              WHERE d.approver_id = p.approver_id AND d.approval_id = ANY(%s) AND d.public_key IS NOT NULL
              ORDER BY d.decided_at LIMIT 1), p.public_key) AS public_key,
    p.groups, p.risk_classes, p.tenants, p.status, {_at("p.created_at", "registered_at")}, {_at("p.revoked_at")}
FROM toolgate.approvers p WHERE p.approver_id = ANY(%s) ORDER BY p.approver_id
"""
EXECUTION = f"""
SELECT idempotency_key, request_hash, status, expired_from, call_id, attempt, response, error_code,
    {_at("created_at")}, {_at("completed_at")}
FROM toolgate.idempotency_keys WHERE tenant_id = %s AND idempotency_key = %s
"""
OBSERVATIONS = (
    f"SELECT topic, key, value, headers, {_at('at')} FROM toolgate.observations "
    "WHERE tenant_id = %s AND call_id = %s ORDER BY id"
)
AUDIT_ROWS = f"""
SELECT id, {_at("at")}, stage, action, actor, call_id, tenant_id, detail, prev_hash, hash
FROM toolgate.audit_log WHERE tenant_id = %s AND call_id = %s ORDER BY id
"""
COSIGNATURES = (
    "SELECT cosignature FROM toolgate.audit_cosignatures WHERE head_id = %s AND outcome = 'cosigned' ORDER BY id"
)
LEAVES = "SELECT id, hash FROM toolgate.audit_log WHERE id > %s ORDER BY id LIMIT %s"
# The first head over every row up to `id`: the checkpoint a bundle of rows up to it proves them in.
HEAD_COVERING = (
    f"SELECT {HEAD_COLUMNS} FROM toolgate.audit_tree_heads WHERE last_row_id >= %s ORDER BY last_row_id LIMIT 1"
)
# The newest head over rows before `id` only: the leaves after it are all a proof of that row needs.
HEAD_BEFORE = (
    f"SELECT {HEAD_COLUMNS} FROM toolgate.audit_tree_heads WHERE last_row_id < %s ORDER BY last_row_id DESC LIMIT 1"
)


async def _one(conn: AsyncConnection[Any], query: str, params: Sequence[Any]) -> dict[str, Any] | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchone()


async def _all(conn: AsyncConnection[Any], query: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


async def tenants_of(conn: AsyncConnection[Any], call_id: str) -> list[str]:
    """The tenants that have a call of this id (bound, decided or archived)."""
    cur = await conn.execute(TENANTS_OF, {"call": call_id})
    return [str(row[0]) for row in await cur.fetchall()]


async def call(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> dict[str, Any] | None:
    return await _one(conn, CALL, (tenant_id, call_id))


async def agent_key(conn: AsyncConnection[Any], agent_id: str, key_id: str) -> dict[str, Any] | None:
    return await _one(conn, AGENT_KEY, (agent_id, key_id))


async def approval(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> dict[str, Any] | None:
    """The call's newest ticket (an edited call's edited ticket), or None."""
    return await _one(conn, APPROVAL, (tenant_id, call_id))


async def edited_from(conn: AsyncConnection[Any], approval_id: str) -> dict[str, Any] | None:
    """The ticket `approval_id` was edited from, with its edit_decision_id (None: it is no edit's)."""
    return await _one(conn, EDITED_FROM, (approval_id,))


async def edit_decision(conn: AsyncConnection[Any], approval_id: str, decision_id: str) -> dict[str, Any] | None:
    """The editor's decision that closed ticket `approval_id` EDITED."""
    return await _one(conn, EDIT_DECISION, (approval_id, decision_id))


async def approval_decisions(conn: AsyncConnection[Any], approval_id: str) -> list[dict[str, Any]]:
    return await _all(conn, APPROVAL_DECISIONS, (approval_id,))


async def approvers(
    conn: AsyncConnection[Any], approval_ids: Sequence[str], approver_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """The approvers of these ids, each with its key as registered when its decision on one of the
    tickets `approval_ids` was counted."""
    return await _all(conn, APPROVERS, (list(approval_ids), list(approver_ids)))


async def execution(conn: AsyncConnection[Any], tenant_id: str, idempotency_key: str) -> dict[str, Any] | None:
    return await _one(conn, EXECUTION, (tenant_id, idempotency_key))


async def observations(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> list[dict[str, Any]]:
    return await _all(conn, OBSERVATIONS, (tenant_id, call_id))


async def audit_rows(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> list[dict[str, Any]]:
    return await _all(conn, AUDIT_ROWS, (tenant_id, call_id))


async def cosignatures(conn: AsyncConnection[Any], head_id: int) -> list[str]:
    """The signature lines the witnesses gave a tree head."""
    cur = await conn.execute(COSIGNATURES, (head_id,))
    return [str(row[0]) for row in await cur.fetchall()]


async def head_covering(conn: AsyncConnection[Any], row_id: int) -> Head | None:
    """The first tree head that covers every row up to `row_id` (None: none does yet)."""
    return Head.of(await (await conn.execute(HEAD_COVERING, (row_id,))).fetchone())


async def head_before(conn: AsyncConnection[Any], row_id: int) -> Head | None:
    """The newest tree head that covers only rows before `row_id` (None: there is none)."""
    return Head.of(await (await conn.execute(HEAD_BEFORE, (row_id,))).fetchone())


async def leaves(conn: AsyncConnection[Any], after_id: int, count: int) -> AsyncIterator[tuple[int, bytes]]:
    """(id, 32-byte chain hash) of the `count` rows after `after_id`, in id order, from a server-side
    cursor a part at a time (inside the caller's transaction: a named cursor lives in one)."""
    async with conn.cursor(name="evidence_leaves") as cur:
        await cur.execute(LEAVES, (after_id, count))
        while rows := await cur.fetchmany(LEAVES_AT_ONCE):
            for row_id, digest in rows:
                yield int(row_id), bytes.fromhex(digest)
