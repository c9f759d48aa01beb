-- Issue 38: the row rules of the hot path's three tables (payments, keys,
-- events) are checked by one trigger function per table instead of CHECK
-- constraints, and `live_reference` is no longer a stored generated column:
-- the payments' trigger sets it on insert, the statements that move a payment
-- set it on update, and the trigger checks it. The rules are the same, word for word,
-- and a row that breaks one fails its statement as before: SQLSTATE 23514
-- (check_violation), the constraint's name, PostgreSQL's own message.
--
-- Why: PostgreSQL 15 prepares every CHECK of a table, and the expression of
-- every stored generated column, for each statement that writes a row of it:
-- it reads the expression's stored node tree back from text (stringToNode),
-- plans it (expression_planner) and compiles it, and nothing of that is kept
-- for the next statement. A fresh payment writes rows of these tables in its
-- two statements (the claim inserts a key and a payment, the finish updates
-- both and inserts an event), so it prepared 21 CHECK expressions and the
-- generated column twice. bench/pginstructions (PostgreSQL's instructions per
-- request, counted by callgrind) put that at about 37 % of all the
-- instructions PostgreSQL spent on a fresh payment: 31 % under
-- ExecConstraints, 6.5 % under ExecInitStoredGenerated. A PL/pgSQL function
-- is compiled once per connection and keeps its expressions' plans, so a
-- trigger costs a call and its few expressions per row (each function names
-- the first rule broken in one CASE: PL/pgSQL sets each expression up once
-- per transaction).
--
-- An INSERT is checked by a BEFORE ROW trigger (the only one of its table, so
-- the row it sees is the row stored), which also sets `live_reference`, so an
-- INSERT ... ON CONFLICT sees it when it looks for a conflict. An UPDATE whose
-- SET names a column of a rule (`UPDATE OF`, as the hold's rule since 0015) is
-- checked by an AFTER ROW trigger, on the row as stored: a BEFORE UPDATE row
-- trigger would make PostgreSQL lock the row before every update of the table
-- (GetTupleForTrigger), a WAL record of its own per settle. So an update does
-- not get `live_reference` set for it: the statements that move a payment's
-- status or hold set it with `payment_live_reference` below, and the AFTER
-- trigger refuses a row where it is not what that function says (rule
-- `payments_live_reference`): as when it was generated, no write can leave it
-- wrong. Rows written before this migration were checked by the constraints
-- dropped here.
--
-- A later migration that adds a status, an event type or a recovery point
-- replaces the function (CREATE OR REPLACE) instead of a constraint.

CREATE FUNCTION row_rule_broken(relation TEXT, rule TEXT) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', relation, rule
        USING ERRCODE = 'check_violation', CONSTRAINT = rule, TABLE = relation;
END
$$;

-- payments: the seven CHECKs (0001, 0003, 0011, 0012, 0024, 0025), the hold's
-- rule on INSERT (the AFTER INSERT trigger of 0015, whose WHEN clause was
-- prepared per statement too; the UPDATE one stays) and `live_reference`.
--
-- The order a live payment holds (the reference while the payment is pending
-- or succeeded, unless it is an authorization released with nothing
-- captured), NULL otherwise: 0013's expression. A SQL function the planner
-- inlines into the statements that call it.
CREATE FUNCTION payment_live_reference(status TEXT, hold TEXT, captured_minor BIGINT,
        reference TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN status IN ('pending', 'succeeded')
                 AND (hold IS NULL OR captured_minor > 0
                      OR hold NOT IN ('released_void', 'released_expiry'))
            THEN reference END
$$;

CREATE FUNCTION payments_row_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.live_reference := payment_live_reference(NEW.status, NEW.hold,
            NEW.captured_minor, NEW.reference);
    END IF;
    -- The first rule the row breaks, if any, in one expression (each
    -- expression of a function is set up once per transaction that calls
    -- it). A rule that is NULL passes, as a CHECK does; the hold's never
    -- did, nor does `live_reference`'s.
    broken := CASE
        WHEN (NEW.amount_minor > 0) IS FALSE THEN 'payments_amount_minor_check'
        WHEN (length(NEW.currency) = 3) IS FALSE THEN 'payments_currency_check'
        WHEN (NEW.status IN ('pending', 'succeeded', 'declined', 'canceled')) IS FALSE
            THEN 'payments_status_check'
        WHEN (0 <= NEW.refunded_minor AND NEW.refunded_minor <= NEW.refund_reserved_minor
              AND NEW.refund_reserved_minor <= NEW.amount_minor) IS FALSE
            THEN 'payments_refunds_within_amount'
        WHEN (NEW.metadata IS NULL OR left(NEW.metadata, 1) = '{') IS FALSE
            THEN 'payments_metadata_check'
        WHEN (NEW.acquirer_key IS NULL OR NEW.acquirer_key = 'chargeonce-' || NEW.id) IS FALSE
            THEN 'payments_acquirer_key_derived'
        WHEN ((NEW.finish_seq IS NULL) = (NEW.finish_at IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_outcome IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_latency_ms IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_answer IS NULL)
              AND (NEW.finish_seq IS NULL OR NEW.status <> 'pending')) IS FALSE
            THEN 'payments_finish_whole'
        WHEN NEW.live_reference IS DISTINCT FROM payment_live_reference(NEW.status, NEW.hold,
                NEW.captured_minor, NEW.reference)
            THEN 'payments_live_reference'
        WHEN TG_OP = 'INSERT' AND (CASE WHEN NEW.hold IS NULL
                THEN NEW.capture_method = 'automatic' AND NEW.authorization_expires_at IS NULL
                    AND NEW.captured_minor = 0 AND NEW.capture_reserved_minor = 0
                    AND NEW.captures_in_flight = 0
                ELSE payments_hold_valid(NEW.capture_method, NEW.hold,
                    NEW.authorization_expires_at, NEW.amount_minor, NEW.captured_minor,
                    NEW.capture_reserved_minor, NEW.captures_in_flight,
                    NEW.refund_reserved_minor)
                END) IS NOT TRUE
            THEN 'payments_hold_check'
        END;
    IF broken IS NOT NULL THEN
        PERFORM row_rule_broken('payments', broken);
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE payments ALTER COLUMN live_reference DROP EXPRESSION;
ALTER TABLE payments
    DROP CONSTRAINT payments_amount_minor_check,
    DROP CONSTRAINT payments_currency_check,
    DROP CONSTRAINT payments_status_check,
    DROP CONSTRAINT payments_refunds_within_amount,
    DROP CONSTRAINT payments_metadata_check,
    DROP CONSTRAINT payments_acquirer_key_derived,
    DROP CONSTRAINT payments_finish_whole;
DROP TRIGGER payments_hold_check_insert ON payments;
CREATE TRIGGER payments_row_kept BEFORE INSERT
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_row_kept();
CREATE TRIGGER payments_row_kept_update
    AFTER UPDATE OF id, reference, amount_minor, currency, status, hold, captured_minor,
        refunded_minor, refund_reserved_minor, metadata, acquirer_key, finish_seq,
        finish_at, finish_outcome, finish_latency_ms, finish_answer, live_reference
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_row_kept();

-- idempotency_keys: the three CHECKs of 0001 and 0013 (the recovery points).
CREATE FUNCTION idempotency_keys_row_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    -- The first rule the row breaks, if any (see payments_row_kept).
    broken := CASE
        WHEN (length(NEW.fingerprint) = 32) IS FALSE
            THEN 'idempotency_keys_fingerprint_check'
        WHEN (NEW.recovery_point IN ('payment_created', 'order_already_paid',
                'refund_created', 'cancel_requested', 'capture_created', 'void_requested',
                'finished')) IS FALSE
            THEN 'idempotency_keys_recovery_point_check'
        WHEN ((NEW.recovery_point = 'finished') = (NEW.response_status IS NOT NULL)) IS FALSE
            THEN 'idempotency_keys_check'
        END;
    IF broken IS NOT NULL THEN
        PERFORM row_rule_broken('idempotency_keys', broken);
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_fingerprint_check,
    DROP CONSTRAINT idempotency_keys_recovery_point_check,
    DROP CONSTRAINT idempotency_keys_check;
CREATE TRIGGER idempotency_keys_row_kept BEFORE INSERT
    ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION idempotency_keys_row_kept();
CREATE TRIGGER idempotency_keys_row_kept_update
    AFTER UPDATE OF fingerprint, recovery_point, response_status
    ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION idempotency_keys_row_kept();

-- events: the event types (the list of the CHECK dropped here).
CREATE FUNCTION events_row_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT (NEW.event_type IN ('payment.succeeded', 'payment.declined', 'payment.canceled',
            'payment.authorized', 'payment.voided', 'payment.expired', 'capture.succeeded',
            'capture.failed', 'refund.succeeded', 'refund.failed')) THEN
        PERFORM row_rule_broken('events', 'events_event_type_check');
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE events DROP CONSTRAINT events_event_type_check;
CREATE TRIGGER events_row_kept BEFORE INSERT
    ON events FOR EACH ROW EXECUTE FUNCTION events_row_kept();
CREATE TRIGGER events_row_kept_update AFTER UPDATE OF event_type
    ON events FOR EACH ROW EXECUTE FUNCTION events_row_kept();
