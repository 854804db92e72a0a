// The soak's reads of a SQLite spool: the home's spool.db, read-only beside the running processes
// (WAL: every statement sees the last commit). The soak is a test tool, like the suites that read
// rows: its SQL stays in this file and pg.ts.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { HeldLease, SoakStore, StoreFacts } from "./checks.ts";

export function openSqliteSoakStore(home: string): SoakStore {
  const db = new Database(join(home, "spool.db"), { readonly: true });
  return {
    async unfinished() {
      return (
        db.query("SELECT COUNT(*) AS n FROM batches WHERE state NOT IN ('delivered', 'dead', 'dropped')").get() as {
          n: number;
        }
      ).n;
    },
    async beating(pid) {
      const row = db.query("SELECT value FROM meta WHERE key = 'dispatcher_pid'").get() as { value: unknown } | null;
      return String(row?.value) === String(pid);
    },
    async leasesOf(pid) {
      return (
        db
          .query("SELECT lease_owner AS owner FROM batches WHERE state = 'leased' AND lease_owner LIKE ?")
          .all(`%:${pid}:%`) as { owner: string }[]
      ).map((r) => Number(r.owner.split(":").pop()));
    },
    async facts(heldAttempts): Promise<StoreFacts> {
      const deadIds = new Set(
        (
          db
            .query(
              "SELECT e.payload FROM events e JOIN batches b ON b.id = e.batch_id " +
                "WHERE b.state = 'dead' AND e.payload IS NOT NULL",
            )
            .all() as { payload: string }[]
        ).map((r) => (JSON.parse(r.payload) as { id: string }).id),
      );
      const batches = db.query("SELECT id, source, state, count, bytes, last_error FROM batches").all() as {
        id: number;
        source: string;
        state: string;
        count: number;
        bytes: number;
        last_error: string | null;
      }[];
      const { n: leasesRecovered } = db
        .query("SELECT COUNT(*) AS n FROM attempts WHERE error = 'lease expired'")
        .get() as { n: number };
      const held: HeldLease[] = heldAttempts.map((id) => {
        const a = db.query("SELECT finished_at, error FROM attempts WHERE id = ?").get(id) as {
          finished_at: number | null;
          error: string | null;
        } | null;
        return { attempt: id, finished: a?.finished_at != null, error: a?.error ?? null };
      });
      const qc = (db.query("PRAGMA quick_check").get() as { quick_check: string }).quick_check;
      return { batches, deadIds, leasesRecovered, held, integrity: qc === "ok" ? [] : [`quick_check: ${qc}`] };
    },
    async close() {
      db.close();
    },
  };
}
