-- 0011_path_values: PostgreSQL only. What a payload holds at the paths the payload indexes cover,
-- as the writing process read them from the value it parsed (src/store/paths.ts): a JSON object
-- of each path's value in a one-element array, [] for a missing path. A payload index and a
-- --where read a path from here when the row has it, else from the payload as before
-- (src/store/pg/where.ts): parsing a 6 KB payload into jsonb is most of what an enqueued event
-- with one payload index costs the server. NULL (every existing row, and any row written
-- without them) means the payload is read.
ALTER TABLE events ADD COLUMN IF NOT EXISTS path_values jsonb;
