-- A shop's API keys (issue 35): several per shop, each with its own secret
-- (stored as its SHA-256), mode, scope and life; as PostgreSQL's migration
-- 0017. Times are unix milliseconds.
CREATE TABLE api_keys (
    shop_id       TEXT NOT NULL REFERENCES shops (id),
    id            TEXT NOT NULL,
    mode          TEXT NOT NULL CHECK (mode IN ('live', 'test')),
    scope         TEXT NOT NULL CHECK (scope IN ('full', 'read_only', 'payments')),
    secret_sha256 BLOB NOT NULL CHECK (length(secret_sha256) = 32),
    prefix        TEXT,
    description   TEXT,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    revoked_at    INTEGER,
    last_used_at  INTEGER,
    PRIMARY KEY (shop_id, id),
    UNIQUE (shop_id, secret_sha256)
) STRICT;

-- Every shop's one secret becomes its first key: live, full, as it was.
INSERT INTO api_keys (shop_id, id, mode, scope, secret_sha256, description, created_at)
SELECT id, 'key_' || lower(hex(randomblob(16))), 'live', 'full', secret_sha256,
    'the shop''s first secret', created_at
FROM shops;
