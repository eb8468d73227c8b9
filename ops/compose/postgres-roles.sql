-- The workers' login on the compose Postgres (run once, when its data volume is created).
-- Workers connect as toolgate_w, a member of toolgate_worker: migration 0009 grants that role
-- what a worker may do (append to the audit log, never rewrite it). Migrations, `toolgate setup`
-- and the operators' `cli` connect as the owner, toolgate (TOOLGATE_ADMIN_DATABASE_URL).
CREATE ROLE toolgate_worker NOLOGIN;
CREATE ROLE toolgate_w LOGIN PASSWORD 'toolgate_w' IN ROLE toolgate_worker;
