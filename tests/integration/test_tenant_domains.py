"""Tenants' own mail domains (migration 0025, issue 51): what Cedar policies see as a tenant's
`domains`. The migration gives every tenant none and stores them as they are compared (lower
case, no NULL); `toolgate tenants domains` shows and sets them, audited, refusing what is no
domain and a tenant not registered; and the policy stage's read (store/tenants.py
`domains_among`, read by `domains`) goes in its round's batch, as the workers' role."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from toolgate.ops.migrate import migrate
from toolgate.store import batch, tenants

from .conftest import Database, Server, migrated_before

MIGRATION = "0025_tenant_domains.sql"


def test_every_tenant_has_none_and_they_are_stored_as_compared(postgres: Server) -> None:
    with postgres.scratch("tenant_domains", template=None) as database:
        with psycopg.connect(database.database_url, autocommit=True) as conn:
            migrated_before(conn, MIGRATION)
            conn.execute("INSERT INTO toolgate.tenants (tenant_id) VALUES ('acme')")
        assert MIGRATION in migrate(database.database_url)
        database.sql("INSERT INTO toolgate.tenants (tenant_id) VALUES ('globex')")
        assert database.sql("SELECT tenant_id, domains FROM toolgate.tenants ORDER BY 1") == [
            ("acme", []),
            ("globex", []),
        ]
        for bad in (["Acme.example"], ["acme.example", None]):
            with pytest.raises(psycopg.errors.CheckViolation):
                database.sql("UPDATE toolgate.tenants SET domains = %s WHERE tenant_id = 'acme'", (bad,))
        database.sql("UPDATE toolgate.tenants SET domains = '{acme.example}' WHERE tenant_id = 'acme'")
        assert database.sql("SELECT domains FROM toolgate.tenants WHERE tenant_id = 'acme'") == [(["acme.example"],)]


def cli(database: Database, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")},
        "TOOLGATE_HOME": str(home),
        "TOOLGATE_DATABASE_URL": database.database_url,
        "TOOLGATE_KAFKA_BOOTSTRAP": "127.0.0.1:9",  # required to be set; the command never uses it
    }
    command = [sys.executable, "-m", "toolgate.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join(f"{done.stdout} {done.stderr}".split())


def changes(database: Database, tenant: str) -> list[tuple[Any, ...]]:
    return database.sql(
        "SELECT actor, detail->'domains', detail->'previous_domains' FROM toolgate.audit_log "
        "WHERE action = 'tenant_domains_changed' AND tenant_id = %s ORDER BY id",
        (tenant,),
    )


def test_an_operator_sets_a_tenants_domains_audited(database: Database, tmp_path: Path) -> None:
    shown = cli(database, tmp_path, "tenants", "domains", "globex", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == [], said(shown)
    done = cli(database, tmp_path, "tenants", "domains", "globex", "--set", " Globex.example,mail.globex.example,")
    assert done.returncode == 0, said(done)
    assert "globex.example, mail.globex.example" in said(done)
    done = cli(database, tmp_path, "tenants", "domains", "globex", "--set", "globex.example", "--as", "sec-ops")
    assert done.returncode == 0, said(done)
    shown = cli(database, tmp_path, "tenants", "domains", "globex", "--json")
    assert json.loads(shown.stdout) == ["globex.example"]
    assert changes(database, "globex") == [
        ("operator", ["globex.example", "mail.globex.example"], []),
        ("sec-ops", ["globex.example"], ["globex.example", "mail.globex.example"]),
    ]
    # What is no domain is refused, naming it, and changes nothing.
    for bad in ("globex", "@globex.example", "globex..example", "-globex.example"):
        refused = cli(database, tmp_path, "tenants", "domains", "globex", "--set", f"globex.example,{bad}")
        assert refused.returncode == 1 and "is not a mail domain" in said(refused) and bad in said(refused)
    unknown = cli(database, tmp_path, "tenants", "domains", "initech", "--set", "initech.example")
    assert unknown.returncode == 1 and "tenant initech is not registered" in said(unknown), said(unknown)
    assert cli(database, tmp_path, "tenants", "domains", "initech").returncode == 1
    assert len(changes(database, "globex")) == 2 and changes(database, "initech") == []
    cleared = cli(database, tmp_path, "tenants", "domains", "globex", "--set", "", "--json")
    assert cleared.returncode == 0 and json.loads(cleared.stdout) == [], said(cleared)
    assert database.sql("SELECT domains FROM toolgate.tenants WHERE tenant_id = 'globex'") == [([],)]


def test_the_policy_round_reads_its_tenants_domains_in_its_batch(database: Database) -> None:
    database.sql("UPDATE toolgate.tenants SET domains = '{acme.co.uk,acme.example}' WHERE tenant_id = 'acme'")

    async def read() -> tenants.Domains:
        async with await psycopg.AsyncConnection.connect(database.database_url, autocommit=True) as conn:
            async with batch.transaction(conn):
                # As the workers' role, as the policy stage reads it, among its round's other reads.
                statements = [batch.BEGIN, ("SET LOCAL ROLE toolgate_worker", None)]
                statements += [tenants.domains_among(["acme", "initech", "globex", "acme"]), batch.COMMIT]
                results = await batch.run(conn, statements)
            return tenants.domains(results[2])

    found = asyncio.run(read())
    assert found["acme"] == ("acme.co.uk", "acme.example")
    assert "initech" not in found  # not registered: none (cedar.judge reads a missing tenant as none)
    assert set(found) <= {"acme", "globex"}


def test_a_worker_may_read_a_tenants_domains_but_never_change_them(database: Database) -> None:
    with psycopg.connect(database.database_url) as conn:
        conn.execute("SET ROLE toolgate_worker")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE toolgate.tenants SET domains = '{evil.example}' WHERE tenant_id = 'acme'")
