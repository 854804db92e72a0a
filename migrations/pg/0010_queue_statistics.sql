-- 0010_queue_statistics: PostgreSQL only (hookspool never runs ANALYZE on SQLite, whose planner then
-- goes by its own rules, with no statistics to go stale).
-- batches.state is a queue's column: what share of rows is open, sealed, leased or awaiting
-- changes by the thousand between two ANALYZEs. Statistics taken while few batches were active
-- (a quiet spool whose history is all delivered) made every active state look empty, so each
-- claim scanned the whole of batches_queue (every active batch) once per candidate, twice:
-- a claim's cost grew with the backlog it was draining. With no statistics on the column the
-- planner takes its default share for each state, and searches the queue by (route, key).
ALTER TABLE batches ALTER COLUMN state SET STATISTICS 0;
-- ANALYZE leaves a column with a target of 0 as it was: statistics taken before this migration
-- go only with the column's type changed (to the same type; its indexes are rebuilt with it).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM pg_stats WHERE schemaname = current_schema() AND tablename = 'batches'
      AND attname = 'state') THEN
    ALTER TABLE batches ALTER COLUMN state TYPE TEXT;
  END IF;
END $$;
