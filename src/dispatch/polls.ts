// The poll clock, driven from the dispatcher's loop: for every poll source (a poll bobbin's
// instance), one step of its durable schedule per tick. A due instance gets one tick event,
// {"tick": <scheduled unix s>, "instance": "<i>"}, into its own source, key "poll", routed to its
// processor with the immediate window; what the processor's poller makes of it is its outputs.
import type { Rng } from "../clock.ts";
import { newEvent } from "../config/events.ts";
import { resolveCopies } from "../config/routes.ts";
import type { Config } from "../config/types.ts";
import { spanWindow } from "../config/windows.ts";
import type { NewEvent } from "../store/enqueue.ts";
import type { DispatchStore } from "../store/api.ts";
import type { PollStep } from "../store/polls.ts";

/** The tick event of instance `i` for the scheduled time `at`. */
export function tickEvent(config: Config, instance: string, at: number): NewEvent {
  const copies = resolveCopies(config, instance, { event_type: "poll" }).map((c) => ({
    ...c,
    window: spanWindow(config, "immediate"),
  }));
  const payload = JSON.stringify({ tick: Math.floor(at), instance });
  return newEvent(
    config,
    { source: instance, key: "poll", eventType: "poll", dedupId: `poll:${instance}:${at}`, payload, body: null },
    copies.slice(0, 1),
  );
}

/**
 * One step for every poll source; what each did (for logs and tests). One instance that fails
 * (a refused write) is handed to `onError` and the others still step.
 */
export async function stepPolls(
  store: DispatchStore,
  config: Config,
  now: number,
  rng: Rng,
  onError: (instance: string, e: unknown) => void,
): Promise<Map<string, PollStep>> {
  const out = new Map<string, PollStep>();
  for (const [name, src] of Object.entries(config.sources)) {
    if (src.kind !== "poll" || !src.every_s) continue;
    try {
      const step = await store.stepPoll(
        { instance: name, everyS: src.every_s, jitterS: src.jitter_s ?? 0 },
        now,
        rng,
        (at) => tickEvent(config, name, at),
      );
      if (step) out.set(name, step);
    } catch (e) {
      onError(name, e);
    }
  }
  return out;
}
