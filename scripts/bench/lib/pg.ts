// The PostgreSQL server of the PostgreSQL benchmark: the suites' throwaway cluster
// (test/helpers/pg.ts: the machine's own binaries, a unix socket in a temp directory, run as
// `nobody` when root), but with fsync, synchronous_commit and full_page_writes ON by default, so
// each COMMIT waits for its WAL flush as SQLite's synchronous=FULL does; BENCH_PG_FSYNC=off runs
// it as the suites do. Beside it: the server's version, its CPU time, dropping a database with a
// CHECKPOINT between measurements, and a stop at process exit whatever happened (an error, the
// watchdog, a signal).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { asServerUser, PG_BIN, type PgServer, runPgProgram, startPostgres } from "../../../test/helpers/pg.ts";

export { PG_BIN };

export interface BenchPg {
  /** The directory with the socket (.s.PGSQL.5432). */
  socketDir: string;
  user: string;
  /** Whether the server runs with fsync (and synchronous_commit, full_page_writes) on. */
  fsync: boolean;
  /** `postgres --version`. */
  version: string;
  /** Whether the server runs as `nobody` (this process is root). */
  asNobody: boolean;
  /** The cluster itself, for a store opened on it as the suites open theirs (pg-store-cost.ts). */
  server: PgServer;
  /**
   * Create a fresh database (a copy of `template` when given) and return its URL (the unix-socket form hookspool's
   * [spool] url takes).
   */
  createDatabase(name: string, template?: string): Promise<string>;
  /** Drop a database and CHECKPOINT, so the next measurement does not pay for this one's writes. */
  dropDatabase(name: string): Promise<void>;
  /**
   * CPU seconds (user + system) the server's processes have used so far: the postmaster and its live children (a
   * backend's goes when it exits).
   */
  cpuS(): number;
  /**
   * With `statements` on (pg_stat_statements loaded): the statements run since the last call, most
   * calls first, as table rows for stderr; then the counts start again. Empty when it is off.
   */
  statements(limit?: number): Promise<StatementRow[]>;
  stop(): Promise<void>;
}

/** One statement's totals since the last reset (pg_stat_statements). */
export interface StatementRow {
  calls: number;
  /** Milliseconds executing it, over all calls (planning aside). */
  totalMs: number;
  /** Milliseconds planning it, over all calls. */
  planMs: number;
  rows: number;
  query: string;
}

export async function startBenchPostgres(o: { fsync: boolean; statements?: boolean }): Promise<BenchPg> {
  if (!PG_BIN) throw new Error("PostgreSQL not installed");
  const bin = PG_BIN;
  const dir = mkdtempSync(join(tmpdir(), "hookspool-bench-pg-"));
  const data = join(dir, "data");
  let stopped = false;
  // BENCH_PG_KEEP_LOG: the server's log, copied there before its directory goes.
  const keepLog = () => {
    const to = process.env.BENCH_PG_KEEP_LOG;
    if (to) Bun.spawnSync(["cp", join(dir, "server.log"), to]);
  };
  // At exit (also after procs.ts's watchdog or signal handler): stop the server, remove its directory.
  const atExit = () => {
    if (stopped) return;
    stopped = true;
    Bun.spawnSync(
      asServerUser([join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], process.getuid?.() === 0),
      { stdout: "ignore", stderr: "ignore" },
    );
    keepLog();
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", atExit);
  const settings: Record<string, string> = o.statements
    ? {
        shared_preload_libraries: "pg_stat_statements",
        "pg_stat_statements.track": "top",
        "pg_stat_statements.track_planning": "on",
      }
    : {};
  Object.assign(settings, JSON.parse(process.env.BENCH_PG_SETTINGS ?? "{}"));
  const server = await startPostgres({ fsync: o.fsync, dir, settings });
  const version = (await runPgProgram([join(bin, "postgres"), "--version"], false)).trim();
  const admin = async (statements: string[]) => {
    const sql = new SQL({ path: server.socket, user: server.user, database: "postgres", adapter: "postgres", max: 1 });
    try {
      for (const s of statements) await sql.unsafe(s);
    } finally {
      await sql.close();
    }
  };
  const name = (s: string) => s.replace(/[^a-z0-9_]/gi, "");
  if (o.statements)
    await admin(["CREATE EXTENSION IF NOT EXISTS pg_stat_statements", "SELECT pg_stat_statements_reset()"]);
  return {
    socketDir: server.socketDir,
    user: server.user,
    fsync: o.fsync,
    version,
    asNobody: server.asNobody,
    server,
    async createDatabase(db: string, template?: string) {
      await admin([`CREATE DATABASE "${name(db)}"${template ? ` TEMPLATE "${name(template)}"` : ""}`]);
      return `postgres://${server.user}@localhost/${name(db)}?host=${server.socketDir}`;
    },
    dropDatabase: (db: string) => admin([`DROP DATABASE IF EXISTS "${name(db)}" WITH (FORCE)`, "CHECKPOINT"]),
    cpuS() {
      let pm: number;
      try {
        pm = Number(readFileSync(join(server.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
      } catch {
        return Number.NaN;
      }
      let ticks = 0;
      for (const pid of readdirSync("/proc")) {
        if (!/^\d+$/.test(pid)) continue;
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
          // The fields after the command name (which may hold spaces) start past the last ')': state, ppid, ..., utime
          // (12th), stime (13th).
          const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
          if (Number(pid) === pm || Number(f[1]) === pm) ticks += Number(f[11]) + Number(f[12]);
        } catch {
          // gone meanwhile
        }
      }
      return ticks / 100;
    },
    async statements(limit = 30) {
      if (!o.statements) return [];
      const sql = new SQL({
        path: server.socket,
        user: server.user,
        database: "postgres",
        adapter: "postgres",
        max: 1,
      });
      try {
        const rows =
          (await sql`SELECT calls::int AS calls, total_exec_time::float8 AS ms, total_plan_time::float8 AS plan,
            rows::int AS rows, query
            FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
            ORDER BY calls DESC LIMIT ${limit}`) as {
            calls: number;
            ms: number;
            plan: number;
            rows: number;
            query: string;
          }[];
        await sql`SELECT pg_stat_statements_reset()`;
        return rows.map((r) => ({
          calls: r.calls,
          totalMs: r.ms,
          planMs: r.plan,
          rows: r.rows,
          query: r.query.replace(/\s+/g, " ").slice(0, 110),
        }));
      } finally {
        await sql.close();
      }
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      process.off("exit", atExit);
      keepLog();
      await server.stop();
    },
  };
}
