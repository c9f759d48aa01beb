-- Test mode (issue 35). A shop's test mode is a namespace of its own: its
-- id is the shop's id with `.test` appended (`chargeonce_core::ShopId`), and
-- every object made with a test key (payments, refunds, idempotency keys,
-- orders, events, webhook endpoints) is stored under it. So every primary
-- key, unique index and query that names the shop names the mode too, and
-- test and live objects cannot meet: the same idempotency key or order
-- reference in the two modes is two rows, a list or a look-up of one mode
-- cannot return the other's, and the hot tables gain no column and no index.
--
-- The namespace needs a row in `shops` (the rows of its objects name it, as
-- they name a shop): every shop gets its test row here, and every shop made
-- from now on gets both at once. A binary from before this migration reads
-- such ids as corrupt rows: make test keys only once every instance runs
-- this version. The API keys stay the shop's own (they
-- carry their mode); a key made through the API is found again by its
-- idempotency key within its mode.

ALTER TABLE shops ADD COLUMN mode TEXT NOT NULL DEFAULT 'live'
    CHECK (mode IN ('live', 'test'));

-- The namespace's row holds no secret of the shop's (the column is not read
-- since API keys): random bytes fill it.
INSERT INTO shops (id, secret_sha256, created_at, mode)
SELECT id || '.test', sha256(gen_random_uuid()::text::bytea), created_at, 'test'
FROM shops WHERE mode = 'live';

-- A row's mode is the one its id names.
ALTER TABLE shops ADD CONSTRAINT shops_mode_is_the_ids
    CHECK ((mode = 'test') = (id LIKE '%.test'));

DROP INDEX api_keys_by_request;
CREATE UNIQUE INDEX api_keys_by_request ON api_keys (shop_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
