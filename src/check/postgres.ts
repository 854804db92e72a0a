// What check says of a PostgreSQL spool: the URL's secret resolves, the server answers, and the
// schema version is this build's (older: the dispatcher or hookspool migrate brings it up;
// newer: refused). Never the URL itself: it may hold a password.
import { openPgSpool } from "../config/backend.ts";
import type { Env } from "../config/load.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { PG_LATEST_SCHEMA, pgSchemaVersion } from "../store/pg/migrate.ts";

export async function postgresRules(config: Config, env: Env): Promise<ConfigProblem[]> {
  const problem = (level: ConfigProblem["level"], message: string, hint?: string): ConfigProblem => ({ level, key: "spool.url", message, hint });
  let pg: ReturnType<typeof openPgSpool>;
  try {
    pg = openPgSpool(config, env);
  } catch (e) {
    return [problem("error", isHookspoolError(e) ? e.message : (e as Error).name, isHookspoolError(e) ? e.hint : undefined)];
  }
  try {
    await pg.ping();
    const version = await pgSchemaVersion(pg);
    if (version === 0) return [problem("warning", "the PostgreSQL database has no hookspool schema yet", "hookspool migrate creates it (a dispatcher does at its start)")];
    if (version < PG_LATEST_SCHEMA) return [problem("warning", `the PostgreSQL spool is at schema ${version}, older than this hookspool (${PG_LATEST_SCHEMA})`, "the dispatcher migrates it at startup, or run hookspool migrate; the intake refuses it until then")];
    if (version > PG_LATEST_SCHEMA) return [problem("error", `the PostgreSQL spool is at schema ${version}, newer than this hookspool (${PG_LATEST_SCHEMA})`, "run the newer hookspool")];
    return [];
  } catch (e) {
    if (isHookspoolError(e)) return [problem("error", e.message, e.hint ?? "is the server up, and does spool.url name its database and user?")];
    const { code, errno } = e as { code?: string; errno?: string };
    return [problem("error", `PostgreSQL refused (${[code ?? (e as Error).name, errno].filter(Boolean).join(" ")})`)];
  } finally {
    await pg.close();
  }
}
