// hookspool bobbin new <vendor>.<product>: scaffold a bobbin from hookspool.webhook settings in
// <dir>/<vendor>/<product>/, checked by the template source before anything is written.
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { CommandDef } from "citty";
import { scaffold, scaffoldProblems, settingValue } from "../bobbin/scaffold.ts";
import { scaffoldPoll } from "../bobbin/scaffold-poll.ts";
import { HookspoolError } from "../errors.ts";
import { type Cli, GLOBAL_ARGS } from "./context.ts";
import { visible } from "./format.ts";

/** Every --set NAME=VALUE (citty keeps only the last of a repeated option). */
export function setArgs(rawArgs: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i];
    const raw = a === "--set" ? rawArgs[++i] : a.startsWith("--set=") ? a.slice(6) : undefined;
    if (raw === undefined) {
      if (a === "--set") throw new HookspoolError("E_USAGE", "--set needs NAME=VALUE");
      continue;
    }
    const eq = raw.indexOf("=");
    if (eq <= 0)
      throw new HookspoolError("E_USAGE", `--set ${raw}: expected NAME=VALUE`, {
        hint: "e.g. --set scheme=hmac-sha256-hex --set key='[\"repository.id\"]'",
      });
    out[raw.slice(0, eq)] = settingValue(raw.slice(eq + 1));
  }
  return out;
}

export function bobbinNewCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "new",
      description:
        "scaffold a bobbin from hookspool.webhook settings: manifest, signed captures, README, SETUP, AGENTS",
    },
    args: {
      ...GLOBAL_ARGS,
      name: { type: "positional", description: "<vendor>.<product>", required: true },
      dir: {
        type: "string",
        description: "the bobbin root to write <vendor>/<product>/ under (default: the current directory)",
      },
      set: {
        type: "string",
        description: "a template setting, NAME=VALUE (repeat it): scheme, header, prefix, key, dedup, event_type, ...",
      },
      code: { type: "boolean", description: "write the decisions as source.ts instead of a fixed template" },
      processor: {
        type: "boolean",
        description: "also a processor.ts: what each batch becomes, run by hookspool __processor",
      },
      poll: {
        type: "boolean",
        description: "a poll bobbin for a service with no push: a poller that reads a feed on the dispatcher's clock",
      },
    },
    run({ args, rawArgs }) {
      const name = String(args.name);
      const settings = setArgs(rawArgs);
      if (args.poll && (Object.keys(settings).length || args.code || args.processor))
        throw new HookspoolError(
          "E_USAGE",
          "--poll takes no --set, --code or --processor: a poll bobbin has no requests to verify",
        );
      const problems = args.poll
        ? scaffoldProblems({ name, settings: { scheme: "static-token", key: "poll", header: "X" } }).filter(
            (p) => p.key === "name",
          )
        : scaffoldProblems({ name, settings });
      if (problems.length) {
        const [first, ...rest] = problems;
        const more = rest.length ? ` (and ${rest.length} more: ${rest.map((p) => p.key).join(", ")})` : "";
        throw new HookspoolError("E_USAGE", `${first.key}: ${first.message}${more}`);
      }
      const [vendor, product] = name.split(".");
      const root = resolve(cli.io.cwd, String(args.dir ?? "."));
      const dir = join(root, vendor, product);
      if (existsSync(dir))
        throw new HookspoolError("E_USAGE", `${dir} exists already`, {
          hint: "choose another --dir, or remove it first",
        });
      const files = args.poll
        ? scaffoldPoll(name)
        : scaffold({ name, settings, code: args.code === true, processor: args.processor === true });
      for (const [f, text] of files) {
        const path = join(dir, f);
        mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
        writeFileSync(path, text, { mode: 0o644 });
      }
      // Code loaded by path must not be group- or other-writable, whatever the umask.
      for (const d of [
        join(root, vendor),
        dir,
        join(dir, "captures"),
        ...(args.code || args.processor || args.poll ? [join(dir, "tests")] : []),
      ])
        chmodSync(d, 0o755);
      if (cli.globals.json) cli.io.out(JSON.stringify({ dir, files: [...files.keys()] }));
      else {
        cli.io.out(visible(`wrote ${name} in ${dir}:`));
        for (const f of files.keys()) cli.io.out(visible(`  ${f}`));
        cli.io.out(
          visible(`next: fill in every TODO from the provider's pages, then hookspool bobbin check ${join(dir)}`),
        );
      }
      return 0;
    },
  };
}
