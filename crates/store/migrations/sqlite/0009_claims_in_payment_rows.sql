-- A payment's first history entry is read from its own row (issue 17's cost on
-- the hot path): the claim that creates a payment writes `claimed_by`, the
-- instance that claimed it, and no history row; the entry (`claimed`, its key,
-- that instance, at `created_at`) is read from these columns before the
-- payment's history rows. One row and one index entry fewer per fresh payment.
-- NULL on payments claimed before this migration, whose `claimed` entry is a
-- history row.
ALTER TABLE payments ADD COLUMN claimed_by TEXT;

-- The history rows hold the entries of one write (a JSON array; see
-- crates/store/src/sqlite/history.rs), `kind` their tags, comma-separated.
