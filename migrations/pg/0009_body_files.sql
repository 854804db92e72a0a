-- 0009_body_files: the same as SQLite's 0014_body_files. A body above [spool] inline_max_bytes
-- lives in a content-addressed file under <home>/bodies/ (the intakes and dispatchers on one
-- database share that home), named by its SHA-256 in body_file; NULL: inline.
ALTER TABLE events ADD COLUMN body_file TEXT;
CREATE INDEX events_body_file ON events (body_file) WHERE body_file IS NOT NULL;
