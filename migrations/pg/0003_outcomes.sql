-- 0003_outcomes: the same as SQLite's 0011_outcomes. A batch whose destination awaits the
-- agent's outcome rests in `awaiting` after its 2xx (no lease; next_attempt_at is when its
-- outcome is overdue) and still holds its key's FIFO; an agent's reported failure is class
-- `agent`, and a failure it reports as permanent is dead with reason `agent_failed`. An outcome
-- names the delivery it settles by its webhook-id, so attempts are found by delivery_id.
ALTER TABLE batches DROP CONSTRAINT batches_state_check;
ALTER TABLE batches ADD CONSTRAINT batches_state_check
  CHECK (state IN ('open', 'sealed', 'leased', 'retry', 'awaiting', 'delivered', 'dead', 'dropped'));
ALTER TABLE batches DROP CONSTRAINT batches_last_class_check;
ALTER TABLE batches ADD CONSTRAINT batches_last_class_check
  CHECK (last_class IS NULL OR last_class IN ('transport', 'throttle', 'batch', 'config', 'permanent', 'poison', 'quarantine', 'agent'));
ALTER TABLE batches DROP CONSTRAINT batches_dead_reason_check;
ALTER TABLE batches ADD CONSTRAINT batches_dead_reason_check
  CHECK (dead_reason IS NULL OR dead_reason IN ('rejected', 'exhausted', 'poison', 'processor_permanent', 'bad_emit', 'config', 'quarantined', 'agent_failed'));
ALTER TABLE batches DROP CONSTRAINT batches_check1;
ALTER TABLE batches ADD CONSTRAINT batches_check1
  CHECK (state NOT IN ('sealed', 'leased', 'retry', 'awaiting', 'delivered') OR content_hash IS NOT NULL);
DROP INDEX batches_queue;
CREATE INDEX batches_queue ON batches (route, key, first_at, id) WHERE state IN ('open', 'sealed', 'retry', 'leased', 'awaiting');
CREATE INDEX batches_awaiting ON batches (next_attempt_at) WHERE state = 'awaiting';
ALTER TABLE journal DROP CONSTRAINT journal_kind_check;
ALTER TABLE journal ADD CONSTRAINT journal_kind_check
  CHECK (kind IN ('event', 'sealed', 'leased', 'awaiting', 'delivered', 'retry', 'dead', 'dropped'));
CREATE INDEX attempts_delivery ON attempts (delivery_id) WHERE delivery_id IS NOT NULL;
