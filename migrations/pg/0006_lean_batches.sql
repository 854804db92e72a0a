-- 0006_lean_batches: fewer index entries for every step of a batch's life. A state change is
-- never a HOT update (indexes hold state in their columns or predicates), so each one writes a
-- new entry into every index the new row version belongs to: ten of them before, two of
-- which ((state, next_attempt_at) and (state, delivered_at)) held every row for the few
-- states their queries ask for. Now a batch writes 5 entries when it opens, 6 when sealed, 5
-- when leased and 4 when delivered (7, 7, 6 and 5 before). What each query needs stays
-- indexed: a group's open batch (batches_one_open), its unfinished ones in order
-- (batches_queue) and all of them (batches_group: a key budget's spends),
-- the ready walk (batches_ready), whether any is sealed, the due retries and overdue awaits
-- (batches_due, now only their rows), what a destination holds in each state
-- (batches_destination), each destination's leases by their end (batches_leased: the claim's
-- max_inflight count, recovery), retention's finished batches by age
-- (batches_finished, only their rows), the dead by reason.
DROP INDEX batches_due;
DROP INDEX batches_delivered;
DROP INDEX batches_awaiting;
CREATE INDEX batches_due ON batches (state, next_attempt_at) WHERE state IN ('sealed', 'retry', 'awaiting');
CREATE INDEX batches_leased ON batches (destination, lease_until) WHERE state = 'leased';
CREATE INDEX batches_finished ON batches (state, delivered_at) WHERE state IN ('delivered', 'dropped');
-- Room on each page for the new version of a row whose indexed columns did not change (a join's
-- count, bytes and last_at), so that update can stay on its page without index entries.
ALTER TABLE batches SET (fillfactor = 90);
