-- A payment settles in place: its `pending` -> `succeeded` update is HOT
-- (heap-only: no index entry written, the new version on the same page), as
-- issue 19 asks of every update that needs no index changed.
--
-- An update is HOT only when no indexed column changes value, counting the
-- columns of partial indexes' predicates. `status` was in two:
-- `payments_one_live_per_order` (WHERE status IN ('pending', 'succeeded'))
-- and `payments_pending` (WHERE status = 'pending'). So every settle wrote a
-- new version of the row with an entry in each of the table's six other
-- indexes: six of the 24.5 B-tree insertions of a fresh payment (pg_waldump
-- --stats of bench/fresh_payment.sql).
--
-- The two indexes now hold no `status`:
--
-- - One live payment per order is a unique index on `live_reference`, the
--   order's reference while the payment is pending or succeeded, NULL once
--   declined (a generated column: no write can get it wrong). NULLs are
--   distinct, so declined payments never conflict; `pending` -> `succeeded`
--   leaves it as it was, and `pending` -> `declined` frees the order.
-- - The pending payments (the reconciler's queue and the overview's count)
--   are rows of `pending_payments`, keyed by (created_at, payment_id) in the
--   reconciler's order: inserted by the claim that creates the payment,
--   deleted by the statement or transaction that settles it, in both cases
--   with the payment's own write. A heap insert, one index entry and a delete
--   per payment, in place of seven index entries.
--
-- The table is rewritten once here (the stored generated column).
-- `fillfactor` 80 leaves each page room for the settled versions of its rows
-- until a page prune reclaims the old ones.

ALTER TABLE payments SET (fillfactor = 80);
ALTER TABLE payments ADD COLUMN live_reference TEXT
    GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'succeeded') THEN reference END
    ) STORED;

DROP INDEX payments_one_live_per_order;
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (shop_id, live_reference);

CREATE TABLE pending_payments (
    created_at TIMESTAMPTZ NOT NULL,
    payment_id TEXT NOT NULL,
    PRIMARY KEY (created_at, payment_id)
);
INSERT INTO pending_payments (created_at, payment_id)
    SELECT created_at, id FROM payments WHERE status = 'pending';
DROP INDEX payments_pending;
