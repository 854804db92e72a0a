// hookspool init: write a starter home (config, demo secret, demo script) and migrate its spool.
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import type { CommandDef } from "citty";
import { DEFAULT_HOME } from "../config/load.ts";
import { renderStarterConfig } from "../config/starter.ts";
import { HookspoolError } from "../errors.ts";
import { acquireLock } from "../lock.ts";
import { createSpool } from "../store/open.ts";
import { selfCommand, typedPath } from "../self.ts";
import { type Cli, GLOBAL_ARGS } from "./context.ts";

const DEMO_SCRIPT = `#!/bin/sh
# hookspool demo destination: appends each batch document (stdin) to batches.jsonl beside it.
set -eu
out="$(dirname "$0")/../batches.jsonl"
cat >> "$out"
printf '\\n' >> "$out"
`;

function writePrivate(path: string, text: string, mode: number): void {
  writeFileSync(path, text, { mode });
  chmodSync(path, mode);
}

export function initCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "init",
      description: "write a starter home: config.toml with a demo, its secret and script, a migrated spool",
    },
    args: {
      ...GLOBAL_ARGS,
      force: { type: "boolean", description: "overwrite an existing config.toml" },
    },
    run({ args }) {
      const home = resolve(cli.io.cwd, cli.globals.home ?? cli.io.env.HOOKSPOOL_HOME ?? DEFAULT_HOME);
      const configFile = join(home, "config.toml");
      if (existsSync(configFile) && !args.force) {
        throw new HookspoolError("E_NOTHING", `${configFile} already exists`, { hint: "pass --force to overwrite it" });
      }
      mkdirSync(home, { recursive: true, mode: 0o700 });
      // Take the lock before writing anything: init --force beside a running dispatcher must
      // fail with exit 3 and leave its config alone, not half-rewrite the home.
      const lock = acquireLock(join(home, "dispatch.lock"));
      try {
        chmodSync(home, 0o700);
        for (const dir of ["secrets", "scripts"]) mkdirSync(join(home, dir), { recursive: true, mode: 0o700 });
        const secretFile = join(home, "secrets", "demo");
        if (!existsSync(secretFile)) writePrivate(secretFile, `${randomBytes(24).toString("hex")}\n`, 0o600);
        const scriptFile = join(home, "scripts", "append-batch.sh");
        writePrivate(scriptFile, DEMO_SCRIPT, 0o700);
        // Relative to the config's directory (the home): a home that moves keeps working.
        writePrivate(
          configFile,
          renderStarterConfig({
            home: ".",
            secretFile: relative(home, secretFile),
            scriptFile: relative(home, scriptFile),
          }),
          0o600,
        );

        const dbPath = join(home, "spool.db");
        const schema = createSpool(dbPath, cli.clock);
        if (cli.globals.json) {
          cli.io.out(JSON.stringify({ home, config: configFile, db: dbPath, schema }));
        } else {
          cli.io.out(`wrote ${configFile}`);
          cli.io.out(`spool ${dbPath} at schema ${schema}`);
          // Both lines work on a host that has only the binary: no README to look in.
          const self = `${selfCommand(cli.io.cwd)} --home ${typedPath(home, cli.io.cwd)}`;
          cli.io.out(`next: ${self} run`);
          cli.io.out(
            `then, in another terminal: ${self} send demo --follow   (a signed demo event, delivered to batches.jsonl)`,
          );
        }
      } finally {
        lock.release();
      }
    },
  };
}
