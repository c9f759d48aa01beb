-- Issue 38: the row rules of refunds and captures are checked by one trigger
-- function per table instead of CHECK constraints, as migration 0027 did for
-- payments, keys and events (its header says why: PostgreSQL 15 reads back,
-- plans and compiles every CHECK of a table for each statement that writes a
-- row of it, and keeps none of it; a PL/pgSQL function is compiled once per
-- connection). A refund's claim inserts its row and its finish updates it, so
-- each refund prepared its table's five CHECKs twice, each capture its six;
-- under bench/pginstructions, ExecConstraints was 11 % of the instructions of
-- a backend serving payments and their refunds. The rules are the same, word
-- for word, and a row that breaks one fails its statement as before: SQLSTATE
-- 23514 (check_violation), the constraint's name, PostgreSQL's own message
-- (`row_rule_broken`, migration 0027). An INSERT is checked by a BEFORE ROW
-- trigger (the only one of its table), an UPDATE that names a column of a
-- rule by an AFTER ROW trigger (a BEFORE UPDATE row trigger would lock the row
-- first: 0027). Rows written before were checked by the constraints dropped
-- here.
--
-- And a capture no longer locks its shop's row: `captures_shop_id_fkey` came
-- with captures (0013), after migration 0008 had dropped every other such key
-- for the same reason (each check locks the shop's one row FOR KEY SHARE, a
-- WAL record and, shared between a shop's concurrent writes, a MultiXact). A
-- capture's shop is its payment's (`captures_payment_id_fkey` on
-- (payment_id, shop_id) stays), and a shop row is never deleted nor its id
-- changed (0008's triggers refuse both).
--
-- And a refund's merchant event no longer checks its refund by a foreign key,
-- as a payment's event stopped checking its payment in migration 0023, for
-- the same reason: every refund event is inserted by the statement that moved
-- its refund, from the refund row that statement just updated (and locked:
-- `settle_refund_statement!`), and no refund is ever deleted, so the
-- reference cannot dangle. The check cost each refund an SPI query and a row
-- lock logged on the refund (a WAL record of 54 bytes).

CREATE FUNCTION refunds_row_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    -- The first rule the row breaks, if any (see payments_row_kept, 0027).
    broken := CASE
        WHEN (NEW.amount_minor > 0) IS FALSE THEN 'refunds_amount_minor_check'
        WHEN (length(NEW.currency) = 3) IS FALSE THEN 'refunds_currency_check'
        WHEN (NEW.status IN ('pending', 'succeeded', 'failed')) IS FALSE
            THEN 'refunds_status_check'
        WHEN ((NEW.claimed_by IS NULL) = (NEW.reserve_seq IS NULL)) IS FALSE
            THEN 'refunds_reserve_whole'
        WHEN ((NEW.finish_seq IS NULL) = (NEW.finish_at IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_outcome IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_latency_ms IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_answer IS NULL)
              AND (NEW.finish_seq IS NULL
                   OR (NEW.status <> 'pending' AND NEW.claimed_by IS NOT NULL))) IS FALSE
            THEN 'refunds_finish_whole'
        END;
    IF broken IS NOT NULL THEN
        PERFORM row_rule_broken('refunds', broken);
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE refunds
    DROP CONSTRAINT refunds_amount_minor_check,
    DROP CONSTRAINT refunds_currency_check,
    DROP CONSTRAINT refunds_status_check,
    DROP CONSTRAINT refunds_reserve_whole,
    DROP CONSTRAINT refunds_finish_whole;
CREATE TRIGGER refunds_row_kept BEFORE INSERT
    ON refunds FOR EACH ROW EXECUTE FUNCTION refunds_row_kept();
CREATE TRIGGER refunds_row_kept_update
    AFTER UPDATE OF amount_minor, currency, status, claimed_by, reserve_seq, finish_seq,
        finish_at, finish_outcome, finish_latency_ms, finish_answer
    ON refunds FOR EACH ROW EXECUTE FUNCTION refunds_row_kept();

CREATE FUNCTION captures_row_kept() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken TEXT;
BEGIN
    -- The first rule the row breaks, if any (see payments_row_kept, 0027).
    broken := CASE
        WHEN (NEW.amount_minor > 0) IS FALSE THEN 'captures_amount_minor_check'
        WHEN (length(NEW.currency) = 3) IS FALSE THEN 'captures_currency_check'
        WHEN (NEW.status IN ('pending', 'succeeded', 'failed')) IS FALSE
            THEN 'captures_status_check'
        WHEN ((NEW.status = 'failed') = (NEW.failure_code IS NOT NULL)) IS FALSE
            THEN 'captures_check'
        WHEN ((NEW.claimed_by IS NULL) = (NEW.reserve_seq IS NULL)) IS FALSE
            THEN 'captures_reserve_whole'
        WHEN ((NEW.finish_seq IS NULL) = (NEW.finish_at IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_outcome IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_latency_ms IS NULL)
              AND (NEW.finish_seq IS NULL) = (NEW.finish_answer IS NULL)
              AND (NEW.finish_seq IS NULL
                   OR (NEW.status <> 'pending' AND NEW.claimed_by IS NOT NULL))) IS FALSE
            THEN 'captures_finish_whole'
        END;
    IF broken IS NOT NULL THEN
        PERFORM row_rule_broken('captures', broken);
    END IF;
    RETURN NEW;
END
$$;

ALTER TABLE captures
    DROP CONSTRAINT captures_amount_minor_check,
    DROP CONSTRAINT captures_currency_check,
    DROP CONSTRAINT captures_status_check,
    DROP CONSTRAINT captures_check,
    DROP CONSTRAINT captures_reserve_whole,
    DROP CONSTRAINT captures_finish_whole,
    DROP CONSTRAINT captures_shop_id_fkey;
CREATE TRIGGER captures_row_kept BEFORE INSERT
    ON captures FOR EACH ROW EXECUTE FUNCTION captures_row_kept();
CREATE TRIGGER captures_row_kept_update
    AFTER UPDATE OF amount_minor, currency, status, failure_code, claimed_by, reserve_seq,
        finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer
    ON captures FOR EACH ROW EXECUTE FUNCTION captures_row_kept();

ALTER TABLE events DROP CONSTRAINT events_refund_id_fkey;
