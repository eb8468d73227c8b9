-- The approval console (`toolgate console`, issue 52 parts 1 and 2): invitations an approver
-- enrols from, login challenges, sessions, and the notices that keep its inbox live.
--
-- An invitation holds only the sha256 of its one-time token (the token is printed once, in the
-- enrol URL), the approver it names, the tenants and groups it grants and its expiry; enrolment
-- registers the approver with the public key the browser made and burns the token (used_at).
CREATE TABLE toolgate.console_invitations (
    token_sha256  bytea       PRIMARY KEY,
    approver_id   text        NOT NULL,
    tenants       text[]      NOT NULL,
    groups        text[]      NOT NULL,
    risk_classes  text[]      NOT NULL,
    created_by    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz
);

-- A login is a signed challenge: a random value the server issued, signed by the approver's
-- key; each is taken once, before its expiry.
CREATE TABLE toolgate.console_challenges (
    challenge   bytea       PRIMARY KEY,
    expires_at  timestamptz NOT NULL
);

-- A session: the sha256 of the cookie's value, its approver, its CSRF token and its expiry.
CREATE TABLE toolgate.console_sessions (
    session_sha256  bytea       PRIMARY KEY,
    approver_id     text        NOT NULL,
    csrf_token      text        NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry_idx ON toolgate.console_sessions (expires_at);

-- A ticket opened, escalated or closed, and a decision recorded on one, as the ticket's id on
-- the `toolgate_console` channel: a console's inbox reads that ticket again and tells its pages.
-- Execution's own marks on a ticket (consumed, spent) change nothing an approver sees: no notice.
CREATE FUNCTION toolgate.console_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolgate_console', NEW.approval_id);
    RETURN NULL;
END $$;
CREATE TRIGGER approvals_console_notify AFTER INSERT ON toolgate.approvals
    FOR EACH ROW EXECUTE FUNCTION toolgate.console_notify();
CREATE TRIGGER approvals_console_notify_change AFTER UPDATE ON toolgate.approvals
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.escalation_level IS DISTINCT FROM NEW.escalation_level)
    EXECUTE FUNCTION toolgate.console_notify();
CREATE TRIGGER approval_decisions_console_notify AFTER INSERT ON toolgate.approval_decisions
    FOR EACH ROW EXECUTE FUNCTION toolgate.console_notify();
