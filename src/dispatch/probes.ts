// The health probes chore: for each instance whose bobbin has a [health] and whose config turns it
// on, ask the provider every probe_every_s whether it still sends to us (probe-call.ts), keep
// the answer (status, /healthz and the dashboard read it), and open
// source:<instance>:disabled_at_provider with what the provider says when it does not; a healthy
// answer resolves it. A probe that cannot tell (a refused token, a rate limit) changes no issue:
// it is logged, shown in status, and asked again at the next interval. Liveness (expect_every_s)
// is another chore; this one adds the provider's own word.
import { newestRef, resolveSecret } from "../config/secrets.ts";
import { createHttp, type Http } from "../net/http.ts";
import type { MaintenanceStore } from "../store/api.ts";
import type { ProbeRecord } from "../store/probes.ts";
import { probeHealth } from "./probe-call.ts";
import { Chore, type ChoreContext, raiseOnce } from "./chores.ts";

export const disabledFingerprint = (instance: string) => `source:${instance}:disabled_at_provider`;

/** The issue's text: what the provider says, and where to look. */
export function disabledText(vendor: string, r: Pick<ProbeRecord, "says" | "console">): string {
  return (
    `${vendor} no longer sends to this instance: ${r.says || "its answer does not hold what healthy means"}` +
    (r.console ? `; see ${r.console}` : "")
  );
}

export async function probePass(ctx: ChoreContext, http: Http, now: number): Promise<void> {
  const store: MaintenanceStore = ctx.store;
  const probes = ctx.config().probes ?? {};
  const records = new Map((await store.probeRecords()).map((r) => [r.instance, r]));
  for (const [instance, probe] of Object.entries(probes)) {
    const last = records.get(instance);
    if (last && last.next_at > now) continue;
    let token: string | null = null;
    let error: string | null = null;
    try {
      token = resolveSecret(newestRef(probe.secret), ctx.env);
    } catch (e) {
      error = `secrets.${probe.section.secret} cannot be read: ${e instanceof Error ? e.message : String(e)}`;
    }
    const answer =
      token === null
        ? { healthy: null, says: "", error, console: null }
        : await probeHealth({ http, probe, token, now: () => ctx.clock.now() });
    const record: ProbeRecord = { instance, at: now, next_at: now + probe.everyS, ...answer };
    await store.noteProbe(record);
    const fp = disabledFingerprint(instance);
    if (answer.healthy === false)
      await raiseOnce(store, ctx.log, fp, "source_silent", disabledText(probe.vendor, record), now);
    else if (answer.healthy === true) await store.resolveIssue(fp, now);
    else ctx.log.limited("warn", "health probe could not tell", { source: instance, reason: answer.error ?? "" });
  }
  // An instance whose probe the config no longer has: its issue no longer stands.
  for (const r of records.values())
    if (!Object.hasOwn(probes, r.instance)) await store.resolveIssue(disabledFingerprint(r.instance), now);
}

export function healthProbes(ctx: ChoreContext): Chore {
  const http = ctx.http ?? createHttp({ clock: ctx.clock });
  return new Chore("probes", ctx, (now) => probePass(ctx, http, now));
}
