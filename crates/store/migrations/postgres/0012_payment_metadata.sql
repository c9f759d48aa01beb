-- Metadata (issue 34): the shop's own pairs on a payment (its order id,
-- customer id, ...), as the request gave them: a JSON object of strings,
-- NULL when the request sent none (the common case stores nothing). The
-- service checks the limits (50 pairs, keys of 1 to 40 characters, values
-- of at most 500) before anything is written; the check here keeps the
-- column an object whatever writes it. Adding a nullable column without a
-- default rewrites nothing.

ALTER TABLE payments ADD COLUMN metadata text
    CHECK (metadata IS NULL OR left(metadata, 1) = '{');
