-- A tenant's own mail domains (issue 51): what Cedar policies see as the tenant's `domains`
-- (contracts/cedar_schema.py), so a rule can say "an e-mail to a domain outside the tenant's needs
-- an approval" (contracts/cedar/arguments.cedar). Operators set them (`toolgate tenants domains
-- TENANT --set a.com,b.com`, audited); the policy stage reads them with the round's other facts
-- (store/tenants.py). Until an operator sets some, a tenant has none, and every address is outside.
--
-- Stored as the policies compare them: lower case (an address's domain is lower-cased before it is
-- compared), no NULL element. Workers read them and may not change them (0009: the registries
-- are the operators').
ALTER TABLE toolgate.tenants ADD COLUMN domains text[] NOT NULL DEFAULT '{}'
    CONSTRAINT tenants_domains_lower CHECK (array_position(domains, NULL) IS NULL AND domains::text = lower(domains::text));
