// The soak's PostgreSQL: a throwaway server (test/helpers/pg.ts), one database every process
// shares, and the soak's reads of it, as scale-out.test.ts reads rows. The soak is a test tool,
// like the suites: its SQL stays in this file and sqlite.ts. The URL carries a password the
// server ignores (it trusts its socket), so the checks can tell a log line that carries it.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { type PgServer, startPostgres } from "../../test/helpers/pg.ts";
import type { HeldLease, SoakStore, StoreFacts } from "./checks.ts";

export const PG_PASSWORD = "soak-pg-password";

export interface SoakPg {
  /** The database's URL, for each process's environment. */
  url: string;
  /** The socket's directory: no log line may name it either. */
  socketDir: string;
  store: SoakStore;
  /** CPU seconds of the server's processes: the ones that ended, and those still running. */
  serverCpuS(): number;
  stop(): Promise<void>;
}

export async function startSoakPg(): Promise<SoakPg> {
  const server: PgServer = await startPostgres();
  try {
    await server.createDatabase("soak");
  } catch (e) {
    await server.stop();
    throw e;
  }
  const url = `postgres://${server.user}:${PG_PASSWORD}@localhost/soak?host=${server.socketDir}`;
  const sql = new SQL(url, { max: 2 });
  return {
    url,
    socketDir: server.socketDir,
    store: pgSoakStore(sql),
    serverCpuS: () => serverCpu(server.dataDir),
    async stop() {
      await sql.close();
      await server.stop();
    },
  };
}

function pgSoakStore(sql: SQL): SoakStore {
  return {
    async unfinished() {
      const [r] = await sql`SELECT COUNT(*)::int AS n FROM batches WHERE state NOT IN ('delivered', 'dead', 'dropped')`;
      return Number(r.n);
    },
    async beating(pid) {
      const rows = await sql`SELECT 1 FROM dispatchers WHERE id LIKE ${`%:${pid}`}`;
      return rows.length > 0;
    },
    async leasesOf(pid) {
      const rows = await sql`SELECT lease_owner AS owner FROM batches
          WHERE state = 'leased' AND lease_owner LIKE ${`%:${pid}:%`}`;
      return rows.map((r: { owner: string }) => Number(r.owner.split(":").pop()));
    },
    async facts(heldAttempts): Promise<StoreFacts> {
      const dead = await sql`SELECT e.payload FROM events e JOIN batches b ON b.id = e.batch_id
          WHERE b.state = 'dead' AND e.payload IS NOT NULL`;
      const deadIds = new Set<string>(
        dead.map((r: { payload: string }) => (JSON.parse(r.payload) as { id: string }).id),
      );
      const rows = await sql`SELECT id::float8 AS id, source, state, count, bytes::float8 AS bytes, last_error
          FROM batches ORDER BY id`;
      const batches = rows.map((r: Record<string, unknown>) => ({
        id: Number(r.id),
        source: String(r.source),
        state: String(r.state),
        count: Number(r.count),
        bytes: Number(r.bytes),
        last_error: r.last_error === null ? null : String(r.last_error),
      }));
      const stored = await sql`SELECT payload::json->>'id' AS id FROM events WHERE payload IS NOT NULL`;
      const storedIds = new Set<string>(stored.map((r: { id: string }) => r.id));
      const [{ n }] = await sql`SELECT COUNT(*)::int AS n FROM attempts WHERE error = 'lease expired'`;
      const ended = await sql`SELECT id::float8 AS id, finished_at, error FROM attempts
          WHERE id = ANY(${[...heldAttempts]}::bigint[])`;
      const byId = new Map<number, { finished_at: number | null; error: string | null }>(
        ended.map((a: { id: number; finished_at: number | null; error: string | null }) => [Number(a.id), a]),
      );
      const held: HeldLease[] = heldAttempts.map((id) => ({
        attempt: id,
        finished: byId.get(id)?.finished_at != null,
        error: byId.get(id)?.error ?? null,
      }));
      // No event is excluded in the soak: each batch's count is its event rows.
      const off = await sql`SELECT b.id::float8 AS id, b.count, COUNT(e.id)::int AS rows
          FROM batches b LEFT JOIN events e ON e.batch_id = b.id
          GROUP BY b.id HAVING COUNT(e.id) <> b.count ORDER BY b.id LIMIT 5`;
      const integrity = off.map(
        (r: { id: number; count: number; rows: number }) => `batch ${r.id} counts ${r.count} events, has ${r.rows}`,
      );
      return { batches, deadIds, storedIds, leasesRecovered: Number(n), held, integrity };
    },
    async stuckSample() {
      const [now] = await sql`SELECT EXTRACT(EPOCH FROM clock_timestamp())::float8 AS now,
          (SELECT value FROM meta WHERE key = 'last_tick_at') AS last_tick_at,
          (SELECT value FROM meta WHERE key = 'maintenance_holder') AS maintenance_holder`;
      const out = [`database ${JSON.stringify(now)}`];
      for (const d of await sql`SELECT * FROM destinations ORDER BY name`) out.push(`destination ${JSON.stringify(d)}`);
      // The latest beats: the live dispatchers (the killed ones' rows stay, stale).
      const beats =
        await sql`SELECT id, heartbeat_at, last_tick_at FROM dispatchers ORDER BY heartbeat_at DESC LIMIT 3`;
      for (const d of beats) out.push(`dispatcher ${JSON.stringify(d)}`);
      const batches = await sql`SELECT id::float8 AS id, route, key, state, attempts, first_at, sealed_at,
          next_attempt_at, lease_owner, lease_until, last_error FROM batches
          WHERE state NOT IN ('delivered', 'dead', 'dropped') ORDER BY id LIMIT 3`;
      for (const b of batches) {
        out.push(`batch ${JSON.stringify(b)}`);
        for (const j of await sql`SELECT id::float8 AS id, kind, at, attempt_id::float8 AS attempt_id, detail
            FROM journal WHERE batch_id = ${b.id}::bigint ORDER BY id DESC LIMIT 6`)
          out.push(`  journal ${JSON.stringify(j)}`);
        for (const a of await sql`SELECT id::float8 AS id, n, outcome, status, error, started_at, finished_at
            FROM attempts WHERE batch_id = ${b.id}::bigint ORDER BY id DESC LIMIT 4`)
          out.push(`  attempt ${JSON.stringify(a)}`);
      }
      return out;
    },
    async close() {
      // the connection is closed with the server (stop)
    },
  };
}

const TICKS = 100; // CLK_TCK on Linux

/** The postmaster's CPU and its reaped children's, plus its live children's own. */
function serverCpu(dataDir: string): number {
  try {
    const master = Number(readFileSync(join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    let ticks = 0;
    for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        // f[1] is the parent; utime, stime, cutime, cstime are f[11..14].
        if (Number(pid) === master) ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
        else if (Number(f[1]) === master) ticks += Number(f[11]) + Number(f[12]);
      } catch {
        // gone meanwhile
      }
    }
    return ticks / TICKS;
  } catch {
    return 0;
  }
}
