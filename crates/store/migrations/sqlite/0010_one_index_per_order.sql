-- One index per order instead of two (issue 19): a fresh payment writes one
-- leaf page that no other payment of its batch shares where it wrote three.
--
-- Before, the payment's row entered two indexes keyed by the order, at
-- random places: `payments_one_live_per_order` (the unique one, partial on
-- `status IN ('pending', 'succeeded')`) and `payments_by_reference` (the
-- order's payments, for reading them). And because the unique index's
-- condition names `status`, SQLite rewrote its entry when the finish moved
-- the payment from `pending` to `succeeded`: a third random leaf, in the
-- finish's batch. With 4 KiB pages, each such leaf is 4 KiB of WAL a payment.
--
-- Now one unique index, `payments_by_order (shop_id, reference,
-- order_slot)`, does both jobs. `order_slot` is '' while the payment may be
-- its order's live one (pending or succeeded), so at most one such payment
-- per order, as before; a declined payment moves out of the way to a slot
-- of its own, its id, so an order keeps any number of them. No index holds
-- `status` any more, and the settle to `succeeded` does not touch
-- `order_slot`, so it leaves the index alone; only a decline rewrites the
-- entry (the settle to `declined` sets the slot in the same update).
--
-- The CHECK keeps a live payment in the live slot and lets a row leave it
-- only for its own id once declined. (A declined row left in the live slot
-- would only keep its order from being paid again, never let it be paid
-- twice; the store's one declining statement sets the slot.)
ALTER TABLE payments ADD COLUMN order_slot TEXT NOT NULL DEFAULT ''
    CHECK (order_slot = '' OR (status = 'declined' AND order_slot = id));
UPDATE payments SET order_slot = id WHERE status = 'declined';
DROP INDEX payments_one_live_per_order;
DROP INDEX payments_by_reference;
CREATE UNIQUE INDEX payments_by_order ON payments (shop_id, reference, order_slot);
