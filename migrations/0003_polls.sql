-- 0003_polls: the dispatcher's durable clock for poll sources (spec 14.4).
CREATE TABLE polls (
  instance          TEXT    PRIMARY KEY,
  next_at           REAL    NOT NULL,
  last_tick_at      REAL,                -- the scheduled time of the last enqueued tick
  last_batch_id     INTEGER,             -- the batch that tick joined
  delivered_at      REAL,
  delivered_tick_at REAL,
  skipped           INTEGER NOT NULL DEFAULT 0,
  created_at        REAL    NOT NULL
);
