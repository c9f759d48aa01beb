-- Issue 6: refunds.
--
-- A refund reserves its amount on the payment in phase 1 (a conditional
-- update in the same transaction as the key row and the refund row), so
-- concurrent refunds under different keys never exceed the captured amount.
-- A refund the acquirer refuses gives its reservation back. The payment's
-- status never changes for a refund: the one-live-payment-per-order index
-- keeps seeing a refunded payment as `succeeded`.
ALTER TABLE payments
    ADD COLUMN refund_reserved_minor BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN refunded_minor        BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT payments_refunds_within_amount CHECK (
        0 <= refunded_minor AND refunded_minor <= refund_reserved_minor
        AND refund_reserved_minor <= amount_minor
    );

CREATE TABLE refunds (
    id                 TEXT PRIMARY KEY,
    shop_id            TEXT NOT NULL REFERENCES shops (id),
    payment_id         TEXT NOT NULL REFERENCES payments (id),
    idempotency_key    TEXT NOT NULL,
    amount_minor       BIGINT NOT NULL CHECK (amount_minor > 0),
    currency           TEXT NOT NULL CHECK (length(currency) = 3),
    status             TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    -- Derived from the refund id at claim; never the payment's.
    acquirer_key       TEXT NOT NULL UNIQUE,
    provider_refund_id TEXT,
    failure_code       TEXT,
    created_at         TIMESTAMPTZ NOT NULL,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX refunds_by_payment ON refunds (payment_id, created_at);

-- A refund key points at its payment (payment_id) and at its refund.
ALTER TABLE idempotency_keys
    ADD COLUMN refund_id TEXT REFERENCES refunds (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check CHECK (
    recovery_point IN ('payment_created', 'order_already_paid', 'refund_created', 'finished')
);
