-- The shop lists' indexes in ascending time (issue 19): a new payment's entry
-- is appended at the index's right edge instead of pushed in at its left.
--
-- `payments_by_shop_newest (shop_id, created_at DESC, id DESC)` kept a shop's
-- newest payment first, so every new payment went in at the left edge of its
-- shop's range. SQLite appends cheaply only at a b-tree's right edge (it
-- starts a new page and leaves the full one as it is); a page filled at its
-- left edge is split and rebalanced with its neighbours instead, which wrote
-- 2.9 pages of this index per commit under `bench fresh` against 1.2 for
-- `payments_created_at`, filled at its right edge (bench/walframes).
--
-- SQLite walks an index backwards as cheaply as forwards, so the newest-first
-- lists read the ascending index from its end with no sort (the store's test
-- of the lists' query plans says so). Refunds' list index changes alike.
DROP INDEX payments_by_shop_newest;
CREATE INDEX payments_by_shop ON payments (shop_id, created_at, id);
DROP INDEX refunds_by_shop_newest;
CREATE INDEX refunds_by_shop ON refunds (shop_id, created_at, id);
