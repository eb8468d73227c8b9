-- The approval console's card lists the decisions approval-wait did not count on a ticket (refused,
-- or a repeat of one counted), read from the audit log by the ticket's id (store/console_inbox.py
-- UNCOUNTED). Only those rows are indexed: a handful a ticket, and none on a call's own path.
CREATE INDEX audit_log_uncounted_idx ON toolgate.audit_log ((detail->>'approval_id'))
    WHERE action IN ('decision_refused', 'decision_noop');
