-- 0007_payload_json: an event's payload read as jsonb, for --where and the payload indexes a
-- bobbin declares (src/store/pg/where.ts). events.payload stays TEXT, the sender's bytes; this
-- parses it, skipping a leading byte-order mark as SQLite's reader does, and gives NULL where
-- jsonb refuses the text (a \u0000 escape, a lone surrogate, nesting past the server's stack)
-- rather than an error: an index over it must never make an insert fail. IMMUTABLE, so an
-- index may use it; its exception block opens a subtransaction, which only the leader of a
-- parallel query may do (PARALLEL RESTRICTED).
CREATE FUNCTION hookspool_payload_json(payload text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL RESTRICTED AS $$
BEGIN
  IF left(payload, 1) = U&'\FEFF' THEN
    RETURN substr(payload, 2)::jsonb;
  END IF;
  RETURN payload::jsonb;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
  RETURN NULL;
END
$$;
