// The one Maintenance on PostgreSQL: only the holder of the maintenance lock runs its chores (a
// second dispatcher's round does nothing until the holder is gone, then it takes over); its
// round opens and resolves source_silent, resolves spool:write_failed after a quiet interval,
// alerts (dry) and runs retention once an hour. Skipped, saying so, without PostgreSQL.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { systemClock } from "../../src/clock.ts";
import { parseConfig } from "../../src/config/load.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { createLogger } from "../../src/log.ts";
import { WRITE_FAILED_ISSUE } from "../../src/obs/faults.ts";
import { PgSpool } from "../../src/store/pg/db.ts";
import { getIssueByFingerprintPg, raiseIssuePg } from "../../src/store/pg/issues.ts";
import { migratePg } from "../../src/store/pg/migrate.ts";
import { pgDispatchStore, pgMaintenanceStore } from "../../src/store/pg/store.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "../helpers/pg.ts";
import { waitFor } from "../helpers/proc.ts";

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
setDefaultTimeout(30_000);

describe.skipIf(!PG_BIN)("maintenance on PostgreSQL", () => {
  const server = serverForSuite();

  test("one leader at a time; liveness, the end of write_failed, alerts and retention in its round", async () => {
    await server().createDatabase("maint");
    const pools = [0, 1, 2].map(() => new PgSpool({ path: server().socket, user: server().user, database: "maint" }));
    const [pg, other, look] = pools;
    try {
      await migratePg(pg, "0123456789ab");
      const { config } = parseConfig('[sources.s]\naction = "hermes:a"\nexpect_every_s = 600\n', "t.toml");
      const log = createLogger("maintenance");
      const stores = [await pgDispatchStore(pg, "host-a:1"), await pgDispatchStore(other, "host-b:2")];
      const [leader, follower] = [pg, other].map(
        (p, i) =>
          new Maintenance({
            store: pgMaintenanceStore(p),
            leader: stores[i],
            config: () => config,
            clock: systemClock,
            log,
            env: { HOOKSPOOL_ALERT_DRY: "1" },
          }),
      );
      const now = await pg.now();
      // Silent for 1,000 s against an expectation of 600; a refused write 120 s ago, none since.
      await look.sql`INSERT INTO meta (key, value) VALUES ('source:s:last_event_at', ${String(now - 1000)})`;
      await raiseIssuePg(look.sql, {
        fingerprint: WRITE_FAILED_ISSUE,
        kind: "spool",
        error: "1 write(s) refused",
        now: now - 120,
      });

      await leader.tick();
      expect(await getIssueByFingerprintPg(look, "source_silent:s")).toMatchObject({
        state: "open",
        kind: "source_silent",
        alerted_at: expect.any(Number),
      });
      expect((await getIssueByFingerprintPg(look, WRITE_FAILED_ISSUE))?.state).toBe("resolved");
      const [retention] = await look.sql`SELECT value FROM meta WHERE key = 'last_retention_at'`;
      expect(Number(retention.value)).toBeGreaterThanOrEqual(now);
      expect(
        JSON.parse(String((await look.sql`SELECT value FROM meta WHERE key = 'maintenance_holder'`)[0].value)).holder,
      ).toBe("host-a:1");

      // The follower's round does nothing while the leader holds the lock.
      await look.sql`UPDATE meta SET value = ${String(now)} WHERE key = 'source:s:last_event_at'`;
      await follower.tick();
      expect((await getIssueByFingerprintPg(look, "source_silent:s"))?.state).toBe("open");

      // The leader's process dies: the server ends its sessions (as it does for a killed
      // process), the lock is free, and the follower takes maintenance over.
      // The signal is sent at once and the backend ends a moment later: wait until it has.
      await look.sql`SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
        AND pid <> pg_backend_pid()`;
      await waitFor(
        "the leader's session to end",
        async () => (await look.sql`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted`).length === 0,
      );
      await follower.tick();
      expect((await getIssueByFingerprintPg(look, "source_silent:s"))?.state).toBe("resolved");
      expect(
        JSON.parse(String((await look.sql`SELECT value FROM meta WHERE key = 'maintenance_holder'`)[0].value)).holder,
      ).toBe("host-b:2");
      // The old leader, had it lived on without its session, finds the lock lost and stands back.
      await look.sql`UPDATE meta SET value = ${String(now - 1000)} WHERE key = 'source:s:last_event_at'`;
      await leader.tick();
      expect((await getIssueByFingerprintPg(look, "source_silent:s"))?.state).toBe("resolved");
      // A clean stop gives the lock back (the dispatcher's stop does it for its maintenance).
      await stores[1].release("host-b", 2);
    } finally {
      // The "dead" leader's pool holds a terminated connection: closed without waiting for it.
      await pg.sql.close({ timeout: 0 }).catch(() => {});
      for (const p of [other, look]) await p.close().catch(() => {});
    }
  });
});
