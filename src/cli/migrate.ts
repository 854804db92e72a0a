// hookspool migrate [--dry-run]: apply pending schema migrations (SQLite: under dispatch.lock;
// PostgreSQL: under the database's migrate lock, so running dispatchers may stay up), then build
// the payload indexes the config's bobbins declare and drop those none declares any more.
import type { CommandDef } from "citty";
import { migrateStore } from "../store/open.ts";
import type { IndexChanges } from "../store/where.ts";
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
      const indexes = { indexes: r.indexes };
      if (r.dryRun) {
        if (r.missing !== undefined)
          say(
            { from: 0, pending: r.pending, ...indexes },
            `no spool at ${r.missing}; migrate would create it and apply ${r.pending.join(", ")}`,
          );
        else
          say(
            { from: r.from, pending: r.pending, ...tag, ...indexes },
            r.pending.length
              ? `would apply ${r.pending.join(", ")} (${schema} ${r.from})`
              : `${schema} ${r.from} is current; nothing to apply`,
          );
      } else {
        const m = r.result;
        say(
          { ...m, ...tag, ...indexes },
          m.applied.length
            ? `applied ${m.applied.join(", ")} (${schema} ${m.from} -> ${m.to})`
            : `${schema} ${m.to} is current; nothing to apply`,
        );
      }
      if (!cli.globals.json) for (const line of indexLines(r.indexes, r.dryRun)) cli.io.out(line);
      return 0;
    },
  };
}

/** The payload indexes' lines: each built (by path) or dropped (by name), or would be. */
function indexLines(x: IndexChanges, dryRun: boolean): string[] {
  if (x.busy) return ["payload indexes: another process is building them; this one left them as they are"];
  const [build, drop] = dryRun ? ["would build", "would drop"] : ["built", "dropped"];
  return [
    ...x.created.map((c) => `payload index ${c.name}: ${build} for ${c.path}`),
    ...x.dropped.map((name) => `payload index ${name}: ${drop}, no bobbin of the config indexes its path`),
  ];
}
