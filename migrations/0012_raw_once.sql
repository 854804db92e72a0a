-- 0012_raw_once: a raw body that is its payload byte for byte (a JSON webhook, kept as it came)
-- is stored once. raw_is_payload = 1 says so: raw is NULL and the raw body is the payload's
-- UTF-8 bytes. Rows written before keep their raw column (0).
ALTER TABLE events ADD COLUMN raw_is_payload INTEGER NOT NULL DEFAULT 0 CHECK (raw_is_payload IN (0, 1));
