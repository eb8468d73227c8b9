-- Approve with edit (issue 52, part 3). An approver may approve edited arguments instead of the
-- held call's: the signed decision names the held payload hash and carries the edited arguments
-- (ApprovalDecision.edited_arguments). Approval-wait closes the held call's ticket as EDITED (not
-- APPROVED: nothing runs for the held arguments), records who edited it, by which decision, and
-- the edited payload's hash, and re-enters the edited call on tool.proposals. Validation admits
-- that re-entry only against this record: the ticket EDITED by exactly the decision it carries
-- (workers/validation/edits.py). The edited call's own ticket names the ticket it was edited from
-- (edit_of), so the editor's decision counts once on it.
ALTER TABLE toolgate.approvals DROP CONSTRAINT approvals_status_check;
ALTER TABLE toolgate.approvals ADD CONSTRAINT approvals_status_check
    CHECK (status IN ('PENDING', 'APPROVED', 'DENIED', 'AUTO_DENIED', 'EDITED'));
ALTER TABLE toolgate.approvals ADD COLUMN edited_by text;
ALTER TABLE toolgate.approvals ADD COLUMN edit_decision_id text;
ALTER TABLE toolgate.approvals ADD COLUMN edited_payload_hash text;
ALTER TABLE toolgate.approvals ADD COLUMN edit_of text;

COMMENT ON COLUMN toolgate.approvals.edit_decision_id IS
    'the signed decision that closed this ticket as EDITED: the one re-entry validation admits for it';
COMMENT ON COLUMN toolgate.approvals.edit_of IS
    'on an edited call''s ticket: the approval_id of the ticket it was edited from';
