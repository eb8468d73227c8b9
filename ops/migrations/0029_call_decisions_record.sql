-- A policy decision's record names the call by the bytes the stage judged (issue 51, part 3; the
-- stage's CPU, docs/cedar-plan.md section 4b): `record` is the StageRecord as the policy stage read
-- it from tool.validated (Avro, single-object encoded: schemas/codec.py), which holds the call as
-- validated (canonical arguments, references only) and validation's StageDecision on it, naming the
-- contracts digest validation decided by. So a passed call is one row, the policy's, not two, and
-- nothing is serialized a second time to keep it: readers decode it (ops/call_records.py), and show
-- its arguments redacted as `call` was (workers/policy/witness.py `opened`). Rows written before
-- this migration keep `call` and validation's own row; validation's refusals still carry `call`.
ALTER TABLE toolgate.call_decisions ADD COLUMN record bytea;
