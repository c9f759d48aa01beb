-- The shop's row is no longer locked by every write of that shop (issue 19).
--
-- A foreign key is checked by locking the parent row FOR KEY SHARE. Every
-- fresh payment inserted three rows that name their shop (the key, the
-- payment, the merchant event), so every concurrent payment of a shop locked
-- the same `shops` row, and each lock shared with another transaction is a new
-- MultiXact: per fresh payment here, three referential-integrity triggers,
-- three row locks, two MultiXacts and 455 of its 6 535 bytes of WAL (pgbench
-- of bench/fresh_payment.sql, pg_waldump --stats). A refund took the same lock.
--
-- What those keys guaranteed is kept another way. A row gets its `shop_id`
-- from the shop the request was authenticated as, which was read from this
-- table; and a shop row is never deleted nor its id changed: no code path
-- does either, and from this migration on the triggers below refuse both (and
-- TRUNCATE), as the foreign keys did. So every stored `shop_id` names a shop.
-- The keys between a shop's own rows (a key row to its payment or refund, an
-- event to its payment or refund, a refund to its payment) stay: they are
-- per payment, not shared, and the claim relies on the deferred one.

ALTER TABLE payments DROP CONSTRAINT payments_shop_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_shop_id_fkey;
ALTER TABLE events DROP CONSTRAINT events_shop_id_fkey;
ALTER TABLE refunds DROP CONSTRAINT refunds_shop_id_fkey;

CREATE FUNCTION shops_are_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a shop is never deleted nor renamed: its payments, keys, '
        'refunds and events name it'
        USING ERRCODE = 'restrict_violation';
END
$$;

CREATE TRIGGER shops_are_kept
    BEFORE DELETE OR UPDATE OF id ON shops
    FOR EACH ROW EXECUTE FUNCTION shops_are_kept();

CREATE TRIGGER shops_are_kept_whole
    BEFORE TRUNCATE ON shops
    FOR EACH STATEMENT EXECUTE FUNCTION shops_are_kept();
