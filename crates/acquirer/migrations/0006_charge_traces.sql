-- Traces (issue 37): the W3C trace id of the request that recorded a
-- charge (its `traceparent`), so a caller's trace and the acquirer's charge
-- can be joined. NULL for a charge recorded without one.
ALTER TABLE acquirer_ledger ADD COLUMN trace_id TEXT
    CHECK (trace_id IS NULL OR (length(trace_id) = 32 AND trace_id NOT GLOB '*[^0-9a-f]*'));
