-- 0014_body_files: a body above [spool] inline_max_bytes lives in a content-addressed file under
-- <home>/bodies/, named by its SHA-256; body_file names it and the row's payload holds a small
-- reference in its place (the size column still counts the body's real size). NULL: inline.
ALTER TABLE events ADD COLUMN body_file TEXT;
CREATE INDEX events_body_file ON events (body_file) WHERE body_file IS NOT NULL;
