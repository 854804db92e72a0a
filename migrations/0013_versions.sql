-- 0013_versions: stale events by the provider's own clock. events.version is an event's
-- version (its source's `version` selector, a number: epoch seconds for an RFC 3339 time),
-- NULL when it has none; a batch orders its events by it. When a batch is first leased, its
-- (route, key)'s last delivered version is fixed on it: stale_floor (NULL: none delivered yet)
-- and floor_at (when; NULL until the first lease), so every attempt judges its events alike.
-- delivered_versions holds each (route, key)'s highest delivered version, written by the
-- delivered mark in the outcome's transaction; batch_id is the batch that set it (no foreign key:
-- the row outlives the batch), at when. Rows are kept as long as delivered batches.
ALTER TABLE events ADD COLUMN version REAL;
ALTER TABLE batches ADD COLUMN stale_floor REAL;
ALTER TABLE batches ADD COLUMN floor_at REAL;
CREATE TABLE delivered_versions (
  route    TEXT    NOT NULL,
  key      TEXT    NOT NULL,
  version  REAL    NOT NULL,
  batch_id INTEGER NOT NULL,
  at       REAL    NOT NULL,
  PRIMARY KEY (route, key)
);
CREATE INDEX delivered_versions_at ON delivered_versions (at);
