-- The approval console connects as `toolgate_console` (or a login role granted it), never as the
-- tables' owner: it is the one toolgate process a browser talks to. As the owner, a console taken
-- over could rewrite tickets, decisions, keys, policy sets and the audit log; as this role it can
-- do what its pages do and no more (console/, ops/roles.py):
--
--   reads      the tickets, their decisions, the approvers, the tenants, its invitations, the
--              audit log's tail (to append after it)
--   keeps      its login challenges and sessions
--   appends    to the audit log and its signed checkpoints (never updates or deletes: the
--              append-only triggers hold for every role, and this one has no UPDATE or DELETE)
--   enrols     an approver only by burning an invitation with its token (`take_invitation`,
--              below: the table's hashes alone burn nothing), and only in the transaction that
--              burnt it, with no more than the invitation grants (the policy on approvers below)
--
-- It changes no ticket, decision, call, key, policy set or outbox row: decisions reach approval-wait
-- signed, through the broker, as any approval service's do.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolgate_console') THEN
        CREATE ROLE toolgate_console NOLOGIN;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE EXCEPTION 'toolgate needs the role toolgate_console for its approval console and may not create roles'
        USING HINT = 'Have an administrator run CREATE ROLE toolgate_console NOLOGIN, then migrate again.';
END $$;

GRANT USAGE ON SCHEMA toolgate TO toolgate_console;
GRANT SELECT ON toolgate.approvals, toolgate.approval_decisions, toolgate.approvers, toolgate.tenants,
    toolgate.console_invitations, toolgate.audit_log TO toolgate_console;
GRANT SELECT, INSERT, UPDATE, DELETE ON toolgate.console_challenges, toolgate.console_sessions TO toolgate_console;
GRANT INSERT ON toolgate.audit_log, toolgate.audit_heads, toolgate.approvers TO toolgate_console;
GRANT USAGE ON SEQUENCE toolgate.audit_log_id_seq, toolgate.audit_heads_id_seq TO toolgate_console;

-- Burn the invitation of `token` if it may still be used (known, unused, unexpired), and return
-- it as it stood; no row when it may not. It runs as the tables' owner, so the console needs no
-- UPDATE on invitations: only the token's holder (the browser that followed the enrol link) can
-- burn one, and two enrolments with one token cannot both take it (the row's lock).
CREATE FUNCTION toolgate.take_invitation(token text)
RETURNS TABLE (approver_id text, tenants text[], groups text[], risk_classes text[], expires_at timestamptz,
               used_at timestamptz, now timestamptz)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    UPDATE toolgate.console_invitations i SET used_at = now()
    WHERE i.token_sha256 = sha256(convert_to(token, 'UTF8')) AND i.used_at IS NULL AND i.expires_at > now()
    RETURNING i.approver_id, i.tenants, i.groups, i.risk_classes, i.expires_at, NULL::timestamptz, now()
$$;
REVOKE ALL ON FUNCTION toolgate.take_invitation(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION toolgate.take_invitation(text) TO toolgate_console;

-- Who may add an approver: its owner (operators' `approvers add`, which row security does not
-- bind), and the console only for an invitation it burnt in this very transaction (used_at is the
-- transaction's now()), naming that approver, active, acting as no user, granted no tenant, group
-- or risk class the invitation does not grant. Everyone who may read approvers reads them all.
ALTER TABLE toolgate.approvers ENABLE ROW LEVEL SECURITY;
CREATE POLICY approvers_read ON toolgate.approvers FOR SELECT USING (true);
CREATE POLICY approvers_enrolled ON toolgate.approvers FOR INSERT TO toolgate_console WITH CHECK (
    status = 'active' AND cardinality(acts_as) = 0 AND revoked_at IS NULL AND EXISTS (
        SELECT FROM toolgate.console_invitations i
        WHERE i.approver_id = approvers.approver_id AND i.used_at = now()
          AND approvers.tenants <@ i.tenants AND approvers.groups <@ i.groups
          AND approvers.risk_classes <@ i.risk_classes
    )
);
