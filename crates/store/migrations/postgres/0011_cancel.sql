-- Cancel (issue 31): a pending payment can end `canceled` (a look-up after
-- the settle window found no charge: nothing was taken, and the order is
-- free again), a cancel request has a key of its own (recovery point
-- `cancel_requested`, naming the payment), and the merchant hears of it
-- (`payment.canceled`).
--
-- `live_reference` is the order's reference only while the payment is
-- pending or succeeded, so a canceled payment already frees its order.
-- The checks are replaced NOT VALID and then validated: the validation
-- reads the table under a lock that lets writes go on.

ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'succeeded', 'declined', 'canceled')) NOT VALID;
ALTER TABLE payments VALIDATE CONSTRAINT payments_status_check;

ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check
    CHECK (recovery_point IN ('payment_created', 'order_already_paid', 'refund_created',
        'cancel_requested', 'finished')) NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_recovery_point_check;

ALTER TABLE events DROP CONSTRAINT events_event_type_check;
ALTER TABLE events ADD CONSTRAINT events_event_type_check
    CHECK (event_type IN ('payment.succeeded', 'payment.declined', 'payment.canceled',
        'refund.succeeded', 'refund.failed')) NOT VALID;
ALTER TABLE events VALIDATE CONSTRAINT events_event_type_check;
