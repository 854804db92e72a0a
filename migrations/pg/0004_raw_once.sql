-- 0004_raw_once: the same as SQLite's 0012_raw_once. A raw body that is its payload byte for
-- byte is stored once: raw_is_payload = 1, raw NULL, the raw body the payload's UTF-8 bytes.
ALTER TABLE events ADD COLUMN raw_is_payload SMALLINT NOT NULL DEFAULT 0 CHECK (raw_is_payload IN (0, 1));
