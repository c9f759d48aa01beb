-- A shop's API keys (issue 35): several per shop, each with its own secret
-- (stored as its SHA-256), mode, scope and life. Authentication reads them;
-- `shops.secret_sha256` is no longer read, and stays only so that a binary
-- from before this migration still runs against the database.
--
-- Keyed by the shop first, as every table since the keys were made ready to
-- distribute by shop (migration 0016); the secret's hash is unique per shop,
-- so a presented secret names at most one key.
CREATE TABLE api_keys (
    shop_id       TEXT NOT NULL REFERENCES shops (id),
    id            TEXT NOT NULL,
    mode          TEXT NOT NULL CHECK (mode IN ('live', 'test')),
    scope         TEXT NOT NULL CHECK (scope IN ('full', 'read_only', 'payments')),
    secret_sha256 BYTEA NOT NULL CHECK (length(secret_sha256) = 32),
    -- The visible start of the secret; NULL for the secrets set before keys
    -- had prefixes (never seen in clear by the store).
    prefix        TEXT,
    description   TEXT,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at    TIMESTAMPTZ,
    revoked_at    TIMESTAMPTZ,
    last_used_at  TIMESTAMPTZ,
    PRIMARY KEY (shop_id, id),
    UNIQUE (shop_id, secret_sha256)
);

-- Every shop's one secret becomes its first key: live, full, as it was.
INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, description, created_at)
SELECT id, 'key_' || replace(gen_random_uuid()::text, '-', ''), 'live', 'full', secret_sha256,
    'the shop''s first secret', created_at
FROM shops;
