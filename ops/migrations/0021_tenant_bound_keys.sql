-- The demo's invoices are each tenant's own (N9). invoice.create_draft derived an invoice's id
-- from the caller's raw idempotency key, and invoice_id alone was the primary key, so one tenant
-- creating a draft under a key took that id from every other tenant: another tenant's draft under
-- the same key failed, and its unique-violation told it why. The key is now (tenant_id,
-- invoice_id), and statements are given a key bound to the tenant (ctx.operation_key, the provider
-- key) in place of the caller's: the column that recorded the caller's key records that one.
-- Rows made before keep their ids and the caller's key they were made with.
ALTER TABLE demo.invoices DROP CONSTRAINT invoices_pkey;
ALTER TABLE demo.invoices ADD PRIMARY KEY (tenant_id, invoice_id);
ALTER TABLE demo.invoices RENAME COLUMN idempotency_key TO operation_key;
ALTER TABLE demo.invoices RENAME CONSTRAINT invoices_tenant_id_idempotency_key_key TO invoices_tenant_id_operation_key_key;
