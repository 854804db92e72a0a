// A real intake on 127.0.0.1 (ephemeral port) over a migrated temp home, with captured logs.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { Intake } from "../../src/intake/server.ts";
import { createLogger } from "../../src/log.ts";
import { openSpool, type SqliteSpool, waitOffLoop } from "../../src/store/sqlite/db.ts";
import { migrate } from "../../src/store/sqlite/migrate.ts";
import { sqliteStores } from "../../src/store/open.ts";
import { T0 } from "./spool.ts";
import { tempDir } from "./tmp.ts";

export { LOG_LINES } from "./logs.ts";

export interface TestIntake {
  url: string;
  home: string;
  clock: FakeClock;
  intake: Intake;
  /** A second connection for assertions. */
  db: SqliteSpool;
  /** With `shareSpool`: the intake's own connection (its per-connection pragmas are the test's to set). */
  intakeSpool: SqliteSpool | null;
  /** Write a file in the home with mode 0600 (secrets). */
  secretFile(name: string, value: string): string;
  post(path: string, body: string | Uint8Array, headers?: Record<string, string>): Promise<Response>;
  count(table: string, where?: string): number;
  stop(): Promise<void>;
}

export interface IntakeOptions {
  /** Files to write before the config loads (secret name -> value), under <home>/secrets/. */
  secrets?: Record<string, string>;
  env?: Record<string, string>;
  clockAt?: number;
  /** Override the disk-free reading (backpressure tests). */
  diskFree?: (path: string) => number | null;
  /** Open the intake's connection here and hand it over (as `run` does), so the test holds it too. */
  shareSpool?: boolean;
}

function writeSecret(home: string, name: string, value: string): string {
  const p = join(home, `secret-${name}`);
  writeFileSync(p, value, { mode: 0o600 });
  return p;
}

/** `config` may use {{home}} and {{secret:<name>}} (the path of a written secret file). */
export async function startIntake(config: string, opts: IntakeOptions = {}): Promise<TestIntake> {
  const home = tempDir();
  const clock = new FakeClock(opts.clockAt ?? T0);
  for (const [k, v] of Object.entries(opts.secrets ?? {})) writeSecret(home, k, v);
  const text = config
    .replaceAll("{{home}}", home)
    .replace(/\{\{secret:([\w-]+)\}\}/g, (_, n) => join(home, `secret-${n}`));
  writeFileSync(join(home, "config.toml"), `[intake]\nlisten = "127.0.0.1:0"\n\n${text}`);
  const setup = openSpool(join(home, "spool.db"), { create: true, clock });
  migrate(setup);
  setup.close();
  return startIntakeIn(home, { clock, env: opts.env, diskFree: opts.diskFree, shareSpool: opts.shareSpool });
}

/**
 * A real intake over an existing, migrated home (a rig's, say), so the intake and the tables
 * another part of the test wrote are one spool. Its config.toml must listen on port 0.
 */
export async function startIntakeIn(
  home: string,
  opts: {
    clock?: FakeClock;
    env?: Record<string, string>;
    diskFree?: (path: string) => number | null;
    shareSpool?: boolean;
  } = {},
): Promise<TestIntake> {
  const clock = opts.clock ?? new FakeClock(T0);
  const env = { PATH: process.env.PATH, HOME: process.env.HOME, ...(opts.env ?? {}) };
  const loadOptions = { home, env, cwd: home };
  const loaded = loadConfig(loadOptions);
  const intakeSpool = opts.shareSpool
    ? openSpool(join(home, "spool.db"), { clock, busyTimeoutS: loaded.config.intake.busy_timeout_s })
    : null;
  if (intakeSpool) waitOffLoop(intakeSpool, loaded.config.intake.busy_timeout_s);
  const intake = new Intake({
    loaded,
    loadOptions,
    clock,
    log: createLogger("intake", { clock }),
    env,
    diskFree: opts.diskFree,
    stores: intakeSpool ? sqliteStores(intakeSpool) : undefined,
  });
  await intake.start();
  const db = openSpool(join(home, "spool.db"), { clock });
  const url = intake.url;
  return {
    url,
    home,
    clock,
    intake,
    db,
    intakeSpool,
    secretFile: (name, value) => writeSecret(home, name, value),
    post: (path, body, headers = {}) => fetch(`${url}${path}`, { method: "POST", body, headers }),
    count: (table, where = "1") =>
      (db.db.query(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`).get() as { n: number }).n,
    async stop() {
      await intake.stop();
      intakeSpool?.close();
      db.close();
    },
  };
}
