// The store's conformance suite on PostgreSQL: the same cases as SQLite's (test/store/*.case.ts),
// each on a fresh, migrated database of one throwaway server. Skipped, saying so, without
// PostgreSQL.
import { afterAll, beforeAll, describe, setDefaultTimeout } from "bun:test";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";
import { openPgStore } from "../../helpers/store-under-test-pg.ts";
import { runStoreSuite } from "../suite.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

describe.skipIf(!PG_BIN)("PostgreSQL", () => {
  let server: PgServer;
  beforeAll(async () => {
    server = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  // Every operation is a round trip to the server: the model test takes fewer steps than on
  // SQLite (enough to reach every path it tallies), so the whole file stays well under a minute.
  runStoreSuite({ name: "postgres", open: () => openPgStore(server), modelSteps: 4_000 });
});
