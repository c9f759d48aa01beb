-- The hold's rule (migration 0013) as triggers instead of a CHECK, so that a
-- payment charged at once pays nothing for it (issue 34's "automatic-capture
-- payments keep their bench figures").
--
-- PostgreSQL prepares every CHECK of a table for each statement that writes
-- one of its rows, and evaluates it for every row written: the hot path's
-- claim (an INSERT) and settle (an UPDATE of `status`) paid for the hold's
-- CHECK though neither writes a hold. Measured with pgbench of
-- bench/fresh_payment.sql (-M prepared -c 16 -j 2 -T 8, six rounds, each
-- variant on its own database, the order rotated): the schema with the CHECK
-- ran 0.94 of the schema before issue 34, the same schema without it 0.98,
-- with these triggers 0.98.
--
-- The triggers are AFTER ROW triggers, so they see the row as stored, and fire
-- at the end of the statement that wrote it: a row that breaks the rule fails
-- its statement with the CHECK's SQLSTATE (23514) and name, as before.
-- - An INSERT is checked when it names a hold, a manual method or an expiry.
--   A payment charged at once is inserted with none of them, and no statement
--   inserts the hold's amounts (captured, reserved, in flight): they start at
--   their defaults, 0, which the rule asks of a row without a hold.
-- - An UPDATE is checked when its SET names a column of the rule
--   (`UPDATE OF`: PostgreSQL looks at the statement's target list, not the
--   values). The settle of a payment names none of them; a capture, a void,
--   an expiry or a refund's reservation does.
CREATE FUNCTION payments_hold_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    kept BOOLEAN;
BEGIN
    kept := CASE WHEN NEW.hold IS NULL
        THEN NEW.capture_method = 'automatic' AND NEW.authorization_expires_at IS NULL
            AND NEW.captured_minor = 0 AND NEW.capture_reserved_minor = 0
            AND NEW.captures_in_flight = 0
        ELSE payments_hold_valid(NEW.capture_method, NEW.hold, NEW.authorization_expires_at,
            NEW.amount_minor, NEW.captured_minor, NEW.capture_reserved_minor,
            NEW.captures_in_flight, NEW.refund_reserved_minor)
    END;
    IF kept IS NOT TRUE THEN
        RAISE EXCEPTION 'new row for relation "payments" violates check constraint "payments_hold_check"'
            USING ERRCODE = 'check_violation', CONSTRAINT = 'payments_hold_check',
                TABLE = 'payments';
    END IF;
    RETURN NULL;
END
$$;

ALTER TABLE payments DROP CONSTRAINT payments_hold_check;

CREATE TRIGGER payments_hold_check_insert AFTER INSERT ON payments FOR EACH ROW
    WHEN (NEW.hold IS NOT NULL OR NEW.capture_method <> 'automatic'
        OR NEW.authorization_expires_at IS NOT NULL)
    EXECUTE FUNCTION payments_hold_kept();

CREATE TRIGGER payments_hold_check_update AFTER UPDATE OF capture_method, hold,
        authorization_expires_at, amount_minor, captured_minor, capture_reserved_minor,
        captures_in_flight, refund_reserved_minor
    ON payments FOR EACH ROW
    EXECUTE FUNCTION payments_hold_kept();
