-- An approver is never counted on a call requested by the same person (issue 52, part 4). Each
-- approver is linked to the user ids it acts as: the `principal.user_id`s that name that person
-- in proposals. Approval-wait refuses a decision by an approver who acts as the held call's
-- requesting user (`self_approval`, audited; the ticket stays PENDING for the others), and
-- execution, counting a ticket's approvers in its own transaction, does not count one who acts as
-- the user its packet names as the requester, whatever the decisions table holds.
-- `toolgate approvers add ... --acts-as U` (repeatable) sets them; `toolgate approvers acts-as
-- <id> --user U` changes them (audited). Approvers registered before this migration act as no one
-- until an operator links them: exactly what they could approve before.
ALTER TABLE toolgate.approvers ADD COLUMN acts_as text[] NOT NULL DEFAULT '{}';

COMMENT ON COLUMN toolgate.approvers.acts_as IS
    'the user ids (proposals'' principal.user_id) this approver acts as: never counted on a call one of them requested';
