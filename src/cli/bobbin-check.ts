// hookspool bobbin check <dir | vendor.product>: the conformance kit on one bobbin, printed as a
// scorecard. Exit 0 when every required row passes or does not apply, 2 otherwise.
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import type { CommandDef } from "citty";
import { type Bobbin, BUILTIN_PREFIX, findBobbins } from "../bobbin/registry.ts";
import { isCompiled } from "../self.ts";
import { checkBobbin, scorecardMarkdown, scorecardText } from "../check/bobbin/scorecard.ts";
import { type CheckSubject, subjectFromBobbin, subjectFromDir } from "../check/bobbin/subject.ts";
import { HookspoolError } from "../errors.ts";
import { type Cli, GLOBAL_ARGS, loadFor } from "./context.ts";
import { visible } from "./format.ts";

const REPORTS = ["text", "md", "json"];

function subjectOf(cli: Cli, target: string): CheckSubject {
  const path = resolve(cli.io.cwd, target);
  if (existsSync(path)) {
    if (!statSync(path).isDirectory())
      throw new HookspoolError("E_USAGE", `${target} is not a bobbin directory`, {
        hint: "give <root>/<vendor>/<product>, the directory holding bobbin.toml",
      });
    const dir = { ...subjectFromDir(path), label: target };
    // The binary cannot load a built-in's code from its directory (its packages are compiled in,
    // not beside it): a directory holding exactly a built-in is checked as the compiled-in copy.
    if (isCompiled()) {
      const builtin = sameBuiltin(cli, dir);
      if (builtin) return { ...subjectFromBobbin(builtin, cli.io.cwd), label: target };
    }
    return dir;
  }
  if (!/^[a-z0-9_-]+\.[a-z0-9_-]+$/.test(target))
    throw new HookspoolError("E_USAGE", `no directory ${target}, and it is not a <vendor>.<product> name`);
  const { config } = loadFor(cli);
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    target,
  );
  if (!b)
    throw new HookspoolError("E_NOT_FOUND", `no bobbin "${target}"`, {
      hint: "hookspool bobbin list shows them; give a directory to check one not yet installed",
    });
  return subjectFromBobbin(b, cli.io.cwd);
}

/** The built-in whose files a directory holds, byte for byte, or null. */
function sameBuiltin(cli: Cli, dir: CheckSubject): Bobbin | null {
  const name = /^name\s*=\s*"([^"]+)"/m.exec(dir.files.get("bobbin.toml") ?? "")?.[1];
  if (!name) return null;
  const b = findBobbins({ bobbinPath: [], presets: Object.keys(loadFor(cli).config.spans) }).bobbins.get(name);
  if (!b?.dir.startsWith(BUILTIN_PREFIX) || b.dir.slice(BUILTIN_PREFIX.length) !== dir.relDir) return null;
  const compiled = b.files();
  if (compiled.size !== dir.files.size) return null;
  for (const [f, text] of dir.files) if (compiled.get(f) !== text) return null;
  return b;
}

/** The files changed since `base`, as git names them, for the scope row. */
function changedSince(cwd: string, base: string): string[] {
  const r = Bun.spawnSync(["git", "diff", "--name-only", `${base}...HEAD`], { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0)
    throw new HookspoolError("E_USAGE", `git cannot diff against ${base}`, {
      hint: "run it inside the repository, with a ref git knows",
    });
  return r.stdout.toString().split("\n").filter(Boolean);
}

export function bobbinCheckCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "check",
      description: "run the conformance kit on one bobbin and print its scorecard (exit 0 passes, 2 does not)",
    },
    args: {
      ...GLOBAL_ARGS,
      target: {
        type: "positional",
        description: "a bobbin's directory, or the <vendor>.<product> of one found",
        required: true,
      },
      report: { type: "string", description: "text (default), md or json" },
      strict: { type: "boolean", description: "advisory rows (provider-links, scope) count too" },
      online: { type: "boolean", description: "fetch each provider page (the provider-links row)" },
      base: {
        type: "string",
        description: "a git ref: the scope row lists what the change touches outside the bobbin",
      },
      tests: { type: "boolean", default: true, description: "run the bobbin's own tests (--no-tests skips them)" },
    },
    async run({ args }) {
      const report = cli.globals.json ? "json" : String(args.report ?? "text");
      if (!REPORTS.includes(report))
        throw new HookspoolError("E_USAGE", `--report ${report}: expected text, md or json`);
      const subject = subjectOf(cli, String(args.target));
      const changed = args.base ? changedSince(cli.io.cwd, String(args.base)) : undefined;
      const card = await checkBobbin(subject, {
        strict: args.strict === true,
        online: args.online === true,
        changed,
        runTests: args.tests !== false,
      });
      if (report === "json") cli.io.out(JSON.stringify(card));
      else if (report === "md") cli.io.out(scorecardMarkdown(card));
      else cli.io.out(scorecardText(card, visible));
      return card.passed ? 0 : 2;
    },
  };
}
