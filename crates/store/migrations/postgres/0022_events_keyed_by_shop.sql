-- Issue 38: a merchant event writes one index entry fewer.
--
-- `events_pkey (seq, shop_id)` and `events_by_shop (shop_id, seq)` held the
-- same pairs in two orders; every event wrote an entry in each. Every
-- statement that reads events by `seq` names its shop (the shop's list, the
-- relay's join from `event_deliveries`, an endpoint's backfill), so one
-- index keyed `(shop_id, seq)` serves them all: it becomes the primary key
-- and `events_by_shop` goes. `seq` stays unique on its own (a sequence).

ALTER TABLE events DROP CONSTRAINT events_pkey;
ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (shop_id, seq);
DROP INDEX events_by_shop;
