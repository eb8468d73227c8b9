"""The audit log cannot be cut unseen (issue 9): workers may only append to it, nobody may
truncate it, and `toolgate audit verify` compares it with its newest signed checkpoint, so rows
deleted from its end, or a table emptied by its owner, are reported."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolgate.store.audit import LOCK_ID

from ..conftest import Pipeline, eventually
from .test_trust_boundary import audit_rows, publish_proposal, raw_proposal

pytestmark = pytest.mark.timeout(180)


def worker_database_url(pipeline: Pipeline, stage: str) -> str:
    """The database URL a running worker process was started with."""
    environ = Path(f"/proc/{pipeline.worker_pid(stage)}/environ").read_bytes().split(b"\0")
    found = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
    return found["TOOLGATE_DATABASE_URL"]


def audited_refusal(pipeline: Pipeline) -> str:
    """A worker appends to the audit log: an unsigned proposal is refused and audited."""
    forged = raw_proposal(call_id=f"call_{uuid.uuid4().hex}")
    publish_proposal(pipeline, forged)
    eventually(lambda: audit_rows(pipeline, forged.call_id))
    return forged.call_id


def verify(pipeline: Pipeline) -> tuple[int, str]:
    """`toolgate audit verify`: its exit code and what it said (on one line each)."""
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.cli", "audit", "verify"],
        env={**pipeline.env, "COLUMNS": "1000"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    return done.returncode, done.stdout + done.stderr


@contextmanager
def writers_held(pipeline: Pipeline) -> Iterator[psycopg.Connection[Any]]:
    """An owner's connection, with every audit writer held off (they wait on this lock), so
    what a test cuts it can put back before anything else is appended."""
    with psycopg.connect(pipeline.database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_ID,))
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK_ID,))


def test_workers_connect_as_a_role_that_may_only_append_to_the_audit_log(pipeline: Pipeline) -> None:
    audited_refusal(pipeline)  # the workers' role can append (and sign a checkpoint)
    urls = {worker_database_url(pipeline, stage) for stage in ("validation", "policy", "execution")}
    assert len(urls) == 1
    with psycopg.connect(urls.pop(), autocommit=True) as conn:
        [(role, superuser)] = conn.execute(
            "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchall()
        assert superuser is False, f"workers connect as {role}, a superuser"
        for statement in (
            "TRUNCATE toolgate.audit_log",
            "DELETE FROM toolgate.audit_log WHERE id = (SELECT max(id) FROM toolgate.audit_log)",
            "UPDATE toolgate.audit_log SET actor = 'mallory' WHERE id = (SELECT max(id) FROM toolgate.audit_log)",
            "ALTER TABLE toolgate.audit_log DISABLE TRIGGER USER",
            "DELETE FROM toolgate.audit_heads",
            "DELETE FROM toolgate.audit_tree_heads",
            "UPDATE toolgate.audit_cosignatures SET outcome = 'refused'",
            "TRUNCATE toolgate.audit_tree_heads",
            "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes) VALUES ('mallory', '\\x00', '{}')",
        ):
            # Always rolled back: on the code before the fix the worker's role could do all of it.
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction(force_rollback=True):
                conn.execute(statement)
        assert conn.execute("SELECT count(*) FROM toolgate.audit_log").fetchone()[0] > 0  # it may read


def test_not_even_the_owner_may_truncate_the_audit_log(pipeline: Pipeline) -> None:
    with psycopg.connect(pipeline.database_url, autocommit=True) as conn:
        for table in (
            "toolgate.audit_log",
            "toolgate.audit_heads",
            "toolgate.audit_cosignatures, toolgate.audit_tree_heads",  # (one refers to the other)
        ):
            with (
                pytest.raises(psycopg.errors.RaiseException, match="append-only"),
                conn.transaction(force_rollback=True),
            ):
                conn.execute(f"TRUNCATE {table}")


def test_audit_verify_reports_rows_cut_from_the_end(pipeline: Pipeline) -> None:
    audited_refusal(pipeline)
    assert verify(pipeline)[0] == 0
    with writers_held(pipeline) as owner:
        owner.execute("CREATE TEMP TABLE cut AS SELECT * FROM toolgate.audit_log ORDER BY id DESC LIMIT 3")
        with owner.transaction():  # the owner can get past the append-only trigger
            owner.execute("ALTER TABLE toolgate.audit_log DISABLE TRIGGER USER")
            owner.execute("DELETE FROM toolgate.audit_log WHERE id IN (SELECT id FROM cut)")
            owner.execute("ALTER TABLE toolgate.audit_log ENABLE TRIGGER USER")
        try:
            code, said = verify(pipeline)
            assert code == 1, said
            assert "audit log cut" in said and "3 row(s) are missing from its end" in said
        finally:
            owner.execute("INSERT INTO toolgate.audit_log SELECT * FROM cut ORDER BY id")
    assert verify(pipeline)[0] == 0  # put back as it was


def test_audit_verify_reports_a_table_its_owner_emptied(pipeline: Pipeline) -> None:
    audited_refusal(pipeline)
    with writers_held(pipeline) as owner:
        rows = owner.execute("SELECT count(*) FROM toolgate.audit_log").fetchone()[0]
        owner.execute("CREATE TEMP TABLE kept AS SELECT * FROM toolgate.audit_log")
        with owner.transaction():
            owner.execute("ALTER TABLE toolgate.audit_log DISABLE TRIGGER USER")
            owner.execute("TRUNCATE toolgate.audit_log")
            owner.execute("ALTER TABLE toolgate.audit_log ENABLE TRIGGER USER")
        try:
            code, said = verify(pipeline)
            assert code == 1, said
            assert "audit log cut" in said and f"{rows} row(s) are missing from its end" in said
        finally:
            owner.execute("INSERT INTO toolgate.audit_log SELECT * FROM kept ORDER BY id")
    assert verify(pipeline)[0] == 0


def test_audit_verify_ignores_a_checkpoint_nobody_signed(pipeline: Pipeline) -> None:
    """Only the deployment's signature makes a checkpoint count: one forged by whoever may insert
    into the table (here claiming far more rows than the log holds) changes no verdict."""
    audited_refusal(pipeline)
    with psycopg.connect(pipeline.database_url, autocommit=True) as owner:
        owner.execute(
            "INSERT INTO toolgate.audit_heads (row_count, head_hash, signature) VALUES (10000000, %s, %s)",
            ("f" * 64, os.urandom(64)),
        )
    code, said = verify(pipeline)
    assert code == 0 and "audit chain intact" in said, said
    assert "1 checkpoint(s) not signed by this deployment, ignored" in said
    audited_refusal(pipeline)  # and the next append is checkpointed as before
    code, said = verify(pipeline)
    assert code == 0 and "newer row(s) not covered" not in said, said


def test_the_reconciliation_worker_takes_signed_tree_heads_over_the_log(pipeline: Pipeline) -> None:
    """Every TOOLGATE_AUDIT_TREE_SECONDS (10) the reconciliation worker extends the log's Merkle
    tree over the rows since its last head and stores the new head, signed (issue 53 part 3);
    `audit verify` checks every head against the tree recomputed over the chain."""
    audited_refusal(pipeline)

    def covered() -> bool:
        with psycopg.connect(pipeline.database_url) as conn:
            [(rows, size)] = conn.execute(
                "SELECT (SELECT count(*) FROM toolgate.audit_log), "
                "(SELECT coalesce(max(tree_size), 0) FROM toolgate.audit_tree_heads)"
            ).fetchall()
        return bool(size and size >= rows - 5)  # the rows since the last round may be newer

    eventually(covered, timeout=40)
    code, said = verify(pipeline)
    assert code == 0 and "signed tree head(s)" in said and "no longer hash" not in said, said
