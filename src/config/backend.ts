// Which store a config names: SQLite's spool.db under the home (the default), or a PostgreSQL
// database several hosts share, reached by the URL spool.url refers to (a secret reference: the
// URL may hold a password, so it is never logged, printed or stored).
import { HookspoolError } from "../errors.ts";
import type { Env } from "./load.ts";
import { resolveSecret } from "./secrets.ts";
import type { Config } from "./types.ts";

/** The PostgreSQL URL of this config; a missing or empty one is a config error naming spool.url. */
export function pgUrl(config: Config, env: Env): string {
  const ref = config.spool.url;
  if (!ref)
    throw new HookspoolError(
      "E_CONFIG",
      'spool.backend = "postgres" needs spool.url, a secret reference such as { env = "HOOKSPOOL_PG_URL" }',
      { key: "spool.url" },
    );
  const url = resolveSecret(ref, env).trim();
  if (!/^postgres(ql)?:\/\//.test(url))
    throw new HookspoolError(
      "E_CONFIG",
      "spool.url must be a postgres:// or postgresql:// URL (its value is not shown: it may hold a password)",
      { key: "spool.url" },
    );
  return url;
}
