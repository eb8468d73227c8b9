-- Evidence anyone can check (issue 53, part 1): keep what proved a call, not only that it was
-- proven. Validation checked the agent's signature and dropped it; approval-wait checked each
-- approver's and dropped it; an observation's deployment signature left with the record. A
-- call's evidence bundle (`toolgate evidence CALL_ID`, docs/evidence.md) carries all three, so
-- an auditor checks them offline with only public keys.

-- The proposal as the agent signed it: the RFC 8785 signing document validation verified
-- (toolgate/trust/proposal_signing.py), the Ed25519 signature, the Merkle path to a signed root
-- when the agent signed a batch at once (NULL alone), and the argument text as it travelled (its
-- SHA-256 is the document's `arguments_sha256`). NULL on rows written before this migration.
-- Written with the row, by validation's registration of the call (store/calls.py), from the bytes
-- its signature check verified (never encoded again). `arguments` is NULL when the text holds a
-- NUL or bytes that are not UTF-8 (text cannot hold them; no such text is JSON, so the call was
-- refused as unparseable; the document still names the text by its hash).
-- A call whose proposal was edited by an approver keeps its row as the agent signed it: the
-- re-entered, edited proposal registers nothing (its call_id is bound already) and is proven by
-- the approver's signed edit decision, in approval_decisions (the held ticket's row, `signed`
-- and `signature` below), not by an agent signature.
ALTER TABLE toolgate.calls
    ADD COLUMN signed_document  bytea,
    ADD COLUMN signature        bytea,
    ADD COLUMN signature_proof  bytea,
    ADD COLUMN arguments        text;

-- A counted decision as its approver signed it: the canonical bytes (toolgate/trust/signing.py
-- `signed_bytes`) and the Ed25519 signature over them, with the approver's public key that verified
-- it (an approver's key may be rotated later: the bundle shows the key as registered when the
-- decision was counted); a withdrawal, as its agent signed it (its key: the agent's). NULL
-- on the editor's vote counted on an edited call's own ticket (decision_id `<id>.edited`): nobody
-- signed that row; the editor's signed edit is the held ticket's row under `<id>`.
ALTER TABLE toolgate.approval_decisions
    ADD COLUMN signed      bytea,
    ADD COLUMN signature   bytea,
    ADD COLUMN public_key  bytea;

-- Every observation as it was published: topic, key, value and headers (seals included: the
-- deployment's signature, its Merkle path and key id), one row each time a call's observation
-- was sealed and sent (a round delivered again is sealed again). Stored by the stage that seals
-- it while it is produced, the round acked once both are done (workers/runtime/delivery.py): a
-- round cut short is sealed, stored and sent again, so a call may have more than one.
CREATE TABLE toolgate.observations (
    id         bigserial   PRIMARY KEY,
    tenant_id  text        NOT NULL,
    call_id    text        NOT NULL,
    topic      text        NOT NULL,
    key        bytea,
    value      bytea       NOT NULL,
    headers    jsonb       NOT NULL,  -- [[name, base64 of the value or null], ...] in order
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX observations_call_idx ON toolgate.observations (tenant_id, call_id);
-- Rows arrive in time order: a BRIN index finds retention's old ones at a fraction of a b-tree's
-- cost on every insert.
CREATE INDEX observations_at_idx ON toolgate.observations USING brin (at);
