-- Issue 38: what a payment writes besides its rows, cut where bench/pgframes
-- pointed.
--
-- (Not cut: `payments_by_shop_newest` and `refunds_by_shop_newest` are built
-- descending, so each new row goes to the left end of its shop's range and
-- its page splits in halves; ascending (scanned backwards) they would write
-- less. But a planner without statistics then ties them with the primary key
-- for the foreign-key checks' `id = $1 AND shop_id = $2` and, the newer
-- index winning the tie, caches a plan that reads the shop's whole range per
-- check: test a_finish_finds_its_payment_by_primary_key_however_many_the_shop_has.)
--
-- 1. A merchant event no longer checks its payment by a foreign key. Every
--    event is inserted by the statement or transaction of the transition it
--    reports, from the payment row that transition just updated (and locked),
--    and no payment is ever deleted, so the reference cannot dangle; the
--    check only cost a trigger's query and a row lock logged on the payment
--    (one WAL record a payment). The refund and capture references stay:
--    they are checked only on the events that carry them.
ALTER TABLE events DROP CONSTRAINT events_payment_id_fkey;

-- 2. A key row's answer is written by an update of the row (phase 3) that
--    cannot be heap-only (it changes the columns the sweeper's and the
--    completer's partial indexes hold). With room left on each page the new
--    version stays on the old one's page, and PostgreSQL logs only the bytes
--    that differ from the old version (the shop, key, fingerprint, method
--    and path before them are not logged again). New pages keep 30% free.
ALTER TABLE idempotency_keys SET (fillfactor = 70);
