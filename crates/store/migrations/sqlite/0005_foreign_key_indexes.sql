-- SQLite settles a deferred foreign key from the parent's side too: every
-- payment (or refund) inserted looks up the key rows that point at it, to
-- take them off the transaction's count of pending violations. Without an
-- index on the child column that look-up is a scan of idempotency_keys, so
-- every fresh payment cost more with every key stored (measured: the payment
-- INSERT took 331 us with 7 000 keys stored, 32 us with this index).
-- PostgreSQL checks the same constraint from the child's side only (a primary
-- key look-up in payments), so it needs no such index.
CREATE INDEX idempotency_keys_by_payment ON idempotency_keys (payment_id);
CREATE INDEX idempotency_keys_by_refund ON idempotency_keys (refund_id)
    WHERE refund_id IS NOT NULL;
