-- 0001_v2: the whole v2 schema (spec 3). Timestamps are Unix seconds as REAL, sizes are bytes.

-- Small facts: schema_version, instance_id, dispatcher heartbeat, last_tick_at (the clock
-- guard of spec 2), last_enqueue_at, source:<name>:last_event_at.
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT
);

-- One unit of delivery to one destination (spec 4.1).
CREATE TABLE batches (
  id              INTEGER PRIMARY KEY,
  route           TEXT    NOT NULL,
  source          TEXT    NOT NULL,
  destination     TEXT    NOT NULL,          -- 'quarantine' for a quarantine batch
  key             TEXT    NOT NULL,          -- coalesce key; 'quarantine' for a quarantine batch
  state           TEXT    NOT NULL
                  CHECK (state IN ('open', 'sealed', 'leased', 'retry', 'delivered', 'dead', 'dropped')),
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
  attempts        INTEGER NOT NULL DEFAULT 0, -- counted attempts (spec 6.5)
  next_attempt_at REAL,
  lease_until     REAL,
  lease_owner     TEXT,                      -- <host>:<pid>:<attempt_id>, fences every mark (spec 6.2)
  last_error      TEXT,
  last_class      TEXT
                  CHECK (last_class IS NULL OR last_class IN
                         ('transport', 'throttle', 'batch', 'config', 'permanent', 'poison', 'quarantine')),
  delivered_at    REAL,
  result          TEXT,
  CHECK (state <> 'leased' OR (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
  CHECK (state NOT IN ('sealed', 'leased', 'retry', 'delivered') OR content_hash IS NOT NULL)
);
CREATE INDEX batches_group       ON batches (route, key, state);
CREATE INDEX batches_due         ON batches (state, next_attempt_at);
CREATE INDEX batches_destination ON batches (destination, state);
CREATE INDEX batches_delivered   ON batches (state, delivered_at);
-- The delivery queue: unfinished batches per group in FIFO order (the candidate query, spec 6.1).
CREATE INDEX batches_queue ON batches (route, key, first_at, id) WHERE state IN ('open', 'sealed', 'retry', 'leased');
-- The join rule relies on at most one open batch per (route, key) (spec 4.1); the schema holds it.
CREATE UNIQUE INDEX batches_one_open ON batches (route, key) WHERE state = 'open';

-- One row per accepted webhook (and per tee copy). Immutable after insert except
-- excluded_at (operator) and batch_id (an operator's split moves events to the new batches).
CREATE TABLE events (
  id          INTEGER PRIMARY KEY,
  source      TEXT    NOT NULL,
  route       TEXT    NOT NULL,
  batch_id    INTEGER NOT NULL REFERENCES batches (id),
  event_type  TEXT    NOT NULL DEFAULT '',
  dedup_id    TEXT,
  received_at REAL    NOT NULL,
  payload     TEXT,                          -- NULL for a quarantined event
  raw         BLOB,                          -- NULL when store_raw = false; kept for quarantine
  headers     TEXT    NOT NULL DEFAULT '{}', -- keep_headers only; quarantine: all minus auth_headers
  size        INTEGER NOT NULL,
  excluded_at REAL
);
CREATE INDEX events_batch  ON events (batch_id, id);
CREATE INDEX events_source ON events (source, received_at);

-- Dedup window per source (spec 7). No foreign key: the window may outlive the event.
CREATE TABLE dedup (
  source    TEXT    NOT NULL,
  dedup_id  TEXT    NOT NULL,
  event_id  INTEGER NOT NULL,
  seen_at   REAL    NOT NULL,
  dup_count INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (source, dedup_id)
);
CREATE INDEX dedup_seen ON dedup (source, seen_at);

-- One row per try, written before the request and completed after (spec 6.2). No foreign
-- key: attempts are kept 30 days, their delivered batches 7 (spec 8).
CREATE TABLE attempts (
  id          INTEGER PRIMARY KEY,
  batch_id    INTEGER NOT NULL,
  n           INTEGER NOT NULL,
  destination TEXT    NOT NULL,
  started_at  REAL    NOT NULL,
  finished_at REAL,
  outcome     TEXT CHECK (outcome IS NULL OR outcome IN ('ok', 'retry', 'dead', 'discarded')),
  klass       TEXT,
  status      INTEGER,
  error       TEXT,
  duration_ms INTEGER,
  probe       INTEGER NOT NULL DEFAULT 0 CHECK (probe IN (0, 1)),
  counted     INTEGER NOT NULL DEFAULT 0 CHECK (counted IN (0, 1)),
  delivery_id TEXT
);
CREATE INDEX attempts_batch   ON attempts (batch_id, id);
CREATE INDEX attempts_started ON attempts (started_at);
CREATE INDEX attempts_destination ON attempts (destination, started_at);

-- Runtime state per destination: circuit breaker and operator pause (spec 4.2).
CREATE TABLE destinations (
  name                 TEXT    PRIMARY KEY,
  state                TEXT    NOT NULL DEFAULT 'closed'
                       CHECK (state IN ('closed', 'open', 'half_open', 'paused')),
  consecutive_failures INTEGER NOT NULL DEFAULT 0,
  opened_at            REAL,
  cooldown_s           REAL,
  probe_until          REAL,
  last_probe_batch_id  INTEGER,
  paused_at            REAL,
  paused_by            TEXT,
  last_ok_at           REAL,
  last_error           TEXT,
  retry_after_until    REAL
);

-- Grouped failures (spec 11.4).
CREATE TABLE issues (
  id              INTEGER PRIMARY KEY,
  fingerprint     TEXT    NOT NULL UNIQUE,
  kind            TEXT    NOT NULL CHECK (kind IN ('delivery', 'source_silent', 'spool', 'config')),
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
CREATE INDEX issues_state ON issues (state, last_at);

-- The persisted rate limit for outbound alerts (spec 11.4).
CREATE TABLE alerts (
  kind       TEXT    PRIMARY KEY,
  last_at    REAL    NOT NULL,
  suppressed INTEGER NOT NULL DEFAULT 0
);
