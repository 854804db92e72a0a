-- 0008_journal: what `hookspool watch` follows. One row per change, written in the transaction
-- that makes it: an event queued (one per copy), a batch sealed, leased, delivered, retried,
-- dead or dropped. Ids only grow (AUTOINCREMENT never reuses one, not even after retention
-- deletes the oldest), so an id is a cursor a consumer can resume after. Holds no payload: the
-- key, the event type, the class of a failure and the status code at most.
CREATE TABLE journal (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          REAL    NOT NULL,
  kind        TEXT    NOT NULL CHECK (kind IN ('event', 'sealed', 'leased', 'delivered', 'retry', 'dead', 'dropped')),
  batch_id    INTEGER NOT NULL,
  event_id    INTEGER,
  attempt_id  INTEGER,
  source      TEXT    NOT NULL,
  destination TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  detail      TEXT
);
CREATE INDEX journal_at ON journal (at);
