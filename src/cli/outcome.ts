// `hookspool outcome <webhook-id> ok|failed`: the outcome of the agent's run that a delivery
// started, for completion hooks and scripts (deploy/hermes/completion.sh). It settles the batch
// awaiting that delivery through the store, so it works on both backends; an id no delivery of
// ours has is not found (exit 1), one whose outcome is in already changes nothing (exit 1).
import type { CommandDef } from "citty";
import { systemRng } from "../clock.ts";
import { policyOf } from "../dispatch/worker.ts";
import { HookspoolError } from "../errors.ts";
import { reportWhenRecorded } from "../intake/outcomes.ts";
import { REASON_MAX, type Reported } from "../store/awaiting-plan.ts";
import { type Cli, GLOBAL_ARGS, loadFor, openOperatorStore } from "./context.ts";
import { visible } from "./format.ts";
import type { HelpMeta } from "./help.ts";

/** A webhook-id as hookspool makes them: hs_<instance>_<batch>[_<n>][_r<k>]. */
const DELIVERY_ID = /^hs_[A-Za-z0-9_]{1,120}$/;

/** What the operator reads for a settled outcome. */
function settledText(r: Extract<Reported, { kind: "settled" }>): string {
  if (r.state === "delivered") return `batch ${r.batchId}: delivered (the run's outcome is in)`;
  if (r.state === "retry") return `batch ${r.batchId}: retry, delivered again after the backoff`;
  return `batch ${r.batchId}: dead (${r.deadReason}); hookspool replay ${r.batchId} delivers it again`;
}

export function outcomeCommand(cli: Cli): CommandDef {
  return {
    meta: {
      name: "outcome",
      description:
        'report the outcome of the run a delivery started (a destination with outcome = "await"): ' +
        "ok ends its batch, failed retries it",
      usage: "<webhook-id> ok|failed [--reason TEXT] [--permanent]",
    } as HelpMeta,
    args: {
      ...GLOBAL_ARGS,
      "webhook-id": { type: "positional", description: "the delivery's webhook-id header (hs_...)", required: true },
      status: { type: "positional", description: "ok or failed", required: true },
      reason: {
        type: "string",
        description:
          "why it failed, in a few words " + `(kept on the attempt, at most ${REASON_MAX} characters; never logged)`,
      },
      permanent: { type: "boolean", description: "failed: no retry can mend it; the batch is dead (agent_failed)" },
    },
    async run({ args }) {
      const id = String(args["webhook-id"]);
      const status = String(args.status);
      if (!DELIVERY_ID.test(id))
        throw new HookspoolError("E_USAGE", "the webhook-id must be a hookspool delivery id (hs_...)", {
          hint: "it is the webhook-id header of the delivery, or the batch document's delivery_id",
        });
      if (status !== "ok" && status !== "failed")
        throw new HookspoolError("E_USAGE", `the outcome must be ok or failed, not "${visible(status.slice(0, 20))}"`);
      if (args.permanent && status !== "failed") throw new HookspoolError("E_USAGE", "--permanent goes with failed");
      const loaded = loadFor(cli);
      const store = await openOperatorStore(cli, loaded);
      try {
        const r = await reportWhenRecorded(
          store,
          {
            deliveryId: id,
            status,
            reason: args.reason === undefined ? null : String(args.reason),
            permanent: Boolean(args.permanent),
            via: "cli",
            jitter: systemRng.next(),
            policy: policyOf(loaded.config),
          },
          () => cli.clock.now(),
        );
        if (r.kind === "unknown")
          throw new HookspoolError("E_NOT_FOUND", `no delivery has the webhook-id ${id}`, {
            hint: "hookspool show <batch> --attempts lists a batch's deliveries",
          });
        if (r.kind === "settled_already")
          throw new HookspoolError(
            "E_NOTHING",
            `batch ${r.batchId} does not await this delivery's outcome (it is ${r.state})`,
            { hint: "an outcome counts once, for the batch's latest delivery" },
          );
        cli.io.out(
          cli.globals.json
            ? JSON.stringify({
                batch: r.batchId,
                destination: r.destination,
                state: r.state,
                next_attempt_at: r.nextAttemptAt,
                dead_reason: r.deadReason,
              })
            : settledText(r),
        );
        return 0;
      } finally {
        await store.close();
      }
    },
  };
}
