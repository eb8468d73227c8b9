-- Tool versions quarantined: a tool declared READ_ONLY whose statement tried to write (the seeds'
-- mutation-class violation) is quarantined by execution in the transaction that records the
-- call (workers/execution/recording.py), or an operator quarantines one (`toolgate tools
-- quarantine TOOL@VERSION --reason ...`). While its row is here, policy refuses every call of
-- that version (POLICY_VIOLATION tool_quarantined). Only an operator releases one (`toolgate
-- tools release`), deleting its row; both are audited, so the audit log keeps the history.
CREATE TABLE toolgate.tool_quarantine (
    tool_name     text        NOT NULL,
    tool_version  text        NOT NULL,
    reason        text        NOT NULL,
    actor         text        NOT NULL,  -- 'execution' (the detector) or the operator
    call_id       text,                  -- the call that tripped the detector, if one did
    tenant_id     text,                  -- that call's tenant
    since         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tool_name, tool_version)
);
-- Workers read it and execution adds to it; none may release a quarantine.
GRANT SELECT, INSERT ON toolgate.tool_quarantine TO toolgate_worker;
REVOKE UPDATE, DELETE ON toolgate.tool_quarantine FROM toolgate_worker;
