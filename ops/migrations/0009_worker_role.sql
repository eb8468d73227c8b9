-- Workers connect as `toolgate_worker` (or a login role granted it), never as the owner of these
-- tables: a worker may append to the audit log and its checkpoints and read them, but not update,
-- delete, truncate or alter them, nor disable their triggers (only an owner may). It reads the
-- registries (tenants, agents, their keys, approvers), which only operators change, and reads and
-- writes every other table. Migrations and `toolgate setup` run as the owner
-- (TOOLGATE_ADMIN_DATABASE_URL); see ops/roles.py for how a deployment gives workers a login.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_worker') THEN
        CREATE ROLE toolgate_worker NOLOGIN;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'toolgate needs the role toolgate_worker for its workers and may not create roles'
        USING HINT = 'Have an administrator run CREATE ROLE toolgate_worker NOLOGIN, then migrate again.';
END $$;

GRANT USAGE ON SCHEMA toolgate, demo TO toolgate_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA toolgate, demo TO toolgate_worker;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA toolgate, demo TO toolgate_worker;
REVOKE INSERT, UPDATE, DELETE ON toolgate.tenants, toolgate.agents, toolgate.agent_keys, toolgate.approvers
    FROM toolgate_worker;
REVOKE UPDATE, DELETE ON toolgate.audit_log, toolgate.audit_heads FROM toolgate_worker;

-- Tables later migrations create (as the owner) are the workers' to read and write; a migration
-- that adds an append-only or operator-only table revokes what does not apply, as above.
ALTER DEFAULT PRIVILEGES IN SCHEMA toolgate, demo GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO toolgate_worker;
ALTER DEFAULT PRIVILEGES IN SCHEMA toolgate, demo GRANT USAGE ON SEQUENCES TO toolgate_worker;
