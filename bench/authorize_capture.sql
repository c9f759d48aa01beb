-- One authorization and its capture of everything as chargeonce's PostgreSQL
-- store issues them (crates/store/src/postgres/: claim.rs, keys.rs,
-- finish.rs, authorizations.rs, history.rs, outbox.rs), for
-- `pgbench -n -M prepared -f`: the database work of one turn of the bench's
-- `authorize-capture` scenario (`POST /v1/payments` with
-- `"capture_method":"manual"`, then `POST /v1/payments/{id}/captures` with `{}`
-- under its own key), the counterpart of bench/fresh_payment.sql. Four
-- round-trip groups, in the order the service runs them:
--   1. the authorization's claim: a transaction (`claim_in_transaction`, the
--      path every manual payment takes: the one-statement claim is kept for
--      payments charged at once) of the key row, the payment row with its
--      place in the pending queue, and its row in the expirer's queue;
--   2. the authorization's finish: the one autocommitted statement of
--      `finish` (finish.rs), as for a fresh payment but with the merchant
--      event `payment.authorized` (the settle itself is the same: status
--      `succeeded`, the hold stays `open`);
--   3. the capture's claim: a transaction (`claim_capture`) of the capture
--      key's row, the payment row locked, its hold reserved, the capture row
--      and the `capture_reserved` history entry;
--   4. the capture's finish: a transaction (`finish_capture`) of the fenced
--      answer with its entries, the capture settled, the payment row locked
--      again and its hold captured, the `capture_ended` entry and the
--      merchant event `capture.succeeded`.
-- Groups 1, 3 and 4 are one sqlx transaction each: BEGIN, one round trip per
-- statement, COMMIT, as the `BEGIN;` / `COMMIT;` lines below. The history
-- entries of one write share a history row (migration 0010): their kinds and
-- events are unnested from two arrays, as the store binds them. The claims'
-- `claimed` entry of the payment is the payment row's `claimed_by`, no row
-- of its own; the capture claim writes a history row of its own.
-- Left out, as in bench/fresh_payment.sql: the two acquirer calls (not
-- database work) and the auth reads (`SELECT secret_sha256 FROM shops WHERE
-- id = ...`: the service caches each shop's hash for 30 s, so they cost one
-- read per shop and instance every 30 s, not two per turn). The lease's
-- heartbeat (`renew_lease`) first fires a third of the lease after the send
-- began, so a quick acquirer call costs none; a resumed key's history read
-- (`payment_history`) is only for a take-over. Neither happens on this path.
-- The Rust code checks what each statement returned between statements (a
-- key row inserted, one row fenced, the hold judged by
-- chargeonce_core::authorization): a script cannot, so the hold's numbers it
-- computes become constants here (amount 1000; reserve: `closing`, reserved
-- 1000, one in flight; capture settled: `captured`, captured 1000, nothing
-- reserved or in flight), as fresh_payment.sql writes the settled status.
-- Each run of the script gets a new random key pair and order, as the
-- scenario does (the capture's key is the payment's with `-capture`).
-- The stored response bodies and the events' payloads are constant JSON of
-- the usual size in hex (pgbench would take the colons of a JSON literal,
-- `:null`, `:true`, for variables); so are the history entries' events
-- (text decoded from hex), of the usual size. Ids are the script's own
-- (`pay_pgbench_...`, `cap_pgbench_...`), about the size of the real ones.
\set k random(1, 9000000000000000000)
-- 1. The authorization's claim: `claim_in_transaction` (claim.rs) as
-- `claim_payment` runs it for a manual payment. `insert_key` (keys.rs): its
-- `try_insert_key`, a new key (recovery point `payment_created`, no refund,
-- no capture). `insert_payment` (claim.rs): the payment (`capture_method`
-- `manual`, hold `open` from `initial_hold`, its expiry 7 days from creation,
-- `DEFAULT_AUTHORIZATION_TTL`; no metadata: NULL) and its place in the
-- pending queue; then, the payment inserted, its row in the expirer's queue
-- (`authorization_expiries`, migration 0014). No history row: the claimed
-- entry is the payment row's `claimed_by`.
BEGIN;
INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path,
    recovery_point, lease_token, locked_until, payment_id, created_at, expires_at,
    refund_id, lease_holder, capture_id)
VALUES ('bench', 'pgbench-' || :client_id::text || '-' || :k::text || '-pay',
    '\x0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'::bytea,
    'POST', '/v1/payments', 'payment_created', '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f',
    clock_timestamp() + 30000::float8 * interval '1 millisecond',
    'pay_pgbench_' || :client_id::text || '_' || :k::text, now(),
    now() + 86400000::float8 * interval '1 millisecond', NULL, 'bench-host:123456', NULL)
ON CONFLICT (shop_id, key) DO NOTHING
RETURNING 1;
WITH p AS (
    INSERT INTO payments (id, shop_id, idempotency_key, reference, amount_minor,
        currency, token, status, acquirer_key, created_at, claimed_by, metadata,
        capture_method, hold, authorization_expires_at)
    VALUES ('pay_pgbench_' || :client_id::text || '_' || :k::text, 'bench',
        'pgbench-' || :client_id::text || '-' || :k::text || '-pay',
        'order-pgbench-' || :client_id::text || '-' || :k::text, 1000, 'RUB', 'tok_ok',
        'pending', 'acq_pgbench_' || :client_id::text || '_' || :k::text, now(),
        'bench-host:123456', NULL, 'manual', 'open', now() + interval '7 days')
    ON CONFLICT (shop_id, live_reference) DO NOTHING
    RETURNING id, created_at, shop_id),
queued AS (
    INSERT INTO pending_payments (created_at, payment_id, shop_id)
    SELECT created_at, id, shop_id FROM p)
SELECT id FROM p;
INSERT INTO authorization_expiries (shop_id, payment_id, expires_at)
VALUES ('bench', 'pay_pgbench_' || :client_id::text || '_' || :k::text,
    now() + interval '7 days');
COMMIT;
-- 2. The authorization's finish: `finish` (finish.rs), the one autocommitted
-- statement a fresh payment's finish is too (bench/fresh_payment.sql). For an
-- authorization only the bound values differ: the settlement is the same
-- (`succeeded`, the charge's provider id; `hold` is not written, it stays
-- `open`), the event is `NewEvent::payment_settled` of a manual payment:
-- `payment.authorized`, its body's status `authorized`; the stored answer is
-- the payment shown `authorized`, with its capture fields. Its history
-- entries (`Entries::answered` and the `Settled` push): the charge's
-- `acquirer_call`, `answered`, `settled`, one history row.
WITH held AS MATERIALIZED (
    SELECT 1 FROM idempotency_keys
    WHERE shop_id = 'bench' AND key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay'
      AND lease_token = '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f'
      AND recovery_point <> 'finished'
    FOR NO KEY UPDATE),
settled AS (
    UPDATE payments SET status = 'succeeded',
        provider_payment_id = 'ch_019ad3f1c2b07e4f9a8b7c6d5e4f3a2b',
        decline_code = NULL, updated_at = now()
    WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
      AND (shop_id, status) IS NOT DISTINCT FROM ('bench', 'pending')
      AND EXISTS (SELECT 1 FROM held)
    RETURNING id, created_at, shop_id),
dequeued AS (
    DELETE FROM pending_payments q USING settled
    WHERE q.created_at = settled.created_at AND q.payment_id = settled.id
        AND q.shop_id = settled.shop_id),
finished AS (
    UPDATE idempotency_keys SET recovery_point = 'finished',
        response_status = 201,
        response_headers = '[["content-type","application/json"],["location","/v1/payments/pay_pgbench_' || :client_id::text || '_' || :k::text || '"]]',
        response_body = '\x7b226964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c226f626a656374223a227061796d656e74222c2273686f705f6964223a2262656e6368222c22737461747573223a22617574686f72697a6564222c22616d6f756e74223a7b2276616c7565223a2231302e3030222c2263757272656e6379223a22525542227d2c227265666572656e6365223a226f726465722d3031323334353637383961622d31322d33343536222c2270726f76696465725f7061796d656e745f6964223a2263685f3031396164336631633262303765346639613862376336643565346633613262222c226465636c696e655f636f6465223a6e756c6c2c22637265617465645f6174223a22323032362d31312d32395432333a30303a30302e3030305a222c22616d6f756e745f726566756e646564223a7b2276616c7565223a22302e3030222c2263757272656e6379223a22525542227d2c22726566756e645f737461747573223a226e6f6e65222c226d65746164617461223a7b7d2c22636170747572655f6d6574686f64223a226d616e75616c222c22616d6f756e745f63617074757261626c65223a7b2276616c7565223a2231302e3030222c2263757272656e6379223a22525542227d2c22616d6f756e745f6361707475726564223a7b2276616c7565223a22302e3030222c2263757272656e6379223a22525542227d2c22617574686f72697a6174696f6e5f657870697265735f6174223a22323032362d31322d30365432333a30303a30302e3030305a227d'::bytea,
        lease_token = NULL, locked_until = NULL,
        expires_at = GREATEST(expires_at,
            now() + 86400000::float8 * interval '1 millisecond')
    WHERE shop_id = 'bench' AND key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay'
      AND lease_token = '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e7f'
      AND recovery_point <> 'finished'
      AND EXISTS (SELECT 1 FROM settled)
    RETURNING 1),
event AS (
    INSERT INTO events (id, shop_id, event_type, payment_id, payload,
        next_attempt_at)
    SELECT 'evt_pgbench_' || :client_id::text || '_' || :k::text, 'bench',
        'payment.authorized', settled.id,
        '\x7b2263726561746564223a313736343633303030303030302c2264617461223a7b227061796d656e74223a7b22616d6f756e74223a7b2263757272656e6379223a22525542222c2276616c7565223a2231302e3030227d2c226465636c696e655f636f6465223a6e756c6c2c226964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c226d65746164617461223a7b7d2c227265666572656e6365223a226f726465722d3031323334353637383961622d31322d33343536222c22737461747573223a22617574686f72697a6564227d7d2c226964223a226576745f3031396164336631633262303765346639613862376336643565346633613262222c2274797065223a227061796d656e742e617574686f72697a6564227d'::bytea,
        (SELECT CASE WHEN s.webhook_url IS NULL
                     THEN to_timestamp(253402300799000::float8 / 1000) ELSE now() END
         FROM shops s WHERE s.id = 'bench')
    FROM settled
    RETURNING 1),
history AS (
    INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event)
    SELECT w.payment_id, w.refund_id, w.shop_id, string_agg(e.kind, ',' ORDER BY e.n),
        CASE WHEN count(*) = 1 THEN min(e.event)
             ELSE '[' || string_agg(e.event, ',' ORDER BY e.n) || ']' END
    FROM (SELECT id AS payment_id, NULL::text AS refund_id, shop_id FROM settled) w,
        unnest(ARRAY['acquirer_call', 'answered', 'settled']::text[],
            ARRAY[convert_from('\x7b2274797065223a2261637175697265725f63616c6c222c2263616c6c223a22636861726765222c226f7574636f6d65223a22737563636565646564222c226c6174656e63795f6d73223a31322c2261637175697265725f6b6579223a226368617267656f6e63652d7061795f3031613232393739363862333735626362333665623865363631323438323136222c22696e7374616e6365223a2262656e63682d686f73743a313233343536227d'::bytea, 'UTF8'),
                  convert_from('\x7b2274797065223a22616e737765726564222c226b6579223a223031323334353637383961622d31322d333435362d706179222c22737461747573223a3230317d'::bytea, 'UTF8'),
                  convert_from('\x7b2274797065223a22736574746c6564222c22737461747573223a22737563636565646564222c226279223a2272657175657374222c226b6579223a223031323334353637383961622d31322d333435362d706179227d'::bytea, 'UTF8')]::text[])
        WITH ORDINALITY AS e(kind, event, n)
    WHERE w.payment_id IS NOT NULL
    GROUP BY w.payment_id, w.refund_id, w.shop_id, (e.n - 1) / 16
    ORDER BY (e.n - 1) / 16)
SELECT h.held, s.n AS settled,
    1 / CASE WHEN s.n = f.n AND s.n = e.n THEN 1 ELSE 0 END AS whole
FROM (SELECT EXISTS (SELECT 1 FROM held) AS held) h,
     (SELECT count(*) AS n FROM settled) s,
     (SELECT count(*) AS n FROM finished) f,
     (SELECT count(*) AS n FROM event) e;
-- 3. The capture's claim: `claim_capture` (authorizations.rs). `insert_key`
-- (keys.rs: `try_insert_key`): the capture key (recovery point
-- `capture_created`, the payment, the capture's id; the path is the
-- request's). `reserve_capture`: `lock_payment` (the payment row, its
-- `payment_columns!` of crates/store/src/columns.rs, FOR UPDATE), the
-- reservation judged in Rust (`{}`: the rest, 1000, as the last capture),
-- `write_hold` (hold `closing`, 1000 reserved, one capture in flight), and the
-- capture row (final, pending). `record` (history.rs): the
-- `capture_reserved` entry, one history row.
BEGIN;
INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path,
    recovery_point, lease_token, locked_until, payment_id, created_at, expires_at,
    refund_id, lease_holder, capture_id)
VALUES ('bench', 'pgbench-' || :client_id::text || '-' || :k::text || '-pay-capture',
    '\xfedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210'::bytea,
    'POST', '/v1/payments/pay_pgbench_' || :client_id::text || '_' || :k::text || '/captures',
    'capture_created', '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e80',
    clock_timestamp() + 30000::float8 * interval '1 millisecond',
    'pay_pgbench_' || :client_id::text || '_' || :k::text, now(),
    now() + 86400000::float8 * interval '1 millisecond', NULL, 'bench-host:123456',
    'cap_pgbench_' || :client_id::text || '_' || :k::text)
ON CONFLICT (shop_id, key) DO NOTHING
RETURNING 1;
SELECT id, shop_id, idempotency_key, reference, amount_minor, currency, token, status,
    acquirer_key, provider_payment_id, decline_code, created_at, refunded_minor, metadata,
    capture_method, hold, authorization_expires_at, captured_minor, capture_reserved_minor,
    captures_in_flight
FROM payments WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
  AND shop_id IS NOT DISTINCT FROM 'bench'
FOR UPDATE;
UPDATE payments SET hold = 'closing', captured_minor = 0, capture_reserved_minor = 1000,
    captures_in_flight = 1, updated_at = now()
WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
  AND (shop_id, capture_method) IS NOT DISTINCT FROM ('bench', 'manual');
INSERT INTO captures (shop_id, id, payment_id, idempotency_key, amount_minor,
    currency, is_final, status, acquirer_key, created_at)
VALUES ('bench', 'cap_pgbench_' || :client_id::text || '_' || :k::text,
    'pay_pgbench_' || :client_id::text || '_' || :k::text,
    'pgbench-' || :client_id::text || '-' || :k::text || '-pay-capture', 1000, 'RUB', true,
    'pending', 'acq_cap_pgbench_' || :client_id::text || '_' || :k::text, now());
INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event)
SELECT w.payment_id, w.refund_id, w.shop_id, string_agg(e.kind, ',' ORDER BY e.n),
    CASE WHEN count(*) = 1 THEN min(e.event)
         ELSE '[' || string_agg(e.event, ',' ORDER BY e.n) || ']' END
FROM (SELECT ('pay_pgbench_' || :client_id::text || '_' || :k::text)::text AS payment_id,
        NULL::text AS refund_id, 'bench'::text AS shop_id) w,
    unnest(ARRAY['capture_reserved']::text[],
        ARRAY[convert_from('\x7b2274797065223a22636170747572655f7265736572766564222c22636170747572655f6964223a226361705f3031613232393832613163303764313162306634633765386530643661336231222c226b6579223a223031323334353637383961622d31322d333435362d7061792d63617074757265222c22616d6f756e745f6d696e6f72223a313030302c2263757272656e6379223a22525542222c226c617374223a747275652c22696e7374616e6365223a2262656e63682d686f73743a313233343536227d'::bytea, 'UTF8')]::text[])
    WITH ORDINALITY AS e(kind, event, n)
WHERE w.payment_id IS NOT NULL
GROUP BY w.payment_id, w.refund_id, w.shop_id, (e.n - 1) / 16
ORDER BY (e.n - 1) / 16;
COMMIT;
-- 4. The capture's finish: `finish_capture` (authorizations.rs).
-- `finish_key` (keys.rs): the fenced answer (201, the capture shown
-- `succeeded`), with its entries in the same statement (`Entries::answered`:
-- the capture's `acquirer_call`, `answered`; one history row).
-- `settle_capture`: the capture moved from pending (RETURNING its
-- `capture_columns!`), `lock_payment` again, the settlement judged in Rust
-- (`capture_settled`: the last capture succeeded), `write_hold` (hold
-- `captured`, 1000 captured, nothing reserved or in flight). `record`: the
-- `capture_ended` entry, one history row. `insert_event` (outbox.rs):
-- `NewEvent::capture_settled`, `capture.succeeded`, parked as for a shop
-- without a webhook URL.
BEGIN;
WITH f AS (
    UPDATE idempotency_keys SET recovery_point = 'finished', response_status = 201,
        response_headers = '[["content-type","application/json"],["location","/v1/captures/cap_pgbench_' || :client_id::text || '_' || :k::text || '"]]',
        response_body = '\x7b226964223a226361705f3031613232393832613163303764313162306634633765386530643661336231222c226f626a656374223a2263617074757265222c227061796d656e745f6964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c2273686f705f6964223a2262656e6368222c22737461747573223a22737563636565646564222c22616d6f756e74223a7b2276616c7565223a2231302e3030222c2263757272656e6379223a22525542227d2c2266696e616c223a747275652c2270726f76696465725f636170747572655f6964223a2263705f3031613232393832613163343761353261306531623164386332663365346135222c226661696c7572655f636f6465223a6e756c6c2c22637265617465645f6174223a22323032362d31312d32395432333a30303a30302e3132305a227d'::bytea,
        lease_token = NULL, locked_until = NULL,
        expires_at = GREATEST(expires_at, now() + 86400000::float8 * interval '1 millisecond')
    WHERE shop_id = 'bench' AND key = 'pgbench-' || :client_id::text || '-' || :k::text || '-pay-capture'
      AND lease_token = '0193a5c2-7d2e-7b5c-9f1e-2a3b4c5d6e80'
      AND recovery_point <> 'finished'
    RETURNING payment_id, refund_id, shop_id),
h AS (
    INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event)
    SELECT w.payment_id, w.refund_id, w.shop_id, string_agg(e.kind, ',' ORDER BY e.n),
        CASE WHEN count(*) = 1 THEN min(e.event)
             ELSE '[' || string_agg(e.event, ',' ORDER BY e.n) || ']' END
    FROM f w,
        unnest(ARRAY['acquirer_call', 'answered']::text[],
            ARRAY[convert_from('\x7b2274797065223a2261637175697265725f63616c6c222c2263616c6c223a2263617074757265222c226f7574636f6d65223a22737563636565646564222c226c6174656e63795f6d73223a31322c2261637175697265725f6b6579223a226368617267656f6e63652d6361705f3031613232393832613163303764313162306634633765386530643661336231222c22696e7374616e6365223a2262656e63682d686f73743a313233343536227d'::bytea, 'UTF8'),
                  convert_from('\x7b2274797065223a22616e737765726564222c226b6579223a223031323334353637383961622d31322d333435362d7061792d63617074757265222c22737461747573223a3230317d'::bytea, 'UTF8')]::text[])
        WITH ORDINALITY AS e(kind, event, n)
    WHERE w.payment_id IS NOT NULL
    GROUP BY w.payment_id, w.refund_id, w.shop_id, (e.n - 1) / 16
    ORDER BY (e.n - 1) / 16)
SELECT count(*) FROM f;
UPDATE captures SET status = 'succeeded',
    provider_capture_id = 'cp_01a22982a1c47a52a0e1b1d8c2f3e4a5', failure_code = NULL,
    updated_at = now()
WHERE shop_id = 'bench' AND id = 'cap_pgbench_' || :client_id::text || '_' || :k::text
  AND status = 'pending'
RETURNING id, shop_id, payment_id, idempotency_key, amount_minor, currency, is_final, status,
    acquirer_key, provider_capture_id, failure_code, created_at;
SELECT id, shop_id, idempotency_key, reference, amount_minor, currency, token, status,
    acquirer_key, provider_payment_id, decline_code, created_at, refunded_minor, metadata,
    capture_method, hold, authorization_expires_at, captured_minor, capture_reserved_minor,
    captures_in_flight
FROM payments WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
  AND shop_id IS NOT DISTINCT FROM 'bench'
FOR UPDATE;
UPDATE payments SET hold = 'captured', captured_minor = 1000, capture_reserved_minor = 0,
    captures_in_flight = 0, updated_at = now()
WHERE id = 'pay_pgbench_' || :client_id::text || '_' || :k::text
  AND (shop_id, capture_method) IS NOT DISTINCT FROM ('bench', 'manual');
INSERT INTO payment_history (payment_id, refund_id, shop_id, kind, event)
SELECT w.payment_id, w.refund_id, w.shop_id, string_agg(e.kind, ',' ORDER BY e.n),
    CASE WHEN count(*) = 1 THEN min(e.event)
         ELSE '[' || string_agg(e.event, ',' ORDER BY e.n) || ']' END
FROM (SELECT ('pay_pgbench_' || :client_id::text || '_' || :k::text)::text AS payment_id,
        NULL::text AS refund_id, 'bench'::text AS shop_id) w,
    unnest(ARRAY['capture_ended']::text[],
        ARRAY[convert_from('\x7b2274797065223a22636170747572655f656e646564222c22636170747572655f6964223a226361705f3031613232393832613163303764313162306634633765386530643661336231222c22737461747573223a22737563636565646564227d'::bytea, 'UTF8')]::text[])
    WITH ORDINALITY AS e(kind, event, n)
WHERE w.payment_id IS NOT NULL
GROUP BY w.payment_id, w.refund_id, w.shop_id, (e.n - 1) / 16
ORDER BY (e.n - 1) / 16;
INSERT INTO events (id, shop_id, event_type, payment_id, refund_id, payload,
    next_attempt_at, capture_id)
SELECT 'evt_pgbench_' || :client_id::text || '_' || :k::text || '_cap', 'bench',
    'capture.succeeded', 'pay_pgbench_' || :client_id::text || '_' || :k::text, NULL,
    '\x7b2263726561746564223a313736343633303030303132302c2264617461223a7b2263617074757265223a7b22616d6f756e74223a7b2263757272656e6379223a22525542222c2276616c7565223a2231302e3030227d2c226661696c7572655f636f6465223a6e756c6c2c2266696e616c223a747275652c226964223a226361705f3031613232393832613163303764313162306634633765386530643661336231222c227061796d656e745f6964223a227061795f3031613232393739363862333735626362333665623865363631323438323136222c227265666572656e6365223a226f726465722d3031323334353637383961622d31322d33343536222c22737461747573223a22737563636565646564227d7d2c226964223a226576745f3031396164336631633262303765346639613862376336643565346633613263222c2274797065223a22636170747572652e737563636565646564227d'::bytea,
    CASE WHEN s.webhook_url IS NULL THEN to_timestamp(253402300799000::float8 / 1000)
         ELSE now() END, 'cap_pgbench_' || :client_id::text || '_' || :k::text
FROM shops s WHERE s.id = 'bench';
COMMIT;
