-- bench/scale: KEYS finished payments as the PostgreSQL store leaves them
-- (crates/store/src/postgres.rs: claim_payment, then finish), for
-- `psql -v keys=N -v shop=ID -f`. One server-side INSERT ... SELECT per table.
--
-- Payment rows: succeeded, one unique order reference each, ids shaped like
-- the service's (`pay_` + 32 hex digits, increasing like its UUIDv7s; the
-- acquirer key `chargeonce-<id>`). Key rows: finished, with a stored 201
-- (headers and a JSON body of the usual size) and a random-looking key (an
-- md5, as a client's UUIDs would be), created over the last 23 hours and kept
-- 24 hours, so none is expired yet (bench/scale expires some later).
--
-- For this load only: no commit wait, and the foreign-key triggers off
-- (session_replication_role = replica; the rows are consistent by
-- construction). Indexes stay on and are filled row by row, as in service.
SET synchronous_commit = off;
SET session_replication_role = replica;
SET maintenance_work_mem = '256MB';

INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor,
    currency, token, status, acquirer_key, provider_payment_id, decline_code,
    created_at, updated_at)
SELECT 'pay_' || lpad(to_hex(i), 32, '0'), :'shop',
    'load-' || md5(i::text) || '-pay',
    'order-load-' || md5(i::text),
    1000 + i % 100000, 'RUB', 'tok_ok', 'succeeded',
    'chargeonce-pay_' || lpad(to_hex(i), 32, '0'),
    'ch_' || md5('ch' || i::text), NULL,
    now() - interval '23 hours' + i * (interval '23 hours' / :keys),
    now() - interval '23 hours' + i * (interval '23 hours' / :keys) + interval '150 milliseconds'
FROM generate_series(1, :keys) AS i;

INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path,
    recovery_point, lease_token, locked_until, payment_id, response_status,
    response_headers, response_body, created_at, expires_at, replays, refund_id)
SELECT :'shop', 'load-' || md5(i::text) || '-pay',
    sha256(int8send(i)), 'POST', '/v1/payments', 'finished', NULL, NULL,
    'pay_' || lpad(to_hex(i), 32, '0'), 201,
    'content-type: application/json' || chr(10) || 'location: /v1/payments/pay_' || lpad(to_hex(i), 32, '0'),
    convert_to('{"id":"pay_' || lpad(to_hex(i), 32, '0') || '","object":"payment","shop_id":"'
        || :'shop' || '","status":"succeeded","amount":{"value":"'
        || to_char((1000 + i % 100000) / 100.0, 'FM999990.00') || '","currency":"RUB"},"reference":"order-load-'
        || md5(i::text) || '","provider_payment_id":"ch_' || md5('ch' || i::text)
        || '","decline_code":null,"created_at":"2026-11-30T08:00:00.000Z"}', 'UTF8'),
    now() - interval '23 hours' + i * (interval '23 hours' / :keys),
    now() + interval '1 hour' + i * (interval '23 hours' / :keys),
    0, NULL
FROM generate_series(1, :keys) AS i;
