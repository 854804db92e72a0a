-- 0008_versions: the same as SQLite's 0013_versions. events.version is an event's version by
-- its provider's clock (NULL: none); batches.stale_floor and floor_at fix, at a batch's first
-- lease, the last version its (route, key) delivered; delivered_versions holds each (route,
-- key)'s highest delivered version, written by the delivered mark in the outcome's transaction.
ALTER TABLE events ADD COLUMN version DOUBLE PRECISION;
ALTER TABLE batches ADD COLUMN stale_floor DOUBLE PRECISION;
ALTER TABLE batches ADD COLUMN floor_at DOUBLE PRECISION;
CREATE TABLE delivered_versions (
  route    TEXT    NOT NULL,
  key      TEXT    NOT NULL,
  version  DOUBLE PRECISION NOT NULL,
  batch_id BIGINT  NOT NULL,
  at       DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (route, key)
);
CREATE INDEX delivered_versions_at ON delivered_versions (at);
