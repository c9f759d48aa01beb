-- The expirer's queue as a table of its own, written only by the claim of a
-- payment with manual capture (in the claim's transaction), instead of a
-- partial index on payments: every payment statement of the hot path (the
-- one-statement claim, the settle) paid for the index on payments (opened,
-- its predicate evaluated) though payments charged at once never enter it
-- (bench/ab, PostgreSQL fresh: see docs/bench.md). A row stays until its
-- time has come; the expirer then releases the hold, or drops the row of a
-- hold that was captured, voided or never authorized.
CREATE TABLE authorization_expiries (
    shop_id     TEXT NOT NULL,
    payment_id  TEXT NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (shop_id, payment_id)
);
CREATE INDEX authorization_expiries_due ON authorization_expiries (expires_at);

INSERT INTO authorization_expiries (shop_id, payment_id, expires_at)
SELECT shop_id, id, authorization_expires_at FROM payments
WHERE capture_method = 'manual' AND authorization_expires_at IS NOT NULL
    AND (status = 'pending' OR hold IN ('open', 'releasing_expiry'));

DROP INDEX payments_holds_expiring;
