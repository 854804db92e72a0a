// A script's {"enqueue": {...}} lines become events with the intake's validation and the
// intake's routing: the source plugin's attrs, action and span count as they would
// for a request.
import { destinationProblem } from "../config/destinations.ts";
import { injectedCopies, injectedVersion, newEvent } from "../config/events.ts";
import { outputExpose } from "../config/expose.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { spanWindow } from "../config/windows.ts";
import type { EmitRequest } from "../delivery.ts";
import { HookspoolError } from "../errors.ts";
import { type NewEvent, validateNewEvent } from "../store/enqueue.ts";

const bad = (what: string) => new HookspoolError("E_INPUT", `emit: ${what}`);

/**
 * Validate and route one emit; throws E_INPUT with a reason safe to log. The plugin sees the
 * emitted payload in a request made from it (a POST to the source's hook with the payload as
 * its JSON body and no other headers), so a plugin that routes on attrs routes an emit too.
 * An output of a bobbin's processor (`processorOf` is its instance) is not routed again: it goes
 * to the destination its event type is mapped to, in a group of its own (`<instance>-<event
 * type>`) with the immediate span and no tee, so it never comes back to the processor.
 */
export function resolveEmit(
  config: Config,
  sources: ReadonlyMap<string, IntakeSource>,
  e: EmitRequest,
  now: number,
  processorOf?: string,
): NewEvent {
  if (typeof e !== "object" || e === null) throw bad("not an object");
  if (typeof e.source !== "string" || !Object.hasOwn(config.sources, e.source)) throw bad("unknown source");
  if (typeof e.key !== "string") throw bad("key must be a string");
  if (e.event_type !== undefined && typeof e.event_type !== "string") throw bad("event_type must be a string");
  if (e.dedup_id !== undefined && e.dedup_id !== null && typeof e.dedup_id !== "string")
    throw bad("dedup_id must be a string");
  if (e.destination !== undefined && typeof e.destination !== "string") throw bad("destination must be a string");
  let payload: string | undefined;
  try {
    payload = JSON.stringify(e.payload ?? {});
  } catch {
    throw bad("payload is not JSON");
  }
  if (payload === undefined) throw bad("payload is not JSON");
  const eventType = e.event_type ?? "";
  let copies: NewEvent["copies"];
  // Its version: what the source's selector reads from the payload (a processor's output has none).
  let version: number | null = null;
  if (processorOf !== undefined && e.source === processorOf && e.destination !== undefined) {
    if (e.destination === `script:${processorOf}`)
      throw bad("a processor's output may not go back to its own processor");
    const route = `${processorOf}-${eventType || "*"}`;
    const window = spanWindow(config, "immediate");
    // A processor's output goes where its instance maps it, in a group of its own, narrowed as
    // the instance's expose says for that output.
    const expose = outputExpose(config, processorOf, eventType);
    const trace = {
      stage: "emit",
      route,
      rule_index: null,
      matched: eventType ? { event_type: eventType } : {},
      destination: e.destination,
      window: { quiet_s: window.quiet_s, max_s: window.max_s, from: "span" },
      ...(expose ? { expose: { paths: [...expose] } } : {}),
    };
    copies = [{ route, destination: e.destination, tee: false, window, trace }];
  } else {
    try {
      // Routed as a request of the source is; the trace says it came as an emit, and how it was routed.
      copies = injectedCopies(config, sources, {
        source: e.source,
        payload,
        eventType,
        destinationOverride: e.destination,
        peer: "emit",
        now,
      }).map((c) => ({ ...c, trace: { ...c.trace, stage: "emit", routed_as: c.trace.stage } }));
      version = injectedVersion(sources, { source: e.source, payload, peer: "emit", now });
    } catch {
      throw bad("no destination");
    }
  }
  for (const c of copies)
    if (destinationProblem(config, c.destination)) throw bad(`destination ${c.destination} does not resolve`);
  // An emit has no body of its own to keep: its payload is what the script printed.
  const ev = newEvent(
    config,
    { source: e.source, key: e.key, eventType, dedupId: e.dedup_id ?? null, payload, body: null, version },
    copies,
  );
  try {
    validateNewEvent(ev);
  } catch (x) {
    throw bad(x instanceof Error ? x.message : "invalid");
  }
  return ev;
}
