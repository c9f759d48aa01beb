-- Every primary key, unique constraint and foreign key of the service's tables
-- includes `shop_id` (issue 36): the condition a distributed PostgreSQL (Citus,
-- docs/scaling.md) sets for distributing the tables by shop, since each shard
-- can only enforce uniqueness among its own rows. `shops` and
-- `operator_credential` are the reference tables (copied to every node), and
-- keep their keys.
--
-- `shop_id` is appended to the keys the tables had, not put first: every
-- statement that finds a row by its id alone (the operator's look-ups across
-- shops, the workers' queues, the acquirer's webhooks by acquirer key) keeps
-- using the same index by its prefix, and no index is added. A statement that
-- names the shop too uses the whole key. The keys' values are unchanged, so
-- what was unique stays unique; nothing is rewritten but the indexes.
--
-- `payment_history` and `pending_payments` had no `shop_id`: it is copied from
-- their payment. Every foreign key between service tables now carries the shop
-- with the id it points at, so a row can never point into another shop's.

-- The columns that were missing, filled from the payments.
ALTER TABLE payment_history ADD COLUMN shop_id TEXT;
UPDATE payment_history h SET shop_id = p.shop_id FROM payments p WHERE p.id = h.payment_id;
ALTER TABLE payment_history ALTER COLUMN shop_id SET NOT NULL;

ALTER TABLE pending_payments ADD COLUMN shop_id TEXT;
UPDATE pending_payments q SET shop_id = p.shop_id FROM payments p WHERE p.id = q.payment_id;
ALTER TABLE pending_payments ALTER COLUMN shop_id SET NOT NULL;

-- The foreign keys into payments and refunds go first (they depend on the keys
-- being replaced), and come back with the shop.
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_payment_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_refund_id_fkey;
ALTER TABLE refunds DROP CONSTRAINT refunds_payment_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_payment_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_refund_id_fkey;
ALTER TABLE captures DROP CONSTRAINT captures_payment_id_fkey;

ALTER TABLE payments DROP CONSTRAINT payments_pkey;
ALTER TABLE payments ADD CONSTRAINT payments_pkey PRIMARY KEY (id, shop_id);
ALTER TABLE payments DROP CONSTRAINT payments_acquirer_key_key;
ALTER TABLE payments ADD CONSTRAINT payments_acquirer_key_key UNIQUE (acquirer_key, shop_id);

ALTER TABLE refunds DROP CONSTRAINT refunds_pkey;
ALTER TABLE refunds ADD CONSTRAINT refunds_pkey PRIMARY KEY (id, shop_id);
ALTER TABLE refunds DROP CONSTRAINT refunds_acquirer_key_key;
ALTER TABLE refunds ADD CONSTRAINT refunds_acquirer_key_key UNIQUE (acquirer_key, shop_id);

ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (seq, shop_id);
ALTER TABLE events DROP CONSTRAINT events_id_key;
ALTER TABLE events ADD CONSTRAINT events_id_key UNIQUE (id, shop_id);

ALTER TABLE payment_history DROP CONSTRAINT payment_history_pkey;
ALTER TABLE payment_history ADD CONSTRAINT payment_history_pkey
    PRIMARY KEY (payment_id, seq, shop_id);

ALTER TABLE pending_payments DROP CONSTRAINT pending_payments_pkey;
ALTER TABLE pending_payments ADD CONSTRAINT pending_payments_pkey
    PRIMARY KEY (created_at, payment_id, shop_id);

ALTER TABLE reconciliation_findings DROP CONSTRAINT reconciliation_findings_pkey;
ALTER TABLE reconciliation_findings ADD CONSTRAINT reconciliation_findings_pkey
    PRIMARY KEY (id, shop_id);
ALTER TABLE reconciliation_findings DROP CONSTRAINT reconciliation_findings_identity_key;
ALTER TABLE reconciliation_findings ADD CONSTRAINT reconciliation_findings_identity_key
    UNIQUE (identity, shop_id);

ALTER TABLE acquirer_events DROP CONSTRAINT acquirer_events_pkey;
ALTER TABLE acquirer_events ADD CONSTRAINT acquirer_events_pkey PRIMARY KEY (event_id, shop_id);

-- The foreign keys again, each with the shop of the row it points at.
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_payment_id_fkey
    FOREIGN KEY (payment_id, shop_id) REFERENCES payments (id, shop_id)
    DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_refund_id_fkey
    FOREIGN KEY (refund_id, shop_id) REFERENCES refunds (id, shop_id)
    DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE refunds ADD CONSTRAINT refunds_payment_id_fkey
    FOREIGN KEY (payment_id, shop_id) REFERENCES payments (id, shop_id);
ALTER TABLE events ADD CONSTRAINT events_payment_id_fkey
    FOREIGN KEY (payment_id, shop_id) REFERENCES payments (id, shop_id);
ALTER TABLE events ADD CONSTRAINT events_refund_id_fkey
    FOREIGN KEY (refund_id, shop_id) REFERENCES refunds (id, shop_id);
ALTER TABLE captures ADD CONSTRAINT captures_payment_id_fkey
    FOREIGN KEY (payment_id, shop_id) REFERENCES payments (id, shop_id);
