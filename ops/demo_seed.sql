-- Demo data for the embedded default: two tenants, their customers and invoices.
INSERT INTO demo.customers (customer_id, tenant_id, name, email) VALUES
    ('cust_acme01',   'acme',   'Wile E. Coyote Ltd',  'ap@coyote.example'),
    ('cust_acme02',   'acme',   'Road Runner Inc',     'billing@roadrunner.example'),
    ('cust_globex01', 'globex', 'Hank Scorpio Holdings', 'ap@scorpio.example')
ON CONFLICT (customer_id) DO NOTHING;

INSERT INTO demo.invoices (invoice_id, tenant_id, customer_id, status, currency, amount_cents, due_date) VALUES
    ('inv_acme0001',   'acme',   'cust_acme01',   'open',  'USD', 420000, '2026-12-31'),
    ('inv_acme0002',   'acme',   'cust_acme02',   'open',  'USD', 125000, '2026-12-15'),
    ('inv_acme0003',   'acme',   'cust_acme01',   'paid',  'USD',  99000, '2026-10-01'),
    ('inv_globex0001', 'globex', 'cust_globex01', 'open',  'EUR', 750000, '2027-01-31')
ON CONFLICT (tenant_id, invoice_id) DO NOTHING;
