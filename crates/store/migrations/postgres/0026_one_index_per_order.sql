-- Issue 38: one index answers both questions about an order.
--
-- `payments_by_reference` (shop_id, reference, created_at, id) found an
-- order's payments, and `payments_one_live_per_order` (shop_id,
-- live_reference) held an order to one live payment (live_reference is the
-- reference while the payment is live, NULL after: migration 0013). Both
-- began with the shop and the reference, and every payment wrote an entry in
-- each (370 bytes of WAL a payment). One unique index does both:
-- (reference, shop_id, live), where `live` is true while the payment is live
-- and NULL after. Two live payments of an order have equal entries, so the
-- second is refused, exactly as before; NULLs are distinct, so an order keeps
-- any number of payments that are no longer live; and an order's payments are
-- the range (reference, shop_id), which the lists read and sort (an order
-- has a handful). The reference leads, not the shop: an index that leads
-- with `shop_id` alone ties, for a planner without statistics, with the
-- primary key (id, shop_id) for the foreign-key checks' `id = $1 AND
-- shop_id = $2`, and the newer index wins the tie with a plan that reads
-- the shop's whole range (migration 0023's note; the test
-- a_finish_finds_its_payment_by_primary_key_however_many_the_shop_has).
-- The expression reads only `live_reference`, which a settlement to
-- succeeded leaves as it was, so that update stays heap-only.
--
-- The claims name this index as their arbiter with the same expression
-- (`ON CONFLICT (reference, shop_id, (NULLIF(live_reference IS NOT NULL,
-- false)))`), and the look-up of an order's live payment reads its range
-- (`reference = $2 AND live_reference IS NOT NULL`). It is built before the
-- two are dropped: the data already holds to it (at most one live payment an
-- order), and at no moment is the order unguarded.
CREATE UNIQUE INDEX payments_by_order
    ON payments (reference, shop_id, (NULLIF(live_reference IS NOT NULL, false)));
DROP INDEX payments_one_live_per_order;
DROP INDEX payments_by_reference;
