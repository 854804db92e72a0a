// The processor row: each accepted capture's payload, as a one-event batch, through the real
// runtime (`hookspool __processor <instance>` in a child with a throwaway HOME and the kit's
// stub answers for any HTTP), twice under one batch id. The first run must succeed and print
// nothing but emits of declared outputs; the second must give the same emits, from the journal
// when the bobbin keeps state.
import { jsonText } from "../../store/content.ts";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Capture, Kit } from "../../bobbin/captures.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import { parseConfig } from "../../config/load.ts";
import { selfArgv } from "../../self.ts";
import { type Problem, type Row, row, skipped } from "./row.ts";
import { startKitIntake } from "../kit/intake.ts";
import { kitConfig, type Loaded, requestOf } from "./kit-files.ts";
import type { CheckSubject } from "./subject.ts";

const BATCH_ID = 7001;

interface Run {
  code: number | null;
  out: string;
  err: string;
}

async function runOnce(env: Record<string, string>, instance: string, stdin: string): Promise<Run> {
  const p = Bun.spawn([...selfArgv(), "__processor", instance], {
    env,
    stdin: new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** The event a capture becomes in the spool (the source's payload, which may be built from headers). */
interface Spooled {
  key: string;
  eventType: string;
  payload: string;
}

/** A one-event batch document for a spooled capture, as the dispatcher would write it. */
function documentOf(e: Spooled, instance: string, now: number): string {
  const eventType = e.eventType;
  return JSON.stringify({
    source: instance,
    route: instance,
    key: e.key,
    batch_id: BATCH_ID,
    delivery_id: "kit-delivery",
    attempt: 1,
    count: 1,
    first_at: now,
    last_at: now,
    event_type: eventType,
    event_types: { [eventType]: 1 },
    events: [JSON.parse(jsonText(e.payload)) as unknown],
    event_meta: [{ id: 1, event_type: eventType, received_at: now, dedup_id: null }],
  });
}

/** Send each accepted capture through a kit intake and read back what it stored. */
async function spoolCaptures(
  s: CheckSubject,
  m: Manifest,
  kit: Kit,
  captures: Capture[],
): Promise<Map<Capture, Spooled | string>> {
  const instance = kit.instance.name;
  const out = new Map<Capture, Spooled | string>();
  const k = await startKitIntake({
    config: kitConfig(s, m, kit, [[instance, { settings: kit.instance.settings }]]),
    secrets: kit.secrets,
    now: kit.now ?? 1_700_000_000,
    http: kit.http,
  });
  try {
    for (const c of captures) {
      const r = await k.send(requestOf(c, instance));
      const ev = r.status === 202 ? k.spool.newestEvent() : null;
      out.set(
        c,
        ev
          ? { key: ev.key, eventType: ev.event_type, payload: ev.payload }
          : `the intake answered ${r.status}, so no batch holds it (see the captures row)`,
      );
    }
  } finally {
    await k.stop();
  }
  return out;
}

/** Why a run's stdout is not emits of declared outputs, or null. */
function emitProblem(out: string, m: Manifest): string | null {
  for (const line of out.split("\n").filter(Boolean)) {
    let e: { enqueue?: { event_type?: unknown } };
    try {
      e = JSON.parse(line) as typeof e;
    } catch {
      return "stdout holds a line that is not an emit";
    }
    const t = e.enqueue?.event_type;
    if (typeof t !== "string") return "stdout holds a line that is not an emit";
    if (!Object.hasOwn(m.outputs, t) && !Object.hasOwn(m.outputs, "*"))
      return `an item of event type "${t}", which [outputs] does not declare`;
  }
  return null;
}

const why = (r: Run) =>
  r.err
    .split("\n")
    .find((l) => l.startsWith("hookspool-permanent: "))
    ?.slice(21) ??
  r.err.trim().split("\n").pop()?.slice(0, 200) ??
  "";

/** What one run of the processor is given: a batch document, the HTTP answers, the items expected. */
interface KitRun {
  file: string;
  doc: string;
  http: Kit["http"];
  items?: Record<string, unknown>[];
}

/** A tick's batch document, as the poll clock makes it. */
function tickDocument(instance: string, now: number): string {
  return JSON.stringify({
    source: instance,
    route: instance,
    key: "poll",
    batch_id: BATCH_ID,
    delivery_id: "kit-delivery",
    attempt: 1,
    count: 1,
    first_at: now,
    last_at: now,
    event_type: "poll",
    event_types: { poll: 1 },
    events: [{ tick: Math.floor(now), instance }],
    event_meta: [{ id: 1, event_type: "poll", received_at: now, dedup_id: `poll:${instance}:${now}` }],
  });
}

/** The items a run emitted, as the poller returned them ({event_type, ...payload}). */
function itemsOf(out: string): Record<string, unknown>[] {
  return out
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const e = (JSON.parse(l) as { enqueue: { event_type: string; payload: Record<string, unknown> } }).enqueue;
      return { event_type: e.event_type, ...e.payload };
    });
}

export async function processorRow(s: CheckSubject, m: Manifest | null, l: Loaded): Promise<Row> {
  const name = "processor";
  const work = m?.processor ?? m?.poll;
  if (!m || !work) return skipped(name, "no processor: events go straight to the outputs");
  if (!l.kit) return skipped(name, "captures/kit.toml does not load");
  const kit: Kit = l.kit;
  const instance = kit.instance.name;
  const now = kit.now ?? 1_700_000_000;
  const runs: KitRun[] = [];
  const out: Problem[] = [];
  if (m.poll) {
    for (const c of l.polls)
      runs.push({
        file: c.file,
        doc: tickDocument(instance, c.now ?? now),
        http: [...c.http, ...kit.http],
        ...(c.items ? { items: c.items } : {}),
      });
    if (!runs.length) return skipped(name, "no poll capture to run the poller on (see the captures row)");
  } else {
    const accepted = l.captures.filter(
      (x) => (x.expect.status === 202 || x.expect.status === 200) && x.expect.word === "queued" && !x.settings,
    );
    let spooled: Map<Capture, Spooled | string>;
    try {
      spooled = await spoolCaptures(s, m, kit, accepted);
    } catch (e) {
      return row(name, [
        {
          file: "captures/kit.toml",
          message: `the kit could not serve the bobbin: ${(e as Error).message.split("\n")[0]}`,
          fix: "see the captures row",
        },
      ]);
    }
    for (const c of accepted) {
      const e = spooled.get(c);
      if (typeof e === "string" || e === undefined)
        out.push({ file: c.file, message: e ?? "not spooled", fix: "a queued capture is what the processor gets" });
      else runs.push({ file: c.file, doc: documentOf(e, instance, now), http: kit.http });
    }
    if (!runs.length && !out.length) return skipped(name, "no accepted capture to give it (see the captures row)");
  }
  const what = m.poll ? "poller" : "processor";
  const tmp = mkdtempSync(join(tmpdir(), "hookspool-kit-processor-"));
  try {
    for (const [n, v] of Object.entries(kit.secrets)) writeFileSync(join(tmp, `secret-${n}`), v, { mode: 0o600 });
    const text = kitConfig(s, m, kit, [[instance, { settings: kit.instance.settings }]]).replace(
      /\{\{secret:([^}]+)\}\}/g,
      (_, n: string) => join(tmp, `secret-${n}`),
    );
    const { config, problems } = parseConfig(text, "captures/kit.toml", { home: () => tmp });
    const dest = config.destinations[`script:${instance}`];
    if (problems.some((p) => p.level === "error") || !dest?.env)
      return row(name, [
        {
          file: "captures/kit.toml",
          message: `the kit's instance does not expand into a ${what}`,
          fix: "see the captures row",
        },
      ]);
    for (const [i, r] of runs.entries()) {
      const stubs = join(tmp, `http-${i}.json`);
      writeFileSync(stubs, JSON.stringify(r.http));
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: tmp,
        ...dest.env,
        HOOKSPOOL_BATCH_ID: String(BATCH_ID),
        HOOKSPOOL_DELIVERY_ID: "kit-delivery",
        HOOKSPOOL_KIT_HTTP: stubs,
      };
      if (process.env.LANG) env.LANG = process.env.LANG;
      if (work.state) env.HOOKSPOOL_STATE_DIR = join(tmp, `state-${i}`);
      const first = await runOnce(env, instance, r.doc);
      if (first.code !== 0) {
        out.push({
          file: r.file,
          message: `the ${what} exited ${first.code}: ${why(first)}`,
          fix:
            "run it on this capture (add [[http]] answers " +
            `to ${m.poll ? "it" : "captures/kit.toml"} for the API calls it makes)`,
        });
        continue;
      }
      // The kit maps every declared output, so an item the runtime dropped is of an undeclared type.
      const dropped = /dropped the items of unmapped event types (.+)$/m.exec(first.err)?.[1];
      const bad = dropped
        ? `items of event type ${dropped}, which [outputs] does not declare`
        : emitProblem(first.out, m);
      if (bad)
        out.push({
          file: r.file,
          message: bad,
          fix: "return items of the event types [outputs] declares, and never print",
        });
      else if (r.items && JSON.stringify(itemsOf(first.out)) !== JSON.stringify(r.items))
        out.push({
          file: r.file,
          message: `the ${what} returned other items than the capture's "items"`,
          fix: "correct the poller, or the capture's items if the poller is right",
        });
      const second = await runOnce(env, instance, r.doc);
      if (second.code !== 0 || second.out !== first.out)
        out.push({
          file: r.file,
          message: "a second run of the same batch gave other emits",
          fix: "keep state with ctx.saveState, and make items from the batch and the state only",
        });
      else if (work.state && !second.err.includes("replayed its journal"))
        out.push({
          file: r.file,
          message: "a second run of the same batch did not replay the journal",
          fix: "the runtime journals a batch with state; check HOOKSPOOL_STATE_DIR reaches it",
        });
    }
    return row(name, out, `${runs.length} ${m.poll ? "poll capture(s)" : "capture(s)"} run twice under one batch id`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
