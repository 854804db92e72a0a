-- 0006_dead_reason: a dead batch says why it died, so the receiver's rejections are never mixed
-- with the pipeline's faults: rejected (the destination answered a permanent refusal),
-- exhausted (max_attempts counted failures), poison (it kept failing while its destination
-- delivered others), processor_permanent (a bobbin's processor said it can never succeed),
-- bad_emit (a script's output could not be read, twice), config (hookspool's own bound, such as
-- a batch over the destination's max_body_bytes), quarantined (a request no plugin could
-- classify). NULL for every batch that is not dead.
ALTER TABLE batches ADD COLUMN dead_reason TEXT
  CHECK (dead_reason IS NULL OR dead_reason IN ('rejected', 'exhausted', 'poison', 'processor_permanent', 'bad_emit', 'config', 'quarantined'));

-- The batches already dead: their reason from the class their last attempt ended with.
UPDATE batches SET dead_reason = CASE
    WHEN destination = 'quarantine' THEN 'quarantined'
    WHEN last_class = 'poison' THEN 'poison'
    WHEN last_class = 'batch' THEN 'exhausted'
    ELSE 'rejected'
  END
  WHERE state = 'dead';

CREATE INDEX batches_dead_reason ON batches (dead_reason) WHERE state = 'dead';
