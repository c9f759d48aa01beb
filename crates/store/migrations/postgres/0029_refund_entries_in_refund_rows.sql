-- Issue 38: a refund's usual entries are read from its own row, as a
-- payment's are (migrations 0007 and 0024).
--
-- A refund's claim wrote a history row for its `refund_reserved` entry, and
-- its usual finish (the claimant refunded once with the refund's acquirer key
-- and ended the refund by the answer: chargeonce_core::history::
-- RefundClaimantFinish) a second one for its three entries: about 390 bytes
-- of WAL each with their index entries, most of them the refund's key,
-- amount, currency, acquirer key and instance again. Now the claim sets
--   claimed_by         the instance that claimed the refund (the entry's
--                      `instance`; its key, amount and currency are the
--                      row's own),
--   reserve_seq        the seq the reservation's history row would have had,
--                      drawn from its identity so the entry sorts among the
--                      rows as that row would have,
-- and the usual finish, in the same update that ends the refund (none of
-- them is indexed), the payments' five finish columns of migration 0024:
--   finish_seq, finish_at, finish_outcome, finish_latency_ms, finish_answer.
-- The refund's end is its `status`: an ended refund's status never changes.
-- Any other finish still writes a history row, and so do the refunds claimed
-- before this migration. Nullable, no default: no table rewrite.
ALTER TABLE refunds
    ADD COLUMN claimed_by TEXT,
    ADD COLUMN reserve_seq BIGINT,
    ADD COLUMN finish_seq BIGINT,
    ADD COLUMN finish_at TIMESTAMPTZ,
    ADD COLUMN finish_outcome TEXT,
    ADD COLUMN finish_latency_ms BIGINT,
    ADD COLUMN finish_answer SMALLINT,
    ADD CONSTRAINT refunds_reserve_whole CHECK ((claimed_by IS NULL) = (reserve_seq IS NULL)),
    ADD CONSTRAINT refunds_finish_whole CHECK (
        (finish_seq IS NULL) = (finish_at IS NULL)
        AND (finish_seq IS NULL) = (finish_outcome IS NULL)
        AND (finish_seq IS NULL) = (finish_latency_ms IS NULL)
        AND (finish_seq IS NULL) = (finish_answer IS NULL)
        AND (finish_seq IS NULL OR (status <> 'pending' AND claimed_by IS NOT NULL)));
