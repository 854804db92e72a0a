// What the operator's verbs share: the positional words after a verb, one answer said as text or
// JSON, and the config's store opened for one verb and closed after it.
import type { Config } from "../config/types.ts";
import type { OperatorStore } from "../store/api.ts";
import { type Cli, loadFor, openOperatorStore } from "./context.ts";

/** Positional words after the verb (citty keeps them in `_`). */
export function words(args: { _: string[] }): string[] {
  return args._.map(String);
}

export function say(cli: Cli, json: unknown, text: string): void {
  cli.io.out(cli.globals.json ? JSON.stringify(json) : text);
}

/** Run `fn` with the config's store (SQLite never migrated here, or PostgreSQL) and the loaded config. */
export async function withStore<T>(
  cli: Cli,
  fn: (store: OperatorStore, config: Config, configFile: string | null) => T | Promise<T>,
): Promise<T> {
  const loaded = loadFor(cli);
  const store = await openOperatorStore(cli, loaded);
  try {
    return await fn(store, loaded.config, loaded.paths.config);
  } finally {
    await store.close();
  }
}
