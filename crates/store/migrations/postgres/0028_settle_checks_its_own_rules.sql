-- Issue 38: a payment's settle checks the rules of the columns it writes,
-- not all nine.
--
-- Since 0027 one AFTER UPDATE trigger checked every rule of a payment row
-- (`payments_row_kept`) whenever an update's SET named a column of any rule.
-- A PL/pgSQL function sets its expressions up once per transaction, and a
-- settle is a transaction of one statement, so every settle set up the whole
-- nine-rule CASE to check the three rules its columns are in (the status,
-- the finish's columns, `live_reference`). The trigger is split by columns:
--
-- - `payments_state_kept`, AFTER UPDATE OF the columns of those three rules
--   (status, the finish's five, `live_reference` and what it is computed
--   from: reference, hold, captured_minor): a function of those three rules
--   only;
-- - `payments_row_kept_update`, AFTER UPDATE OF the columns of the other
--   rules (id, amount_minor, currency, refunded_minor, refund_reserved_minor,
--   metadata, acquirer_key): the whole function, as before.
--
-- Every rule is still checked by an update that names any of its columns:
-- each of the three is checked by the first trigger, whose column list holds
-- all of their columns, and the second checks every rule (the order of the
-- CASE is the same in both functions, so the rule named is the first one
-- broken, as before; when both fire, `payments_row_kept_update` fires first,
-- by name). The hold's rule keeps its own trigger (0015).

CREATE FUNCTION payments_state_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    -- The first of these rules the row breaks, if any (see payments_row_kept,
    -- whose CASE holds the same three, in the same order, among the others).
    broken := CASE
        WHEN (NEW.status IN ('pending', 'succeeded', 'declined', 'canceled')) IS FALSE
            THEN 'payments_status_check'
        WHEN ((NEW.finish_seq IS NULL) = (NEW.finish_at IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_outcome IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_latency_ms IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_answer IS NULL)
              AND (NEW.finish_seq IS NULL OR NEW.status <> 'pending')) IS FALSE
            THEN 'payments_finish_whole'
        WHEN NEW.live_reference IS DISTINCT FROM payment_live_reference(NEW.status, NEW.hold,
                NEW.captured_minor, NEW.reference)
            THEN 'payments_live_reference'
        END;
    IF broken IS NOT NULL THEN
        PERFORM row_rule_broken('payments', broken);
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER payments_row_kept_update ON payments;
CREATE TRIGGER payments_row_kept_update
    AFTER UPDATE OF id, amount_minor, currency, refunded_minor, refund_reserved_minor,
        metadata, acquirer_key
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_row_kept();
CREATE TRIGGER payments_state_kept
    AFTER UPDATE OF reference, status, hold, captured_minor, live_reference, finish_seq,
        finish_at, finish_outcome, finish_latency_ms, finish_answer
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_state_kept();
