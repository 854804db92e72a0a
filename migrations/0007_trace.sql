-- 0007_trace: each event row (one per copy) keeps why it went where it went: the routing stage
-- (a route, the source's implicit route, a tee, an override, an emit, or quarantined and why),
-- the rule's index, the names of the attributes it matched (event types, never other values),
-- the destination, and where its window came from. NULL for rows written before this.
ALTER TABLE events ADD COLUMN trace TEXT;
