// `hookspool replay --dead --plan`: what a bulk replay would put back, by destination, key and
// why each batch died, with the pace each destination is delivered at (a replay goes through the
// destination's rate and its fair share like any batch, so live traffic keeps its slots), and
// nothing changed.
import type { Config } from "../config/types.ts";
import { makeDestination } from "../destinations/registry.ts";
import { describeRate } from "../pacing.ts";
import type { OperatorStore } from "../store/api.ts";
import type { Cli } from "./context.ts";
import { table } from "./format.ts";

interface PlanRow {
  destination: string;
  key: string;
  reason: string;
  batches: number;
  events: number;
}

interface DestinationPlan {
  destination: string;
  batches: number;
  events: number;
  /** Its rate, and where it comes from; null when it is not paced. */
  rate: { limit: number; window_s: number; from: string } | null;
  /** At this rate, the least time the batches take (0 when not paced). */
  at_least_s: number;
}

/** Print the plan for `ids` (dead batches) and change nothing. */
export async function printReplayPlan(
  cli: Cli,
  store: OperatorStore,
  config: Config,
  ids: readonly number[],
): Promise<number> {
  const rows = new Map<string, PlanRow>();
  for (const id of ids) {
    const b = await store.getBatch(id);
    if (b?.state !== "dead") continue;
    const reason = b.dead_reason ?? "rejected";
    const k = JSON.stringify([b.destination, b.key, reason]);
    const row = rows.get(k) ?? { destination: b.destination, key: b.key, reason, batches: 0, events: 0 };
    row.batches++;
    row.events += b.count;
    rows.set(k, row);
  }
  const list = [...rows.values()].sort(
    (a, b) =>
      a.destination.localeCompare(b.destination) || a.key.localeCompare(b.key) || a.reason.localeCompare(b.reason),
  );
  const destinations: DestinationPlan[] = [];
  for (const name of [...new Set(list.map((r) => r.destination))]) {
    const mine = list.filter((r) => r.destination === name);
    const batches = mine.reduce((n, r) => n + r.batches, 0);
    const events = mine.reduce((n, r) => n + r.events, 0);
    const pace =
      name === "quarantine"
        ? null
        : (makeDestination(config, name, { env: cli.io.env, clock: cli.clock, instanceId: "plan" })?.pace() ?? null);
    // A document is one request; every batch here waits its turn in the window.
    const atLeast = pace ? Math.max(0, Math.ceil(batches / pace.rate.limit) - 1) * pace.rate.windowS : 0;
    destinations.push({
      destination: name,
      batches,
      events,
      rate: pace ? { limit: pace.rate.limit, window_s: pace.rate.windowS, from: pace.from } : null,
      at_least_s: atLeast,
    });
  }
  if (cli.globals.json) {
    cli.io.out(JSON.stringify({ plan: list, destinations, changed: false }));
    return 0;
  }
  if (list.length === 0) {
    cli.io.out("no dead batches match; nothing would be replayed");
    return 1;
  }
  cli.io.out(
    table(
      ["DESTINATION", "KEY", "REASON", "BATCHES", "EVENTS"],
      list.map((r) => [r.destination, r.key, r.reason, r.batches, r.events]),
    ),
  );
  cli.io.out("");
  for (const d of destinations) {
    const pace = d.rate
      ? `paced at ${describeRate({ limit: d.rate.limit, windowS: d.rate.window_s })} ` +
        `(${d.rate.from}): at least ${humanSeconds(d.at_least_s)} to deliver`
      : "not paced";
    cli.io.out(
      `${d.destination}: ${d.batches} batch(es), ${d.events} event(s); ${pace}, sharing its slots with live traffic`,
    );
  }
  cli.io.out("nothing changed: run the same command without --plan to replay");
  return 0;
}

function humanSeconds(s: number): string {
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
