-- A payment's first history entry is read from its own row (issue 17's cost on
-- the hot path): the claim that creates a payment writes `claimed_by`, the
-- instance that claimed it, and no history row; the entry (`claimed`, its key,
-- that instance, at `created_at`) is read from these columns before the
-- payment's history rows. One heap tuple, one index entry and their WAL fewer
-- per fresh payment. NULL on payments claimed before this migration, whose
-- `claimed` entry is a history row. (A nullable column without a default: no
-- table rewrite.)
ALTER TABLE payments ADD COLUMN claimed_by TEXT;
