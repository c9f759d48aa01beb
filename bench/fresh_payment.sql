-- One fresh payment as chargeonce's PostgreSQL store issues it
-- (crates/store/src/postgres/: claim.rs, finish.rs), for `pgbench -n -M prepared -f`:
-- two autocommitted statements (a payment charged at once: no metadata, capture
-- method `automatic`, no hold, as `bench fresh` sends). The claim (the key row and
-- the payment row, the order's unique index `payments_by_order`; a new key for a
-- free order, the common case: a plain INSERT of the payment, which a taken order
-- would fail) and the claimant's usual finish in its form for a shop without
-- endpoints, as the bench shop is (the key row locked while the lease holds, the
-- payment settled in place with its history kept on its row if the shop has no
-- enabled endpoint, the stored response, the merchant event; no deliveries' part,
-- no pending-queue part: crates/store/src/postgres/fanout.rs). The acquirer call between the
-- two statements is not database work and is left out. The auth read
-- (`SELECT ... FROM api_keys ...`) is left out too: the service caches each key's
-- hash for 30 s (`--auth-cache-ttl`), so it costs one read per key and instance
-- every 30 s, not one per payment. Each run of the script gets a new random key
-- and order, as `bench fresh` does. The stored response body and the event's
-- payload are payment JSON of the usual size, in hex (pgbench would take the colons
-- of a JSON literal for variables), uncompressed (the service stores them in a
-- compressed frame: a little smaller); the headers in their stored compact form
-- (crates/store/src/stored_headers.rs). Keep in step with claim.rs
-- (`claim_in_one_statement`) and finish.rs (`settle_compact`).
\set k random(1, 9000000000000000000)
WITH k AS (
    INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path,
        recovery_point, lease_token, locked_until, payment_id, created_at, expires_at,
        lease_holder)
    VALUES ('bench', 'pgbench-' || :client_id::text || '-' || :k::text || '-pay',
        '\x0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'::bytea,
        'POST', '/v1/payments', 'payment_created', '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f',
        clock_timestamp() + 30000::float8 * interval '1 millisecond',
        'pay_pgbench_' || :client_id::text || '_' || :k::text, now(),
        now() + 86400000::float8 * interval '1 millisecond', 'bench-host:123456')
    ON CONFLICT (shop_id, key) DO NOTHING
    RETURNING 1),
p AS (
    INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor,
        currency, token, status, acquirer_key, created_at, claimed_by, metadata,
        capture_method, hold, authorization_expires_at)
    SELECT 'pay_pgbench_' || :client_id::text || '_' || :k::text, 'bench',
        'pgbench-' || :client_id::text || '-' || :k::text || '-pay',
        'order-pgbench-' || :client_id::text || '-' || :k::text, 1000, 'RUB', 'tok_ok', 'pending',
        NULL::text, now(), 'bench-host:123456', NULL::text, 'automatic', NULL::text,
        NULL::timestamptz
    FROM k
    RETURNING id)
SELECT 1 FROM p;
WITH held AS MATERIALIZED (
    SELECT 1 FROM idempotency_keys
    WHERE shop_id = 'bench' AND key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay'
        AND lease_token = '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f' AND recovery_point <> 'finished'
    FOR NO KEY UPDATE),
settled AS (
    UPDATE payments SET status = 'succeeded',
        provider_payment_id = 'ch_019ad3f1c2b07e4f9a8b7c6d5e4f3a2b', decline_code = NULL,
        updated_at = now(),
        live_reference = payment_live_reference('succeeded', hold, captured_minor, reference),
        (finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer) =
            (nextval('payment_history_seq_seq'), now(), 'succeeded'::text, 12::bigint,
             201::smallint)
    WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
        AND (shop_id, status) IS NOT DISTINCT FROM ('bench', 'pending')
        AND idempotency_key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay'
        AND claimed_by = 'bench-host:123456'
        AND EXISTS (SELECT 1 FROM held)
        AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w
            WHERE w.shop_id = 'bench' AND w.enabled AND w.deleted_at IS NULL)
    RETURNING id, created_at, shop_id),
finished AS (
    UPDATE idempotency_keys SET recovery_point = 'finished', response_status = 201,
        response_headers = 'j' || chr(10) || 'Lpayments/pay_pgbench_' || :client_id::text || '_' || :k::text,
        response_body = '\x7b226964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c226f626a656374223a227061796d656e74222c2273686f705f6964223a2262656e6368222c22737461747573223a22737563636565646564222c22616d6f756e74223a7b2276616c7565223a2231302e3030222c2263757272656e6379223a22525542227d2c227265666572656e6365223a226f726465722d3031323334353637383961622d31322d333435362d706179222c2270726f76696465725f7061796d656e745f6964223a2263685f3031396164336631633262303765346639613862376336643565346633613262222c226465636c696e655f636f6465223a6e756c6c2c22637265617465645f6174223a22323032362d31312d32395432333a30303a30302e3030305a227d'::bytea,
        lease_token = NULL, locked_until = NULL,
        expires_at = GREATEST(expires_at, now() + 86400000::float8 * interval '1 millisecond')
    WHERE shop_id = 'bench' AND key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay'
        AND lease_token = '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f' AND recovery_point <> 'finished'
        AND EXISTS (SELECT 1 FROM settled)
    RETURNING 1),
event AS (
    INSERT INTO events (id, shop_id, event_type, payment_id, payload)
    SELECT 'evt_pgbench_' || :client_id::text || '_' || :k::text, 'bench', 'payment.succeeded',
        settled.id, '\x7b2263726561746564223a313736343633303030303030302c2264617461223a7b227061796d656e74223a7b22616d6f756e74223a7b2263757272656e6379223a22525542222c2276616c7565223a2231302e3030227d2c226465636c696e655f636f6465223a6e756c6c2c226964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c227265666572656e6365223a226f726465722d3031323334353637383961622d31322d333435362d706179222c22737461747573223a22737563636565646564227d7d2c226964223a226576745f3031396164336631633262303765346639613862376336643565346633613262222c2274797065223a227061796d656e742e737563636565646564227d'::bytea
    FROM settled
    RETURNING seq, payment_id)
SELECT held, settled,
    1 / CASE WHEN settled = finished AND settled = event THEN 1 ELSE 0 END AS whole
FROM (SELECT EXISTS (SELECT 1 FROM held) AS held,
             EXISTS (SELECT 1 FROM settled) AS settled,
             EXISTS (SELECT 1 FROM finished) AS finished,
             EXISTS (SELECT 1 FROM event) AS event) parts;
