// The PostgreSQL server of the PostgreSQL benchmark: the machine's own binaries (Debian's
// postgresql package), `initdb` of a new cluster in a temp directory, listening only on a unix
// socket there. Unlike the test suites' server (test/helpers/pg.ts, fsync off: they test
// behaviour), this one runs with fsync, synchronous_commit and full_page_writes ON by default, so
// each COMMIT waits for its WAL flush as SQLite's synchronous=FULL does; BENCH_PG_FSYNC=off runs it
// as the suites do. The server refuses to run as root, so as root it runs as `nobody`. It is
// stopped (pg_ctl stop -m immediate) and its directory removed by stop(), and at process exit
// whatever happened (an error, the watchdog, a signal).
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";

/** The directory holding initdb, pg_ctl and postgres, or null when PostgreSQL is not installed. */
export function postgresBin(): string | null {
  if (process.env.HOOKSPOOL_PG_BIN) return existsSync(join(process.env.HOOKSPOOL_PG_BIN, "initdb")) ? process.env.HOOKSPOOL_PG_BIN : null;
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return null;
  const versions = readdirSync(base).filter((v) => existsSync(join(base, v, "bin", "initdb")) && existsSync(join(base, v, "bin", "postgres")));
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(base, versions[0], "bin") : null;
}

export const PG_BIN = postgresBin();

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
  /** Create a fresh database (a copy of `template` when given) and return its URL (the unix-socket form hookspool's [spool] url takes). */
  createDatabase(name: string, template?: string): Promise<string>;
  /** Drop a database and CHECKPOINT, so the next measurement does not pay for this one's writes. */
  dropDatabase(name: string): Promise<void>;
  /** CPU seconds (user + system) the server's processes have used so far: the postmaster and its live children (a backend's goes when it exits). */
  cpuS(): number;
  stop(): Promise<void>;
}

const NOBODY = 65534;

function cmd(argv: string[], asNobody: boolean): string[] {
  return asNobody ? ["runuser", "-u", "nobody", "--", ...argv] : argv;
}

async function run(argv: string[], asNobody: boolean): Promise<string> {
  const p = Bun.spawn(cmd(argv, asNobody), { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C.UTF-8" } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${argv[0]} exited ${code}: ${(err || out).slice(-800)}`);
  return out;
}

/** initdb + pg_ctl start of a new cluster. */
export async function startBenchPostgres(o: { fsync: boolean }): Promise<BenchPg> {
  if (!PG_BIN) throw new Error("PostgreSQL not installed");
  const bin = PG_BIN;
  const root = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), "hookspool-bench-pg-"));
  const data = join(dir, "data");
  let started = false;
  let stopped = false;
  // At exit (also after procs.ts's watchdog or signal handler): stop the server, remove its directory.
  const atExit = () => {
    if (stopped) return;
    stopped = true;
    if (started) Bun.spawnSync(cmd([join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], root), { stdout: "ignore", stderr: "ignore" });
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("exit", atExit);
  mkdirSync(data);
  chmodSync(dir, 0o755);
  chmodSync(data, 0o700);
  if (root) {
    chownSync(dir, NOBODY, NOBODY);
    chownSync(data, NOBODY, NOBODY);
  }
  const user = "hookspool";
  // --no-sync only skips flushing initdb's own files; the server's durability is the -c settings below.
  await run([join(bin, "initdb"), "-D", data, "-A", "trust", "-U", user, "-E", "UTF8", "--no-sync", "--no-instructions"], root);
  const durable = o.fsync ? "-c fsync=on -c synchronous_commit=on -c full_page_writes=on" : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  const opts = `-k ${dir} -c listen_addresses='' ${durable} -c unix_socket_permissions=0777 -c max_connections=60`;
  started = true;
  await run([join(bin, "pg_ctl"), "-D", data, "-l", join(dir, "server.log"), "-o", opts, "-w", "-t", "30", "start"], root);
  const version = (await run([join(bin, "postgres"), "--version"], false)).trim();
  const socket = join(dir, ".s.PGSQL.5432");
  return {
    socketDir: dir,
    user,
    fsync: o.fsync,
    version,
    asNobody: root,
    async createDatabase(name: string, template?: string) {
      const db = name.replace(/[^a-z0-9_]/gi, "");
      const admin = new SQL({ path: socket, user, database: "postgres", adapter: "postgres", max: 1 });
      try {
        await admin.unsafe(`CREATE DATABASE "${db}"${template ? ` TEMPLATE "${template.replace(/[^a-z0-9_]/gi, "")}"` : ""}`);
      } finally {
        await admin.close();
      }
      return `postgres://${user}@localhost/${db}?host=${dir}`;
    },
    async dropDatabase(name: string) {
      const admin = new SQL({ path: socket, user, database: "postgres", adapter: "postgres", max: 1 });
      try {
        await admin.unsafe(`DROP DATABASE IF EXISTS "${name.replace(/[^a-z0-9_]/gi, "")}" WITH (FORCE)`);
        await admin.unsafe("CHECKPOINT");
      } finally {
        await admin.close();
      }
    },
    cpuS() {
      let pm: number;
      try {
        pm = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
      } catch {
        return Number.NaN;
      }
      let ticks = 0;
      for (const pid of readdirSync("/proc")) {
        if (!/^\d+$/.test(pid)) continue;
        try {
          const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
          // The fields after the command name (which may hold spaces) start past the last ')': state, ppid, ..., utime (12th), stime (13th).
          const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
          if (Number(pid) === pm || Number(f[1]) === pm) ticks += Number(f[11]) + Number(f[12]);
        } catch {
          // gone meanwhile
        }
      }
      return ticks / 100;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await run([join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], root);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        process.off("exit", atExit);
      }
    },
  };
}
