-- The deployment secret can be rotated (toolgate/keyset.py, `toolgate secret rotate`), so what
-- the deployment signed names the key that signed it.

-- Each audit checkpoint names the deployment key that signed it (its id, `dk_...`), and
-- `toolgate audit verify` checks it with that key. Checkpoints from before name none: verify
-- checks them with each key it trusts.
ALTER TABLE toolgate.audit_heads ADD COLUMN key_id text;

-- Which keys each running stage process holds: the one it seals with and those it accepts,
-- reported every few seconds (workers/runtime/key_holders.py). `toolgate secret rotate` promotes
-- a staged key only once every stage seen lately accepts it, on every host, so no record sealed
-- with it is refused; `toolgate secret status` lists them. Holds no secret.
CREATE TABLE toolgate.key_holders (
    host     text        NOT NULL,
    stage    text        NOT NULL,
    pid      integer     NOT NULL,
    seals    text        NOT NULL,
    accepts  text[]      NOT NULL,
    seen_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (host, stage, pid)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON toolgate.key_holders TO toolgate_worker;
