// Why a dead batch died, as the operator verbs say it: the receiver's verdict (rejected) or one
// of the pipeline's own faults, never mixed.
import { DEAD_REASONS, type DeadReason } from "../delivery.ts";
import { HookspoolError } from "../errors.ts";

export const DEAD_REASON_TEXT: Readonly<Record<string, string>> = {
  rejected: "the destination refused it for good, a permanent 4xx or exit code: the receiver's verdict",
  exhausted: "it failed max_attempts counted times",
  poison: "it kept failing while its destination delivered other batches",
  processor_permanent: "the bobbin's processor said it can never succeed",
  bad_emit: "the script's output could not be read, twice",
  config: "it can never meet one of hookspool's own bounds, such as the destination's max_body_bytes",
  quarantined: "a request no source plugin could classify",
  agent_failed: "the receiver reported its run failed for good (hookspool outcome ... failed --permanent)",
};

/** A --reason value, checked; undefined when not given. */
export function deadReasonArg(v: unknown): DeadReason | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "string" || !(DEAD_REASONS as readonly string[]).includes(v))
    throw new HookspoolError("E_USAGE", `--reason must be one of ${DEAD_REASONS.join(", ")}`);
  return v as DeadReason;
}
