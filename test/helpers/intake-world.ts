// A real intake on 127.0.0.1 (ephemeral port) over a world of either backend (world.ts): its
// home's config.toml names the world's spool (SQLite's spool.db in the home, or the PostgreSQL
// database by spool.url), and the intake opens its own stores from it through the factory, as
// `hookspool intake` does. The test reads rows through the world; log lines are captured.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { FakeClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config/load.ts";
import { Intake } from "../../src/intake/server.ts";
import { createLogger } from "../../src/log.ts";
import "./intake.ts"; // captures log lines instead of printing them
import { tempDir } from "./tmp.ts";
import type { OpenWorld, World } from "./world.ts";

export interface WorldIntake {
  url: string;
  home: string;
  clock: FakeClock;
  intake: Intake;
  world: World;
  /** The environment the intake runs with (the CLI over the same home needs it too: spool.url's). */
  env: Record<string, string | undefined>;
  /** Write a file in the home with mode 0600 (secrets). */
  secretFile(name: string, value: string): string;
  post(path: string, body: string | Uint8Array, headers?: Record<string, string>): Promise<Response>;
  count(table: string, where?: string): Promise<number>;
  stop(): Promise<void>;
}

export interface WorldIntakeOptions {
  /** Files to write before the config loads (secret name -> value), as <home>/secret-<name>. */
  secrets?: Record<string, string>;
  env?: Record<string, string>;
  /** Override the disk-free reading (backpressure tests). */
  diskFree?: (path: string) => number | null;
  /** intake.listen (127.0.0.1:0 by default). */
  listen?: string;
  /** More lines of the [spool] table (TOML), beside the lines that name the world's database. */
  spool?: string;
}

function writeSecret(home: string, name: string, value: string): string {
  const p = join(home, `secret-${name}`);
  writeFileSync(p, value, { mode: 0o600 });
  return p;
}

/**
 * The [spool] table that names a world's database (empty for SQLite's default spool.db in the
 * home), with `extra` lines of its own.
 */
export function spoolTable(w: World, extra = ""): string {
  const lines = [w.pgUrl ? 'backend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }' : "", extra].filter(Boolean);
  return lines.length > 0 ? `[spool]\n${lines.join("\n")}\n\n` : "";
}

/** `config` may use {{home}} and {{secret:<name>}} (the path of a written secret file). */
export async function startIntakeOn(
  open: OpenWorld,
  config: string,
  opts: WorldIntakeOptions = {},
): Promise<WorldIntake> {
  const home = tempDir();
  const world = await open({ dir: home });
  for (const [k, v] of Object.entries(opts.secrets ?? {})) writeSecret(home, k, v);
  const text = config
    .replaceAll("{{home}}", home)
    .replace(/\{\{secret:([\w-]+)\}\}/g, (_, n) => join(home, `secret-${n}`));
  writeFileSync(
    join(home, "config.toml"),
    `${spoolTable(world, opts.spool)}[intake]\nlisten = "${opts.listen ?? "127.0.0.1:0"}"\n\n${text}`,
  );
  const clock = world.clock;
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...(world.pgUrl ? { HOOKSPOOL_PG_URL: world.pgUrl } : {}),
    ...(opts.env ?? {}),
  };
  const loadOptions = { home, env, cwd: home };
  const intake = new Intake({
    loaded: loadConfig(loadOptions),
    loadOptions,
    clock,
    log: createLogger("intake", { clock }),
    env,
    diskFree: opts.diskFree,
  });
  try {
    await intake.start();
  } catch (e) {
    await world.close();
    throw e;
  }
  const url = intake.url;
  return {
    url,
    home,
    clock,
    intake,
    world,
    env,
    secretFile: (name, value) => writeSecret(home, name, value),
    post: (path, body, headers = {}) => fetch(`${url}${path}`, { method: "POST", body, headers }),
    count: async (table, where = "1 = 1") =>
      Number((await world.rows.get(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`))?.n),
    async stop() {
      await intake.stop();
      await world.close();
    },
  };
}
