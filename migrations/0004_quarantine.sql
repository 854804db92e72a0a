-- 0004_quarantine: a quarantined request keeps its path and query string (with secret-bearing
-- parameters removed), so a replay classifies it again exactly as the intake would have; and
-- issues gain two kinds: source (a sender sent what cannot be queued: not JSON, no key) and
-- internal (a fault in hookspool itself).
ALTER TABLE events ADD COLUMN url TEXT;

-- SQLite cannot change a CHECK constraint in place: the issues table is rebuilt. Nothing
-- references it by foreign key, so foreign_keys may stay on.
CREATE TABLE issues_v4 (
  id              INTEGER PRIMARY KEY,
  fingerprint     TEXT    NOT NULL UNIQUE,
  kind            TEXT    NOT NULL CHECK (kind IN ('delivery', 'source_silent', 'spool', 'config', 'source', 'internal')),
  destination     TEXT,
  route           TEXT,
  state           TEXT    NOT NULL CHECK (state IN ('open', 'acked', 'resolved', 'ignored')),
  first_at        REAL    NOT NULL,
  last_at         REAL    NOT NULL,
  count           INTEGER NOT NULL DEFAULT 1,
  sample_batch_id INTEGER,
  last_error      TEXT,
  alerted_at      REAL
);
INSERT INTO issues_v4 (id, fingerprint, kind, destination, route, state, first_at, last_at, count, sample_batch_id, last_error, alerted_at)
  SELECT id, fingerprint, kind, destination, route, state, first_at, last_at, count, sample_batch_id, last_error, alerted_at FROM issues;
DROP TABLE issues;
ALTER TABLE issues_v4 RENAME TO issues;
CREATE INDEX issues_state ON issues (state, last_at);
