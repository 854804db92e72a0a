-- 0010_pacing: what paces a destination and what its receiver said.
-- attempts.hits: the requests an attempt made that count against its destination's rate (a
-- destination with `rate` only; NULL otherwise): reserved at the claim, set to what was sent at
-- the end (a request answered 429 is not counted, as the receiver did not count it). A
-- destination's window is the hits of its attempts still in flight or finished within the last
-- window, so the window lives in the spool: it holds across restarts and across dispatchers.
-- attempts.answer: the receiver's own word for a delivered attempt (Hermes: accepted, coalesced,
-- delivered, duplicate, ignored), apart from the HTTP status; attempts.unconfirmed: a duplicate
-- that proves only that the gateway saw the id before, not that it ran anything.
-- destinations.throttled_at / throttle_s: a 429 without Retry-After gates the destination for
-- throttle_s, then one delivery goes as a probe; an attempt started after throttled_at that is
-- not throttled again lifts the gate.
ALTER TABLE attempts ADD COLUMN hits INTEGER;
ALTER TABLE attempts ADD COLUMN answer TEXT;
ALTER TABLE attempts ADD COLUMN unconfirmed INTEGER NOT NULL DEFAULT 0 CHECK (unconfirmed IN (0, 1));
CREATE INDEX attempts_window ON attempts (destination, finished_at) WHERE hits IS NOT NULL;
ALTER TABLE destinations ADD COLUMN throttled_at REAL;
ALTER TABLE destinations ADD COLUMN throttle_s REAL;
