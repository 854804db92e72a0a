// A throwaway PostgreSQL server for the scale-out backend's suites: the machine's own binaries
// (Debian's postgresql package), `initdb` of a cluster in a temp directory, listening only on a
// unix socket in that directory, with fsync off (the suites test behaviour, not the disk). The
// server refuses to run as root, so as root it runs as `nobody` (the directory is chowned to it).
import { afterAll, beforeAll } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "./tmp.ts";

/**
 * The directory holding initdb, pg_ctl and postgres, or null when PostgreSQL is not installed or
 * HOOKSPOOL_TEST_SKIP_PG=1 (`make test` sets it: its PostgreSQL halves run in `make test-all`).
 */
export function postgresBin(): string | null {
  if (process.env.HOOKSPOOL_TEST_SKIP_PG === "1") return null;
  if (process.env.HOOKSPOOL_PG_BIN)
    return existsSync(join(process.env.HOOKSPOOL_PG_BIN, "initdb")) ? process.env.HOOKSPOOL_PG_BIN : null;
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return null;
  const versions = readdirSync(base).filter(
    (v) => existsSync(join(base, v, "bin", "initdb")) && existsSync(join(base, v, "bin", "postgres")),
  );
  versions.sort((a, b) => Number(b) - Number(a));
  return versions.length ? join(base, versions[0], "bin") : null;
}

export const PG_BIN = postgresBin();

/** Said once by each suite that skips: PostgreSQL is not on this machine, or make test skips it. */
export const PG_SKIP_MESSAGE =
  process.env.HOOKSPOOL_TEST_SKIP_PG === "1"
    ? "PostgreSQL suites skipped: HOOKSPOOL_TEST_SKIP_PG=1 (make test leaves them to make test-all)"
    : "PostgreSQL suites skipped: no initdb under /usr/lib/postgresql (apt-get install postgresql; .ci/run installs " +
      "it)";

export interface PgServer {
  /** The directory with the socket (.s.PGSQL.5432); the cluster's data is in its data/. */
  socketDir: string;
  dataDir: string;
  /** Whether the server runs as `nobody` (this process is root). */
  asNobody: boolean;
  /** The socket file, for Bun.sql's `path`. */
  socket: string;
  user: string;
  /** A fresh database on this server, by name. */
  createDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
}

const NOBODY = 65534;

/** argv as the server's user: `nobody` when this process is root (the server refuses root). */
export function asServerUser(argv: string[], asNobody: boolean): string[] {
  return asNobody ? ["runuser", "-u", "nobody", "--", ...argv] : argv;
}

/** Run one of the server's programs to its end; its stdout, or an error with its last output. */
export async function runPgProgram(argv: string[], asNobody: boolean): Promise<string> {
  const p = Bun.spawn(asServerUser(argv, asNobody), {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C.UTF-8" },
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${argv[0]} exited ${code}: ${(err || out).slice(-800)}`);
  return out;
}

const run = runPgProgram;

export interface StartOptions {
  /**
   * fsync, synchronous_commit and full_page_writes on (the benchmark); off by default (the suites test behaviour, not
   * the disk).
   */
  fsync?: boolean;
  /** Where the cluster's directory goes (a temp dir by default). */
  dir?: string;
  /** More server settings, as `-c name=value` takes them (the benchmark's pg_stat_statements). */
  settings?: Record<string, string>;
}

/** initdb + pg_ctl start of a new cluster; stop() stops it and removes the directory. */
export async function startPostgres(o: StartOptions = {}): Promise<PgServer> {
  if (!PG_BIN) throw new Error(PG_SKIP_MESSAGE);
  const root = process.getuid?.() === 0;
  const dir = o.dir ?? tempDir("hookspool-pg-");
  const data = join(dir, "data");
  mkdirSync(data);
  chmodSync(dir, 0o755);
  chmodSync(data, 0o700);
  if (root) {
    chownSync(dir, NOBODY, NOBODY);
    chownSync(data, NOBODY, NOBODY);
  }
  const user = "hookspool";
  await run(
    [join(PG_BIN, "initdb"), "-D", data, "-A", "trust", "-U", user, "-E", "UTF8", "--no-sync", "--no-instructions"],
    root,
  );
  const durable = o.fsync
    ? "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
    : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  const more = Object.entries(o.settings ?? {})
    .map(([k, v]) => ` -c ${k}=${v}`)
    .join("");
  const opts =
    `-k ${dir} -c listen_addresses='' ${durable} -c unix_socket_permissions=0777 -c max_connections=150` + more;
  await run(
    [join(PG_BIN, "pg_ctl"), "-D", data, "-l", join(dir, "server.log"), "-o", opts, "-w", "-t", "30", "start"],
    root,
  );
  const socket = join(dir, ".s.PGSQL.5432");
  return {
    socketDir: dir,
    dataDir: data,
    asNobody: root,
    socket,
    user,
    async createDatabase(name: string) {
      const { SQL } = await import("bun");
      const admin = new SQL({ path: socket, user, database: "postgres", adapter: "postgres", max: 1 });
      try {
        await admin.unsafe(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
      } finally {
        await admin.close();
      }
    },
    async stop() {
      try {
        await run([join(PG_BIN as string, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"], root);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * One throwaway server for the enclosing describe block: started before its tests, stopped after.
 * The getter is for the tests (the server exists only once beforeAll has run).
 */
export function serverForSuite(o: StartOptions = {}): () => PgServer {
  let server: PgServer | undefined;
  beforeAll(async () => {
    server = await startPostgres(o);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });
  return () => {
    if (!server) throw new Error("the suite's PostgreSQL server is not started");
    return server;
  };
}
