-- Issue 38: a capture's usual entries are read from its own row, as a
-- refund's are since migration 0029 (see it for the columns).
--
-- The claim sets `claimed_by` (the instance; the `capture_reserved` entry's
-- key, amount, currency and finality are the row's own) and `reserve_seq`;
-- the usual finish (the claimant captured once with the capture's acquirer
-- key and ended the capture by the answer) sets the five finish columns in
-- the update that ends the capture, none of them indexed. Any other finish
-- still writes a history row, and so do the captures claimed before this
-- migration. Nullable, no default: no table rewrite.
ALTER TABLE captures
    ADD COLUMN claimed_by TEXT,
    ADD COLUMN reserve_seq BIGINT,
    ADD COLUMN finish_seq BIGINT,
    ADD COLUMN finish_at TIMESTAMPTZ,
    ADD COLUMN finish_outcome TEXT,
    ADD COLUMN finish_latency_ms BIGINT,
    ADD COLUMN finish_answer SMALLINT,
    ADD CONSTRAINT captures_reserve_whole CHECK ((claimed_by IS NULL) = (reserve_seq IS NULL)),
    ADD CONSTRAINT captures_finish_whole CHECK (
        (finish_seq IS NULL) = (finish_at IS NULL)
        AND (finish_seq IS NULL) = (finish_outcome IS NULL)
        AND (finish_seq IS NULL) = (finish_latency_ms IS NULL)
        AND (finish_seq IS NULL) = (finish_answer IS NULL)
        AND (finish_seq IS NULL OR (status <> 'pending' AND claimed_by IS NOT NULL)));
