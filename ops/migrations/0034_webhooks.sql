-- Reaching people (issue 52, part 6): a tenant's webhook hears of its approval tickets as they open,
-- gather votes and close, so a chat or paging tool can link to the console's card.
--
-- `toolgate webhooks set TENANT URL` names the endpoint (audited); the triggers below write a
-- delivery row in the very transaction that opens a ticket, records a vote or closes a ticket
-- (approval-wait's, or the sweep's), so a delivery exists exactly when its event does and never
-- otherwise. The outbox-relay worker's courier (workers/webhooks/) posts each one, signed with the
-- deployment's Ed25519 key in the Standard Webhooks form, retries it on a schedule, and audits
-- every attempt. A body names the ticket, its call, tool, risk class and votes: never the call's
-- arguments, which stay behind the console's login.
CREATE TABLE toolgate.webhooks (
    tenant_id   text        PRIMARY KEY REFERENCES toolgate.tenants (tenant_id),
    url         text        NOT NULL CHECK (url ~ '^https?://'),
    enabled     boolean     NOT NULL DEFAULT true,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE toolgate.webhook_deliveries (
    delivery_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id     text        NOT NULL,
    event_type    text        NOT NULL CHECK (event_type IN ('approval.opened', 'approval.voted', 'approval.closed')),
    approval_id   text        NOT NULL,
    body          jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    due_at        timestamptz NOT NULL DEFAULT now(),
    attempts      integer     NOT NULL DEFAULT 0,
    status        text        NOT NULL DEFAULT 'pending'
                              CHECK (status IN ('pending', 'delivered', 'failed', 'dropped')),
    last_outcome  text,
    finished_at   timestamptz
);
CREATE INDEX webhook_deliveries_due_idx ON toolgate.webhook_deliveries (due_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_finished_idx ON toolgate.webhook_deliveries (finished_at) WHERE status <> 'pending';
CREATE INDEX webhook_deliveries_approval_idx ON toolgate.webhook_deliveries (approval_id);

CREATE FUNCTION toolgate.webhook_event(tenant text, approval text, kind text, data jsonb, at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM toolgate.webhooks w WHERE w.tenant_id = tenant AND w.enabled) THEN
        INSERT INTO toolgate.webhook_deliveries (tenant_id, event_type, approval_id, body)
        VALUES (tenant, kind, approval, jsonb_build_object(
            'type', kind,
            'timestamp', to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'data', data));
        NOTIFY toolgate_webhooks;
    END IF;
END;
$$;

CREATE FUNCTION toolgate.webhook_approval_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM toolgate.webhook_event(NEW.tenant_id, NEW.approval_id, 'approval.opened', jsonb_build_object(
        'approval_id', NEW.approval_id, 'call_id', NEW.call_id, 'tenant_id', NEW.tenant_id,
        'tool_name', NEW.tool_name, 'tool_version', NEW.tool_version, 'risk_class', NEW.risk_class,
        'required_approvals', NEW.required_approvals, 'approver_groups', to_jsonb(NEW.approver_groups),
        'expires_at', NEW.expires_at), NEW.created_at);
    RETURN NULL;
END;
$$;

CREATE FUNCTION toolgate.webhook_approval_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM toolgate.webhook_event(NEW.tenant_id, NEW.approval_id, 'approval.closed', jsonb_build_object(
        'approval_id', NEW.approval_id, 'call_id', NEW.call_id, 'tenant_id', NEW.tenant_id,
        'tool_name', NEW.tool_name, 'status', NEW.status), coalesce(NEW.decided_at, now()));
    RETURN NULL;
END;
$$;

CREATE FUNCTION toolgate.webhook_approval_voted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ticket toolgate.approvals%ROWTYPE;
BEGIN
    SELECT * INTO ticket FROM toolgate.approvals WHERE approval_id = NEW.approval_id;
    PERFORM toolgate.webhook_event(ticket.tenant_id, NEW.approval_id, 'approval.voted', jsonb_build_object(
        'approval_id', NEW.approval_id, 'call_id', ticket.call_id, 'tenant_id', ticket.tenant_id,
        'tool_name', ticket.tool_name, 'approver_id', NEW.approver_id, 'verdict', NEW.verdict,
        'reason', NEW.reason, 'required_approvals', ticket.required_approvals), NEW.decided_at);
    RETURN NULL;
END;
$$;

CREATE TRIGGER approvals_webhook_opened AFTER INSERT ON toolgate.approvals
    FOR EACH ROW EXECUTE FUNCTION toolgate.webhook_approval_opened();
CREATE TRIGGER approvals_webhook_closed AFTER UPDATE OF status ON toolgate.approvals
    FOR EACH ROW WHEN (OLD.status = 'PENDING' AND NEW.status <> 'PENDING')
    EXECUTE FUNCTION toolgate.webhook_approval_closed();
CREATE TRIGGER approval_decisions_webhook_voted AFTER INSERT ON toolgate.approval_decisions
    FOR EACH ROW EXECUTE FUNCTION toolgate.webhook_approval_voted();

GRANT SELECT ON toolgate.webhooks TO toolgate_worker;
GRANT SELECT, INSERT, UPDATE, DELETE ON toolgate.webhook_deliveries TO toolgate_worker;
