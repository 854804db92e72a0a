// hookspool check, the intake: it listens on loopback only (or says why not), and
// intake.threads is accepted and ignored.
import { isPublic, NON_LOOPBACK_HINT, readListen } from "../config/listen.ts";
import { isTable } from "../config/parse.ts";
import type { Config, ConfigProblem } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import { problem } from "./problem.ts";

export function intakeRules(config: Config, raw: Record<string, unknown>): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const { listen, allow_non_loopback } = config.intake;
  try {
    const l = readListen(listen);
    if (isPublic(l)) {
      if (allow_non_loopback)
        out.push(
          problem(
            "warning",
            "intake.listen",
            `${l.hostname} is not a loopback address: the reverse proxy should own the network`,
            "bind 127.0.0.1 behind the proxy",
          ),
        );
      else
        out.push(
          problem(
            "error",
            "intake.listen",
            `${l.hostname} is not a loopback address; the intake refuses to bind it`,
            NON_LOOPBACK_HINT,
          ),
        );
    }
  } catch (e) {
    if (!isHookspoolError(e)) throw e;
    out.push(problem("error", "intake.listen", e.message));
  }
  const intake = raw.intake;
  if (isTable(intake) && Object.hasOwn(intake, "threads")) {
    out.push(
      problem(
        "warning",
        "intake.threads",
        "is accepted and ignored: Bun serves every request on one event loop",
        "remove the key",
      ),
    );
  }
  return out;
}
