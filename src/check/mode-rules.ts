// hookspool check, the state directory's modes: the spool holds every payload and a processor's
// state directory its tokens, so only hookspool may read them.
import type { Stats } from "node:fs";
import { quoteKey } from "../config/parse.ts";
import type { Config, ConfigProblem, Paths } from "../config/types.ts";
import type { CheckDeps } from "./check.ts";
import { problem, statOrNull } from "./problem.ts";

/**
 * A bobbin processor's state directory holds OAuth access tokens and rotated refresh tokens in
 * clear text: once it exists it must be mode 0700 and the service user's. (A missing one is
 * created so at the first batch.)
 */
export function processorStateRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  for (const d of Object.values(config.destinations)) {
    if (d.processor === undefined || d.state_dir === undefined) continue;
    const st = statOrNull(d.state_dir);
    if (st === null) continue;
    const key = `bobbins.${quoteKey(d.processor)}.state_dir`;
    if (!st.isDirectory()) out.push(problem("error", key, `${d.state_dir} is not a directory`));
    else if (st.mode & 0o077)
      out.push(
        problem(
          "error",
          key,
          `${d.state_dir} is open to group/other (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}); ` +
            "the processor keeps tokens there",
          `chmod 700 ${d.state_dir}`,
        ),
      );
    else if (st.uid !== deps.uid)
      out.push(
        problem(
          "error",
          key,
          `${d.state_dir} is owned by uid ${st.uid}, not the user hookspool runs as (uid ${deps.uid})`,
          `chown <the hookspool user> ${d.state_dir}`,
        ),
      );
  }
  return out;
}

/** Warn about a home directory not 0700, or a spool database (or its -wal) not 0600. */
export function spoolModeRules(paths: Paths): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const mode = (st: Stats) => (st.mode & 0o777).toString(8).padStart(4, "0");
  const home = statOrNull(paths.home);
  if (home?.isDirectory() && home.mode & 0o077) {
    out.push(
      problem(
        "warning",
        "spool.home",
        `${paths.home} is open to group/other (mode ${mode(home)}); it holds the spool`,
        `chmod 700 ${paths.home}`,
      ),
    );
  }
  for (const file of [paths.spoolFile, `${paths.spoolFile}-wal`]) {
    const st = statOrNull(file);
    if (st?.isFile() && st.mode & 0o077) {
      out.push(
        problem(
          "warning",
          "spool.db",
          `${file} is open to group/other (mode ${mode(st)}); it holds every payload`,
          `chmod 600 ${file}`,
        ),
      );
    }
  }
  return out;
}
