"""Approvers change only on purpose, and every change is audited (issue 9): `approvers add`
refuses an id already registered, a key is replaced only by `approvers rotate`, a revocation is
never undone, and the demo setup of `toolgate up` leaves registered approvers as they are."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from toolgate.trust.agent_keys import key_id_of
from toolgate.trust.signing import Keyring, public_bytes

from ..conftest import Pipeline

pytestmark = pytest.mark.timeout(240)


def approver(pipeline: Pipeline, approver_id: str) -> tuple[Any, ...]:
    [row] = pipeline.sql(
        "SELECT status, public_key, risk_classes, groups FROM toolgate.approvers WHERE approver_id = %s",
        (approver_id,),
    )
    return (row[0], bytes(row[1]), list(row[2]), list(row[3]))


def changes(pipeline: Pipeline, approver_id: str) -> list[tuple[str, str, str | None]]:
    """(action, actor, key id) of every audited change of one approver."""
    rows = pipeline.sql(
        "SELECT action, actor, detail->>'key_id' FROM toolgate.audit_log WHERE stage = 'registry' "
        "AND detail->>'approver' = %s ORDER BY id",
        (approver_id,),
    )
    return [(str(a), str(b), c) for a, b, c in rows]


def keyring_key(pipeline: Pipeline, approver_id: str) -> bytes:
    return public_bytes(Keyring(pipeline.home / "approvers").load(approver_id))


def test_adding_an_approver_that_exists_changes_nothing(pipeline: Pipeline) -> None:
    before, pem = approver(pipeline, "alice"), (pipeline.home / "approvers" / "alice.pem").read_bytes()
    again = pipeline.cli("approvers", "add", "alice", "--risk-classes", "MEDIUM_RISK_WRITE")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "already registered (active)" in again.stdout and "rotate" in again.stdout
    assert approver(pipeline, "alice") == before
    assert (pipeline.home / "approvers" / "alice.pem").read_bytes() == pem


def test_a_revoked_approver_stays_revoked_and_every_change_is_audited(pipeline: Pipeline) -> None:
    erin = f"erin-{uuid.uuid4().hex[:8]}"
    added = pipeline.cli("approvers", "add", erin, "--risk-classes", "HIGH_RISK_EXTERNAL", "--tenant", "acme")
    assert added.returncode == 0, added.stdout + added.stderr
    first = key_id_of(approver(pipeline, erin)[1])
    rotated = pipeline.cli("approvers", "rotate", erin, "--as", "sec-ops")
    assert rotated.returncode == 0, rotated.stdout + rotated.stderr
    status, key, _, _ = approver(pipeline, erin)
    assert status == "active" and key == keyring_key(pipeline, erin) and key_id_of(key) != first
    assert pipeline.cli("approvers", "revoke", erin, "--as", "sec-ops").returncode == 0

    again = pipeline.cli("approvers", "add", erin)
    assert again.returncode == 1 and "already registered (revoked)" in again.stdout, again.stdout + again.stderr
    assert pipeline.cli("approvers", "rotate", erin).returncode == 1
    assert approver(pipeline, erin)[0] == "revoked"
    assert changes(pipeline, erin) == [
        ("approver_registered", "operator", first),
        ("approver_key_rotated", "sec-ops", key_id_of(key)),
        ("approver_revoked", "sec-ops", key_id_of(key)),
    ]


def test_the_demo_setup_leaves_registered_approvers_as_they_are(pipeline: Pipeline) -> None:
    """`toolgate setup --demo` runs the demo setup of every `toolgate up`."""
    try:
        assert pipeline.cli("approvers", "revoke", "dave").returncode == 0
        before = approver(pipeline, "dave")
        setup = pipeline.cli("setup", "--demo", timeout=180)
        assert setup.returncode == 0, setup.stdout + setup.stderr
        assert approver(pipeline, "dave") == before  # still revoked, same key
        assert [a for a, _, _ in changes(pipeline, "dave")][-1] == "approver_revoked"
    finally:  # dave approves in other tests: reinstated the only way there is, by the tables' owner
        pipeline.sql("UPDATE toolgate.approvers SET status = 'active', revoked_at = NULL WHERE approver_id = 'dave'")
