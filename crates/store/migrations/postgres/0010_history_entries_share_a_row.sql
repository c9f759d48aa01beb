-- The entries one write makes share one history row (issue 19), as on SQLite
-- since its migration 0008 wrote them: a finish's three (the acquirer call,
-- the answer, the settlement) are one heap tuple and one index entry, not
-- three. A row of several entries holds the JSON array of their events, and
-- `kind` their kinds, comma-separated; a row of one entry is as before.
--
-- A row's entries read back with `seq` = the row's seq plus their place in it
-- (0 to 15; a write of more than 16 entries takes several rows), so from here
-- on rows are numbered in steps of 16, from the first multiple of 16 above
-- every seq given out so far. The seqs already read stay what they were.
DO $$
DECLARE
    first_free bigint;
BEGIN
    SELECT (coalesce(max(seq), 0) / 16 + 1) * 16 INTO first_free FROM payment_history;
    EXECUTE format(
        'ALTER TABLE payment_history ALTER COLUMN seq SET INCREMENT BY 16 RESTART WITH %s',
        first_free);
END
$$;
