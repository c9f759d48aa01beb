-- Issue 38: an update of a payment checks the rules of the columns it
-- writes, not all nine.
--
-- Since 0027 one AFTER UPDATE trigger checked every rule of a payment row
-- (`payments_row_kept`) whenever an update's SET named a column of any rule.
-- A PL/pgSQL function sets its expressions up once per transaction, and a
-- settle is a transaction of one statement, so every settle set up the whole
-- nine-rule CASE to check the three rules its columns are in (the status,
-- the finish's columns, `live_reference`), and each of a refund's two
-- updates of its payment did the same for one rule (the refunds within the
-- amount). The trigger is split by columns:
--
-- - `payments_state_kept`, AFTER UPDATE OF the columns of those three rules
--   (status, the finish's five, `live_reference` and what it is computed
--   from: reference, hold, captured_minor): a function of those three rules;
-- - `payments_refunds_kept`, AFTER UPDATE OF refunded_minor and
--   refund_reserved_minor: a function of the refunds' rule;
-- - `payments_row_kept_update`, AFTER UPDATE OF the columns of the other
--   rules (id, amount_minor, currency, metadata, acquirer_key): the whole
--   function, as before.
--
-- Every rule is still checked by every update that names any of its
-- columns: each of the first two functions' rules by its trigger, whose
-- column list holds all of their columns, and every rule by the third
-- (amount_minor, the refunds' rule's third column, is in its list). The
-- rules keep the order of the whole function's CASE, so the rule named is
-- the first one broken, as before, when one trigger fires; when several
-- do, `payments_refunds_kept` fires first, then `payments_row_kept_update`
-- (PostgreSQL fires a table's triggers of one kind by name). The hold's rule
-- keeps its own trigger (0015).

CREATE FUNCTION payments_refunds_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (0 <= NEW.refunded_minor AND NEW.refunded_minor <= NEW.refund_reserved_minor
            AND NEW.refund_reserved_minor <= NEW.amount_minor) IS FALSE THEN
        PERFORM row_rule_broken('payments', 'payments_refunds_within_amount');
    END IF;
    RETURN NEW;
END
$$;

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
    AFTER UPDATE OF id, amount_minor, currency, metadata, acquirer_key
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_row_kept();
CREATE TRIGGER payments_refunds_kept
    AFTER UPDATE OF refunded_minor, refund_reserved_minor
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_refunds_kept();
CREATE TRIGGER payments_state_kept
    AFTER UPDATE OF reference, status, hold, captured_minor, live_reference, finish_seq,
        finish_at, finish_outcome, finish_latency_ms, finish_answer
    ON payments FOR EACH ROW EXECUTE FUNCTION payments_state_kept();
