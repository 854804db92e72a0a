-- 0002_unwrap: an unwrap delivery's per-event progress on the attempt row (spec 6.4.1).
-- Ids and counts only, never a body.
ALTER TABLE attempts ADD COLUMN events_delivered INTEGER;
ALTER TABLE attempts ADD COLUMN failed_event_id INTEGER;
