// hookspool migrate [--dry-run]: apply pending schema migrations (SQLite: under dispatch.lock;
// PostgreSQL: under the database's migrate lock, so running dispatchers may stay up).
import type { CommandDef } from "citty";
import { migrateStore } from "../store/open.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";

export function migrateCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "migrate",
      description: "apply pending schema migrations (takes dispatch.lock; refuses while the dispatcher runs)",
    },
    args: {
      ...GLOBAL_ARGS,
      "dry-run": { type: "boolean", description: "say what would be applied, change nothing" },
    },
    async run({ args }) {
      const loaded = loadFor(cli);
      const say = (json: object, text: string) => cli.io.out(cli.globals.json ? JSON.stringify(json) : text);
      const r = await migrateStore(loaded.config, {
        paths: loaded.paths,
        noConfigFile: loaded.paths.config === null,
        env: cli.io.env,
        clock: cli.clock,
        dryRun: Boolean(args["dry-run"]),
      });
      // PostgreSQL's words name it; SQLite's say the schema alone, as they always have.
      const pg = r.backend === "postgres";
      const schema = pg ? "PostgreSQL schema" : "schema";
      const tag = pg ? { backend: "postgres" } : {};
      if (r.dryRun) {
        if (r.missing !== undefined)
          say(
            { from: 0, pending: r.pending },
            `no spool at ${r.missing}; migrate would create it and apply ${r.pending.join(", ")}`,
          );
        else
          say(
            { from: r.from, pending: r.pending, ...tag },
            r.pending.length
              ? `would apply ${r.pending.join(", ")} (${schema} ${r.from})`
              : `${schema} ${r.from} is current; nothing to apply`,
          );
        return 0;
      }
      const m = r.result;
      say(
        { ...m, ...tag },
        m.applied.length
          ? `applied ${m.applied.join(", ")} (${schema} ${m.from} -> ${m.to})`
          : `${schema} ${m.to} is current; nothing to apply`,
      );
      return 0;
    },
  };
}
