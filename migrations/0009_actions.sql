-- 0009_actions: what an operator did from the dashboard (replay, retry, pause, resume, an
-- issue's ack, resolve or ignore), written in the same transaction as the change, so the page's
-- record of who changed what is never ahead of or behind the spool. Holds names and ids only.
CREATE TABLE actions (
  id     INTEGER PRIMARY KEY,
  at     REAL    NOT NULL,
  via    TEXT    NOT NULL CHECK (via IN ('dashboard', 'cli')),
  verb   TEXT    NOT NULL,
  target TEXT    NOT NULL
);
CREATE INDEX actions_at ON actions (at);
