-- Cursor lists of a shop's payments and refunds, and key introspection (issue 15).

-- The lists read a shop's rows newest first by (created_at, id), keyset paged.
CREATE INDEX payments_by_shop_newest ON payments (shop_id, created_at DESC, id DESC);
CREATE INDEX refunds_by_shop_newest ON refunds (shop_id, created_at DESC, id DESC);

-- When the last repeat reached the store (unix ms): set by the statement that counts it in `replays`.
ALTER TABLE idempotency_keys ADD COLUMN last_repeat_at INTEGER;
-- The instance that holds the lease (its name, never the token): written at claim and take-over.
ALTER TABLE idempotency_keys ADD COLUMN lease_holder TEXT;

-- One order's payments and one payment's refunds are listed newest first too (the
-- look-up before paying an order): their narrow indexes gain the id, so a range of
-- them is already in list order and the planner never prefers walking the shop.
DROP INDEX payments_by_reference;
CREATE INDEX payments_by_reference ON payments (shop_id, reference, created_at, id);
DROP INDEX refunds_by_payment;
CREATE INDEX refunds_by_payment ON refunds (payment_id, created_at, id);
