// hookspool check and hookspool reload: validate the config (exit 2 on errors; the services'
// ExecStartPre), and touch config.toml so the intake and the dispatcher reload together.
import { existsSync, statSync, utimesSync } from "node:fs";
import type { CommandDef } from "citty";
import { checkConfigFile, type CheckReport } from "../check/check.ts";
import type { ConfigProblem } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { type Cli, GLOBAL_ARGS } from "./context.ts";
import { visible } from "./format.ts";
import { describeRate } from "../pacing.ts";

/** `error: path.to.key: what is wrong (how to fix)`; a key or value from the file is shown escaped. */
export function problemLine(p: ConfigProblem): string {
  return visible(`${p.level}: ${p.key}: ${p.message}${p.hint ? ` (${p.hint})` : ""}`);
}

function counts(problems: ConfigProblem[]): { errors: number; warnings: number } {
  const errors = problems.filter((p) => p.level === "error").length;
  return { errors, warnings: problems.length - errors };
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function runCheck(cli: Cli): Promise<CheckReport> {
  return checkConfigFile({ home: cli.globals.home, config: cli.globals.config, env: cli.io.env, cwd: cli.io.cwd });
}

/** Sources whose sender does not retry a failed delivery: each needs a sweep, so each is a note. */
const notesOf = (report: CheckReport) => Object.values(report.senders).filter((r) => r === false).length;

/**
 * The problems, errors first; then, labelled, whether each sender retries (a `note:` where it
 * does not: what is missed is lost unless a sweep recovers it) and each destination's pace (an
 * `info:`); and the summary line, which counts the notes.
 */
function printReport(cli: Cli, report: CheckReport): void {
  const { errors, warnings } = counts(report.problems);
  for (const p of report.problems) cli.io.out(problemLine(p));
  for (const [source, retries] of Object.entries(report.senders)) {
    if (retries === null) continue;
    cli.io.out(
      visible(
        retries
          ? `info: source ${source}: the sender retries a failed delivery`
          : `note: source ${source}: the sender does not retry a failed delivery: ` +
              "a sweep must recover what is missed (its bobbin's README says how)",
      ),
    );
  }
  // Which rate each paced destination is delivered at, and where it comes from (hermes: the gateway's).
  for (const [name, pace] of Object.entries(report.paces)) {
    if (pace) cli.io.out(visible(`info: destination ${name}: paced at ${describeRate(pace.rate)}, from ${pace.from}`));
  }
  const notes = notesOf(report);
  cli.io.out(
    visible(
      `${report.file ?? "(no config file)"}: ${plural(errors, "error")}, ` +
        `${plural(warnings, "warning")}${notes ? `, ${plural(notes, "note")}` : ""}`,
    ),
  );
}

export function checkCommands(cli: Cli): Record<string, CommandDef> {
  const check: CommandDef = {
    meta: {
      name: "check",
      description:
        "validate the config, its plugins, secrets, routes, " +
        "destinations and the database (exit 2 on errors; used as ExecStartPre)",
    },
    args: { ...GLOBAL_ARGS },
    async run() {
      const report = await runCheck(cli);
      const { errors, warnings } = counts(report.problems);
      // An error is one object, as every verb's is; a pass says what was checked.
      if (cli.globals.json && errors > 0)
        throw new HookspoolError("E_CONFIG", `${plural(errors, "error")} in the config`, {
          file: report.file ?? undefined,
          problems: report.problems,
        });
      if (cli.globals.json)
        cli.io.out(
          JSON.stringify({
            file: report.file,
            errors,
            warnings,
            notes: notesOf(report),
            problems: report.problems,
            senders: report.senders,
            paces: report.paces,
          }),
        );
      else printReport(cli, report);
      return errors > 0 ? 2 : 0;
    },
  };

  const reload: CommandDef = {
    meta: {
      name: "reload",
      description:
        "check the config, then touch it so the intake (within 5 s) and the dispatcher (next tick) reload it together",
    },
    args: { ...GLOBAL_ARGS },
    async run() {
      const report = await runCheck(cli);
      const file = report.file;
      if (file === null || !existsSync(file)) {
        throw new HookspoolError("E_NOT_FOUND", "no config file to reload", {
          file: file ?? undefined,
          hint: "the services run on defaults; hookspool init writes a config.toml",
        });
      }
      const { errors } = counts(report.problems);
      if (errors > 0) {
        if (cli.globals.json) cli.io.out(JSON.stringify({ reloaded: false, config: file, problems: report.problems }));
        else {
          printReport(cli, report);
          cli.io.out("not reloaded: the running services keep their current config");
        }
        return 2;
      }
      // Both services reload when the mtime moves; make sure it does move.
      let now = cli.clock.now();
      if (Math.abs(statSync(file).mtimeMs - now * 1000) < 1) now += 0.001;
      utimesSync(file, now, now);
      if (cli.globals.json) cli.io.out(JSON.stringify({ reloaded: true, config: file, problems: report.problems }));
      else {
        for (const p of report.problems) cli.io.out(problemLine(p));
        cli.io.out(`touched ${file}: the intake reloads it within 5 s and the dispatcher on its next tick`);
      }
      return 0;
    },
  };

  return { check, reload };
}
