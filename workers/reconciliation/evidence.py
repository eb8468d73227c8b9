"""A call's evidence bundle assembled from its rows (docs/evidence.md): what `toolgate evidence`
prints, `evidence export` writes and the pruner archives before a call's operational rows go.

Calls are assembled a batch at a time: each call's rows are read (store/evidence.py), then the
audit log's leaf hashes stream by once for the whole batch, and every audit row of every call in
it gets its inclusion proof to the newest tree head (log_tree.InclusionPaths holds the nodes the
paths need, never the leaves). Inside the caller's transaction; only reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection

from toolgate.settings import Settings
from toolgate.store import audit_tree, call_decisions
from toolgate.store import evidence as store
from toolgate.trust.checkpoint_keys import trusted_keys
from toolgate.trust.log_tree import CompactRange, InclusionPaths
from toolgate.trust.witness_keys import witnesses_of
from toolgate.workers.reconciliation import evidence_bundle as sections


@dataclass(frozen=True)
class PublicKeys:
    """The deployment's and the witnesses' keys every bundle of a deployment carries."""

    deployment: list[dict[str, Any]]
    witnesses: list[dict[str, str]]

    @classmethod
    def of(cls, settings: Settings) -> PublicKeys:
        trusted = trusted_keys(settings).keys.values()
        return cls(
            sections.deployment(k.raw for k in trusted), sections.witnesses(witnesses_of(settings.audit_witnesses))
        )


@dataclass
class Parts:
    """One call's sections, read; its audit rows wait for their proofs."""

    tenant_id: str
    call_id: str
    sections: dict[str, Any]
    audit: list[dict[str, Any]] = field(default_factory=list)


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def read_parts(conn: AsyncConnection[Any], tenant_id: str, call_id: str) -> Parts:
    call = await store.call(conn, tenant_id, call_id)
    decided = await call_decisions.of_call(conn, call_id, tenant_id)
    judged = sections.judged_call(decided)
    ticket = await store.approval(conn, tenant_id, call_id)
    signed = await store.approval_decisions(conn, ticket["approval_id"]) if ticket else []
    original = await store.edited_from(conn, ticket["approval_id"]) if ticket else None
    edited_by = original and original["edit_decision_id"]
    edit = await store.edit_decision(conn, original["approval_id"], edited_by) if original and edited_by else None
    deciders = [d["approver_id"] for d in signed] + ([edit["approver_id"]] if edit else [])
    tickets = [t["approval_id"] for t in (ticket, original) if t]
    document = sections.signing_document(call) or {}
    agent_id = (document.get("principal") or {}).get("agent_id") or (call or {}).get("agent_id")
    key_id = document.get("key_id")
    agent = await store.agent_key(conn, agent_id, key_id) if agent_id and key_id else None
    key = (judged or {}).get("idempotency_key")
    return Parts(
        tenant_id,
        call_id,
        {
            "keys": {
                "agent": sections.agent(agent),
                "approvers": sections.approvers(await store.approvers(conn, tickets, sorted(set(deciders)))),
            },
            "proposal": sections.proposal(call),
            "call": sections.call_section(call, judged),
            "decisions": sections.decisions(decided),
            "approval": sections.approval(ticket, signed),
            "edit": sections.edit(original, edit),
            "execution": sections.execution(await store.execution(conn, tenant_id, key) if key else None),
            "observations": sections.observations(await store.observations(conn, tenant_id, call_id)),
        },
        await store.audit_rows(conn, tenant_id, call_id),
    )


async def assemble(
    conn: AsyncConnection[Any], keys: PublicKeys, calls: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The bundle of each (tenant_id, call_id), in order. Their audit rows are proven in the first
    tree head that covers them all (the newest, while none does yet): a bundle's checkpoint is the
    same whenever it is made, and its proofs read the log's rows of its calls' time, not every row
    since (a later head is consistent with it: the witnesses checked that)."""
    parts = [await read_parts(conn, tenant_id, call_id) for tenant_id, call_id in calls]
    last = max((row["id"] for p in parts for row in p.audit), default=0)
    head = await store.head_covering(conn, last) or await audit_tree.last_head(conn)
    checkpoint, covered = None, 0
    paths: dict[int, tuple[int, list[bytes]]] = {}  # by row id: leaf index, audit path
    if head is not None:
        lines = await store.cosignatures(conn, head.id)
        checkpoint = {
            "note": sections.cosigned_note(head.note, lines),
            "tree_size": head.tree_size,
            "root_hash": head.root_hash.hex(),
            "key_id": head.key_id,
        }
        covered = head.last_row_id
        wanted = {row["id"] for p in parts for row in p.audit if row["id"] <= covered}
        paths = await _proofs(conn, head.tree_size, wanted)
    made_at = now_text()
    return [_bundle(p, keys, checkpoint, covered, paths, made_at) for p in parts]


async def _proofs(conn: AsyncConnection[Any], size: int, wanted: set[int]) -> dict[int, tuple[int, list[bytes]]]:
    """Each wanted row's leaf index and audit path in the tree of `size`: from the compact range of
    the newest head before the first of them, over the leaves after it (not the whole log)."""
    if not wanted:
        return {}
    before = await store.head_before(conn, min(wanted))
    start = CompactRange.of_bytes(before.tree_size, before.compact_range) if before else CompactRange(0)
    tree, index_of = InclusionPaths(size, start), {}
    async for row_id, digest in store.leaves(conn, before.last_row_id if before else 0, size - start.size):
        chosen = row_id in wanted
        at = tree.add(digest, chosen)
        if chosen:
            index_of[row_id] = at
    proofs = tree.proofs()
    return {row_id: (at, proofs[at]) for row_id, at in index_of.items()}


def _bundle(
    p: Parts,
    keys: PublicKeys,
    checkpoint: dict[str, Any] | None,
    covered: int,
    paths: dict[int, tuple[int, list[bytes]]],
    made_at: str,
) -> dict[str, Any]:
    rows = [sections.audit_row(row, *paths.get(row["id"], (None, None))) for row in p.audit]
    audit = {"rows": rows, "checkpoint": checkpoint, "uncovered": sum(1 for r in rows if r["inclusion"] is None)}
    found = dict(p.sections)
    found["keys"] = {"deployment": keys.deployment, **found["keys"], "witnesses": keys.witnesses}
    return sections.bundle(p.tenant_id, p.call_id, made_at, **found, audit=audit)
