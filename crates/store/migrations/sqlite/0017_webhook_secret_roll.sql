-- Issue 35: a shop's webhook signing secret is rolled with an overlap, as
-- PostgreSQL's migration 0019 (times in unix milliseconds).
ALTER TABLE shops ADD COLUMN webhook_previous_secret TEXT;
ALTER TABLE shops ADD COLUMN webhook_previous_secret_until INTEGER;
