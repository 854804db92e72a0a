// A quarantine replay: each stored request goes through the steps after verify again (challenge,
// ignore, classification, routes) with its own path, query and arrival time, exactly as the
// intake would have taken it had the plugin worked. Nothing is written here.
import type { IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import type { NewEvent } from "../store/enqueue.ts";
import type { StoredRequest } from "../store/replay.ts";
import { afterVerify, quarantineReason } from "./evaluate.ts";
import { hookRequest } from "../plugin/hook-request.ts";

/** A stored request the fixed plugin still cannot classify: the replay changes nothing. */
export class StillQuarantined extends Error {
  override name = "StillQuarantined";
  constructor(readonly reason: string) {
    super(`the source plugin still cannot classify it (${reason}); nothing changed`);
  }
}

/**
 * What each stored request becomes: its events (several when the source splits it), or none
 * when the plugin now ignores it or answers it as a handshake. Throws StillQuarantined for the
 * first that fails again.
 */
export async function reclassify(
  config: Config,
  src: IntakeSource,
  requests: StoredRequest[],
): Promise<Map<number, NewEvent[]>> {
  const out = new Map<number, NewEvent[]>();
  for (const r of requests) {
    const req = hookRequest({
      method: "POST",
      url: r.url ?? `/hooks/${encodeURIComponent(src.name)}`,
      headers: Object.entries(r.headers),
      body: r.raw,
      peer: "replay",
      now: r.receivedAt,
    });
    const ev = await afterVerify(config, src, req);
    if (ev.kind === "quarantine") throw new StillQuarantined(quarantineReason(ev.error));
    out.set(r.eventId, ev.kind === "classified" ? ev.events : []);
  }
  return out;
}
