// A dashboard action and its record commit together on both backends: when the record cannot be
// written, the change is rolled back too (the database refuses the actions row here, as a full
// disk or a lost connection would at that moment), and a change that commits is recorded once.
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Stores } from "../../src/store/open.ts";
import { pgStores, sqliteStores } from "../../src/store/open.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "../helpers/pg.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";

/** The stores over a fresh database, and a switch that makes the database refuse every actions row. */
interface World {
  stores: Stores;
  refuseActions(): Promise<void>;
}

function cases(open: () => Promise<World>): void {
  test("a change whose record cannot be written is rolled back with it", async () => {
    const w = await open();
    try {
      const d = w.stores.dashboard();
      const op = w.stores.operator();
      const [r] = await w.stores
        .intake()
        .enqueueAll([ev({ key: "k", copies: [copy("r", "http:d", { quiet_s: 0, max_s: 0 })] })], T0);
      if (r.status !== "queued") throw new Error(r.status);
      await d.act(T0 + 1, { verb: "pause", destination: "http:d", by: "the dashboard" });
      expect((await d.recentActions(10)).map((a) => a.verb)).toEqual(["pause"]);

      await w.refuseActions();
      // Resume would change the destination; its record is refused, so nothing changes.
      await expect(d.act(T0 + 2, { verb: "resume", destination: "http:d" })).rejects.toThrow();
      expect(
        (
          await w.stores.status().statusFacts({ now: T0 + 3, paces: new Map(), budgets: new Map(), staleS: 30 })
        ).destinationRows.find((x) => x.name === "http:d")?.state,
      ).toBe("paused");
      expect((await d.recentActions(10)).map((a) => a.verb)).toEqual(["pause"]);
      // The same resume from the CLI (no record) goes through: the refusal was the record's alone.
      expect(await op.resumeDestination("http:d", T0 + 4)).toBe(true);
    } finally {
      await w.stores.close();
    }
  });
}

describe("on SQLite", () =>
  cases(async () => {
    const spool = openSpool(join(tempDir(), "spool.db"), { create: true });
    migrate(spool);
    return {
      stores: sqliteStores(spool),
      refuseActions: async () => {
        spool.db.run("CREATE TRIGGER refuse_actions BEFORE INSERT ON actions BEGIN SELECT RAISE(ABORT, 'no'); END");
      },
    };
  }));

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
describe.skipIf(!PG_BIN)("on PostgreSQL", () => {
  const server = serverForSuite();
  let n = 0;
  cases(async () => {
    const name = `actions${++n}`;
    await server().createDatabase(name);
    const pg = new PgSpool({ path: server().socket, user: server().user, database: name });
    await migratePg(pg, "0123456789ab");
    return {
      stores: pgStores(pg),
      refuseActions: async () => {
        await pg.sql`ALTER TABLE actions ADD CONSTRAINT refuse_actions CHECK (verb = '') NOT VALID`;
      },
    };
  });
});
