-- 0002_pacing: the same columns as SQLite's 0010_pacing (a destination's rate window in its
-- attempts' hits, the receiver's own word for a delivery, the 429 gate on the destination).
ALTER TABLE attempts ADD COLUMN hits INTEGER;
ALTER TABLE attempts ADD COLUMN answer TEXT;
ALTER TABLE attempts ADD COLUMN unconfirmed SMALLINT NOT NULL DEFAULT 0 CHECK (unconfirmed IN (0, 1));
CREATE INDEX attempts_window ON attempts (destination, finished_at) WHERE hits IS NOT NULL;
ALTER TABLE destinations ADD COLUMN throttled_at DOUBLE PRECISION;
ALTER TABLE destinations ADD COLUMN throttle_s DOUBLE PRECISION;
