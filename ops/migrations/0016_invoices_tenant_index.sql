-- The demo domain's invoices: every statement of the bundled contracts finds an invoice by its id,
-- and the unique (tenant_id, idempotency_key) index already leads with the tenant for anything
-- that filters on the tenant alone. The tenant index served nothing and cost each new invoice
-- an index entry.
DROP INDEX demo.invoices_tenant_idx;
