-- Issue 38: the entries of a payment's usual finish are read from its own
-- row, as its `claimed` entry is (migration 0007).
--
-- When the request that claimed a payment (its key, on the instance in
-- `claimed_by`) charged once with the payment's acquirer key and settled it
-- (chargeonce_core::history::ClaimantFinish), its three entries (the charge,
-- the answer, the settlement) were a history row of about 360 bytes of JSON
-- and an index entry, most of it the payment's id, key and instance again.
-- Now the finish that settles the payment sets these columns instead, in the
-- same update of the row (heap-only: none is indexed), and the entries are
-- rebuilt from them and the row (`postgres::history`):
--   finish_seq         the seq the history row would have had: drawn from
--                      its identity, so the entries sort among the rows
--                      exactly as that row would have;
--   finish_at          when (the row's `at`; `updated_at` moves on later);
--   finish_outcome     how the charge ended (AcquirerOutcomeKind::as_str);
--   finish_latency_ms  how long it took;
--   finish_answer      the HTTP status of the answer stored.
-- The settlement's status is the payment's `status`: a settled payment's
-- status never changes again. Any other finish still writes history rows, and
-- so do all payments settled before this migration. Nullable, no default: no
-- table rewrite.
ALTER TABLE payments
    ADD COLUMN finish_seq BIGINT,
    ADD COLUMN finish_at TIMESTAMPTZ,
    ADD COLUMN finish_outcome TEXT,
    ADD COLUMN finish_latency_ms BIGINT,
    ADD COLUMN finish_answer SMALLINT,
    ADD CONSTRAINT payments_finish_whole CHECK (
        (finish_seq IS NULL) = (finish_at IS NULL)
        AND (finish_seq IS NULL) = (finish_outcome IS NULL)
        AND (finish_seq IS NULL) = (finish_latency_ms IS NULL)
        AND (finish_seq IS NULL) = (finish_answer IS NULL)
        AND (finish_seq IS NULL OR status <> 'pending'));
