-- The demo domain the bundled tools act on: customers and invoices, per tenant.
CREATE SCHEMA IF NOT EXISTS demo;

CREATE TABLE demo.customers (
    customer_id  text PRIMARY KEY,
    tenant_id    text NOT NULL,
    name         text NOT NULL,
    email        text NOT NULL
);

CREATE TABLE demo.invoices (
    invoice_id       text        PRIMARY KEY,
    tenant_id        text        NOT NULL,
    customer_id      text        NOT NULL REFERENCES demo.customers (customer_id),
    status           text        NOT NULL CHECK (status IN ('draft', 'open', 'paid', 'void')),
    currency         text        NOT NULL,
    amount_cents     bigint      NOT NULL CHECK (amount_cents >= 0),
    lines            jsonb       NOT NULL DEFAULT '[]',
    due_date         date,
    memo             text,
    idempotency_key  text,
    created_by_call  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, idempotency_key)
);
CREATE INDEX invoices_tenant_idx ON demo.invoices (tenant_id);
