-- Issue 38: a payment's acquirer key is no longer stored, nor indexed.
--
-- It has always been derived from the payment's id, `chargeonce-` and the id
-- (chargeonce_core::AcquirerKey::for_payment, from the first migration on),
-- so the column repeated the id (47 bytes in the row, written again by the
-- settling update), and its unique index (acquirer_key, shop_id) said no
-- more than the primary key (id, shop_id). A payment is found by its key
-- through the id the key names (AcquirerKey::payment_id), by the primary
-- key. New rows leave the column NULL and the store derives the key; rows
-- written before keep their copy, which the check below holds to the
-- derivation (it is validated against them here), so either way the key read
-- is the key derived. (SQLite keeps its column: it is one file's index.)
ALTER TABLE payments DROP CONSTRAINT payments_acquirer_key_key;
ALTER TABLE payments ALTER COLUMN acquirer_key DROP NOT NULL;
ALTER TABLE payments ADD CONSTRAINT payments_acquirer_key_derived
    CHECK (acquirer_key IS NULL OR acquirer_key = 'chargeonce-' || id);
