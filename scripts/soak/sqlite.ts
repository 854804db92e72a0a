// The soak's reads of a SQLite spool: the home's spool.db, read-only beside the running processes
// (WAL: every statement sees the last commit). The soak is a test tool, like the suites that read
// rows: its SQL stays in this file and pg.ts.
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { BatchFact, HeldLease, SoakStore, StoreFacts } from "./checks.ts";

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
      const batches = db
        .query("SELECT id, source, state, count, bytes, last_error FROM batches ORDER BY id")
        .all() as BatchFact[];
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
      const storedIds = new Set(
        (
          db.query("SELECT json_extract(payload, '$.id') AS id FROM events WHERE payload IS NOT NULL").all() as {
            id: string;
          }[]
        ).map((r) => r.id),
      );
      const qc = (db.query("PRAGMA quick_check").get() as { quick_check: string }).quick_check;
      return {
        batches,
        deadIds,
        storedIds,
        leasesRecovered,
        held,
        integrity: qc === "ok" ? [] : [`quick_check: ${qc}`],
      };
    },
    async stuckSample() {
      const out = (db.query("SELECT * FROM destinations ORDER BY name").all() as Record<string, unknown>[]).map(
        (d) => `destination ${JSON.stringify(d)}`,
      );
      const batches = db
        .query(
          "SELECT id, route, key, state, attempts, first_at, sealed_at, next_attempt_at, lease_owner, lease_until, " +
            "last_error FROM batches WHERE state NOT IN ('delivered', 'dead', 'dropped') ORDER BY id LIMIT 3",
        )
        .all() as Record<string, unknown>[];
      for (const b of batches) {
        out.push(`batch ${JSON.stringify(b)}`);
        for (const j of db
          .query("SELECT id, kind, at, attempt_id, detail FROM journal WHERE batch_id = ? ORDER BY id DESC LIMIT 6")
          .all(b.id as number))
          out.push(`  journal ${JSON.stringify(j)}`);
        for (const a of db
          .query(
            "SELECT id, n, outcome, status, error, started_at, finished_at FROM attempts WHERE batch_id = ? " +
              "ORDER BY id DESC LIMIT 4",
          )
          .all(b.id as number))
          out.push(`  attempt ${JSON.stringify(a)}`);
      }
      return out;
    },
    async close() {
      db.close();
    },
  };
}
