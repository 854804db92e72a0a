// A script's {"enqueue": {...}} lines become events with the intake's validation (spec 6.6).
import { destinationProblem } from "../config/destinations.ts";
import { resolveCopies } from "../config/routes.ts";
import type { Config } from "../config/types.ts";
import type { EmitRequest } from "../destinations/types.ts";
import { HookspoolError } from "../errors.ts";
import { type NewEvent, validateNewEvent } from "../store/enqueue.ts";

const bad = (what: string) => new HookspoolError("E_INPUT", `emit: ${what}`);

/** Validate and route one emit; throws E_INPUT with a reason safe to log. */
export function resolveEmit(config: Config, e: EmitRequest): NewEvent {
  if (typeof e !== "object" || e === null) throw bad("not an object");
  if (typeof e.source !== "string" || !Object.hasOwn(config.sources, e.source)) throw bad("unknown source");
  if (typeof e.key !== "string") throw bad("key must be a string");
  if (e.event_type !== undefined && typeof e.event_type !== "string") throw bad("event_type must be a string");
  if (e.dedup_id !== undefined && e.dedup_id !== null && typeof e.dedup_id !== "string") throw bad("dedup_id must be a string");
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
  try {
    copies = resolveCopies(config, e.source, { event_type: eventType }, { destinationOverride: e.destination });
  } catch {
    throw bad("no destination");
  }
  for (const c of copies) if (destinationProblem(config, c.destination)) throw bad(`destination ${c.destination} does not resolve`);
  const ev: NewEvent = {
    source: e.source,
    key: e.key,
    eventType,
    dedupId: e.dedup_id ?? null,
    payload,
    raw: null,
    headers: {},
    copies,
    dedupWindowS: config.sources[e.source].dedup_window_s,
  };
  try {
    validateNewEvent(ev);
  } catch (x) {
    throw bad(x instanceof Error ? x.message : "invalid");
  }
  return ev;
}
