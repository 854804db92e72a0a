-- 0011_outcomes: a destination may await the agent's outcome. A batch whose 2xx came from such
-- a destination rests in `awaiting` (no lease; next_attempt_at is when its outcome is overdue)
-- and still holds its key's FIFO until the outcome arrives; an agent's reported failure is class
-- `agent`, and a failure it reports as permanent is dead with reason `agent_failed`. An outcome
-- names the delivery it settles by its webhook-id, so attempts are found by delivery_id.
-- SQLite cannot change a CHECK in place: batches and journal are rebuilt with the same columns
-- in the same order (the runner turns foreign_keys off around this migration and runs
-- foreign_key_check before it commits), and journal keeps its AUTOINCREMENT high-water mark.
CREATE TABLE batches_new (
  id              INTEGER PRIMARY KEY,
  route           TEXT    NOT NULL,
  source          TEXT    NOT NULL,
  destination     TEXT    NOT NULL,          -- 'quarantine' for a quarantine batch
  key             TEXT    NOT NULL,          -- coalesce key; 'quarantine' for a quarantine batch
  state           TEXT    NOT NULL
                  CHECK (state IN ('open', 'sealed', 'leased', 'retry', 'awaiting', 'delivered', 'dead', 'dropped')),
  first_at        REAL    NOT NULL,          -- facts, never rewritten
  last_at         REAL    NOT NULL,
  quiet_s         REAL    NOT NULL,          -- the window the batch was opened with
  max_s           REAL    NOT NULL,
  max_events      INTEGER NOT NULL CHECK (max_events >= 1),
  max_bytes       INTEGER NOT NULL CHECK (max_bytes >= 1),
  not_before      REAL,                      -- from replay or split
  count           INTEGER NOT NULL DEFAULT 0,
  bytes           INTEGER NOT NULL DEFAULT 0,
  sealed_at       REAL,
  content_hash    TEXT,                      -- sha256:<hex> over events + event_meta, set at seal
  attempts        INTEGER NOT NULL DEFAULT 0, -- counted attempts
  next_attempt_at REAL,                      -- retry: when due; awaiting: when the outcome is overdue
  lease_until     REAL,
  lease_owner     TEXT,                      -- <host>:<pid>:<attempt_id>, fences every mark
  last_error      TEXT,
  last_class      TEXT
                  CHECK (last_class IS NULL OR last_class IN
                         ('transport', 'throttle', 'batch', 'config', 'permanent', 'poison', 'quarantine', 'agent')),
  delivered_at    REAL,
  result          TEXT,
  dead_reason     TEXT
                  CHECK (dead_reason IS NULL OR dead_reason IN ('rejected', 'exhausted', 'poison', 'processor_permanent', 'bad_emit', 'config', 'quarantined', 'agent_failed')),
  CHECK (state <> 'leased' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
  CHECK (state NOT IN ('sealed', 'leased', 'retry', 'awaiting', 'delivered') OR content_hash IS NOT NULL)
);
INSERT INTO batches_new (id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    not_before, count, bytes, sealed_at, content_hash, attempts, next_attempt_at, lease_until, lease_owner, last_error,
    last_class, delivered_at, result, dead_reason)
  SELECT id, route, source, destination, key, state, first_at, last_at, quiet_s, max_s, max_events, max_bytes,
    not_before, count, bytes, sealed_at, content_hash, attempts, next_attempt_at, lease_until, lease_owner, last_error,
    last_class, delivered_at, result, dead_reason
  FROM batches;
DROP TABLE batches;
ALTER TABLE batches_new RENAME TO batches;
CREATE INDEX batches_group       ON batches (route, key, state);
CREATE INDEX batches_due         ON batches (state, next_attempt_at);
CREATE INDEX batches_destination ON batches (destination, state);
CREATE INDEX batches_delivered   ON batches (state, delivered_at);
CREATE INDEX batches_queue ON batches (route, key, first_at, id) WHERE state IN ('open', 'sealed', 'retry', 'leased', 'awaiting');
CREATE UNIQUE INDEX batches_one_open ON batches (route, key) WHERE state = 'open';
CREATE INDEX batches_ready ON batches (destination, first_at, id) WHERE state IN ('sealed', 'retry');
CREATE INDEX batches_dead_reason ON batches (dead_reason) WHERE state = 'dead';
CREATE INDEX batches_awaiting ON batches (next_attempt_at) WHERE state = 'awaiting';

CREATE TABLE journal_new (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          REAL    NOT NULL,
  kind        TEXT    NOT NULL CHECK (kind IN ('event', 'sealed', 'leased', 'awaiting', 'delivered', 'retry', 'dead', 'dropped')),
  batch_id    INTEGER NOT NULL,
  event_id    INTEGER,
  attempt_id  INTEGER,
  source      TEXT    NOT NULL,
  destination TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  detail      TEXT
);
INSERT INTO journal_new (id, at, kind, batch_id, event_id, attempt_id, source, destination, key, detail)
  SELECT id, at, kind, batch_id, event_id, attempt_id, source, destination, key, detail FROM journal;
-- Ids only grow: the new table carries on from the old one's high-water mark, not its last row.
DELETE FROM sqlite_sequence WHERE name = 'journal_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'journal_new', seq FROM sqlite_sequence WHERE name = 'journal';
DROP TABLE journal;
ALTER TABLE journal_new RENAME TO journal;
CREATE INDEX journal_at ON journal (at);

CREATE INDEX attempts_delivery ON attempts (delivery_id) WHERE delivery_id IS NOT NULL;
