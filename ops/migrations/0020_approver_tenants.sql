-- Approvers belong to tenants (review N13): an approver's decision counts only on the tickets of
-- the tenants it is registered for, both where approval-wait judges a decision and where execution
-- counts the approvers of a ticket itself. `toolgate approvers add ... --tenant T` (repeatable)
-- sets them; `toolgate approvers tenants <id> --tenant T` changes them (audited). A new approver
-- gets no tenant unless named, and serves nothing until it has one (fail closed).
--
-- Approvers registered before this migration decided for every tenant until now. So that an
-- upgrade does not silently stop every approval, each of them is granted every tenant registered
-- when this migration runs (and none registered later): exactly what it could approve before, no
-- more. Narrow them to the tenants they belong to with `toolgate approvers tenants`; until then an
-- approver of one tenant still counts toward another's approvals, as before the upgrade.
ALTER TABLE toolgate.approvers ADD COLUMN tenants text[] NOT NULL DEFAULT '{}';

UPDATE toolgate.approvers
SET tenants = coalesce((SELECT array_agg(tenant_id ORDER BY tenant_id) FROM toolgate.tenants), '{}');
