"""Migration 0020 (approvers belong to tenants, review N13) on a database that had approvers:
each existing approver is granted the tenants registered when it runs, so an upgrade approves
as before, and a tenant registered later is nobody's until an operator says so."""

from __future__ import annotations

import psycopg

from toolgate.ops.migrate import migrate

from .conftest import Server, migrated_before

BEFORE = "0020_approver_tenants.sql"


def test_existing_approvers_keep_the_tenants_that_existed_and_new_ones_get_none(postgres: Server) -> None:
    with postgres.scratch("approver_tenants", template=None) as database:
        with psycopg.connect(database.database_url, autocommit=True) as conn:
            migrated_before(conn, BEFORE)
            conn.execute("INSERT INTO toolgate.tenants (tenant_id) VALUES ('acme'), ('globex')")
            conn.execute(
                "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes, status) VALUES "
                "('alice', '\\x00', '{HIGH_RISK_EXTERNAL}', 'active'), ('zed', '\\x01', '{}', 'revoked')"
            )
        assert BEFORE in migrate(database.database_url)
        database.sql("INSERT INTO toolgate.tenants (tenant_id) VALUES ('initech')")
        assert database.sql("SELECT approver_id, tenants FROM toolgate.approvers ORDER BY 1") == [
            ("alice", ["acme", "globex"]),
            ("zed", ["acme", "globex"]),
        ]
        database.sql(
            "INSERT INTO toolgate.approvers (approver_id, public_key, risk_classes) VALUES ('new', '\\x02', '{}')"
        )
        assert database.sql("SELECT tenants FROM toolgate.approvers WHERE approver_id = 'new'") == [([],)]
