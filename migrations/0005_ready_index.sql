-- 0005_ready_index: the dispatcher finds each destination's deliverable heads in first_at order
-- and stops at the slots it has, instead of grouping every unfinished batch on every wake-up (a
-- backlog of 10,000 keys cost it 10,000 rows read per claim).
CREATE INDEX batches_ready ON batches (destination, first_at, id) WHERE state IN ('sealed', 'retry');
