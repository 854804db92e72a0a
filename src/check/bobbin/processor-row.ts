// The processor row: each accepted capture's payload, as a one-event batch, through the real
// runtime (`hookspool __processor <instance>` in a child with a throwaway HOME and the kit's
// stub answers for any HTTP), twice under one batch id. The first run must succeed and print
// nothing but emits of declared outputs; the second must give the same emits, from the journal
// when the bobbin keeps state.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Capture, Kit } from "../../bobbin/captures.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import { parseConfig } from "../../config/load.ts";
import { selfArgv } from "../../self.ts";
import { type Problem, type Row, row, skipped } from "./row.ts";
import { kitConfig, type Loaded } from "./run-rows.ts";
import type { CheckSubject } from "./subject.ts";

const BATCH_ID = 7001;

interface Run {
  code: number | null;
  out: string;
  err: string;
}

async function runOnce(env: Record<string, string>, instance: string, stdin: string): Promise<Run> {
  const p = Bun.spawn([...selfArgv(), "__processor", instance], { env, stdin: new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** A one-event batch document for a capture, as the dispatcher would write it. */
function documentOf(c: Capture, instance: string, now: number): string {
  const payload = JSON.parse(new TextDecoder().decode(c.request.body)) as unknown;
  const eventType = c.expect.eventType ?? "";
  return JSON.stringify({
    source: instance,
    route: instance,
    key: c.expect.key ?? "kit",
    batch_id: BATCH_ID,
    delivery_id: "kit-delivery",
    attempt: 1,
    count: 1,
    first_at: now,
    last_at: now,
    event_type: eventType,
    event_types: { [eventType]: 1 },
    events: [payload],
    event_meta: [{ id: 1, event_type: eventType, received_at: now, dedup_id: null }],
  });
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
    if (!Object.hasOwn(m.outputs, t) && !Object.hasOwn(m.outputs, "*")) return `an item of event type "${t}", which [outputs] does not declare`;
  }
  return null;
}

const why = (r: Run) => r.err.split("\n").find((l) => l.startsWith("hookspool-permanent: "))?.slice(21) ?? r.err.trim().split("\n").pop()?.slice(0, 200) ?? "";

export async function processorRow(s: CheckSubject, m: Manifest | null, l: Loaded): Promise<Row> {
  const name = "processor";
  if (!m?.processor) return skipped(name, m?.poll ? "a poll bobbin's poller runs with the poll runtime" : "no processor: events go straight to the outputs");
  if (!l.kit) return skipped(name, "captures/kit.toml does not load");
  const kit: Kit = l.kit;
  const captures = l.captures.filter((c) => c.expect.status === 202 && c.expect.word === "queued" && !c.settings);
  if (!captures.length) return skipped(name, "no accepted capture to give it (see the captures row)");
  const tmp = mkdtempSync(join(tmpdir(), "hookspool-kit-processor-"));
  try {
    const instance = kit.instance.name;
    for (const [n, v] of Object.entries(kit.secrets)) writeFileSync(join(tmp, `secret-${n}`), v, { mode: 0o600 });
    const text = kitConfig(s, m, kit, [[instance, { settings: kit.instance.settings }]]).replace(/\{\{secret:([^}]+)\}\}/g, (_, n: string) => join(tmp, `secret-${n}`));
    const { config, problems } = parseConfig(text, "captures/kit.toml", { home: () => tmp });
    const dest = config.destinations[`script:${instance}`];
    if (problems.some((p) => p.level === "error") || !dest?.env) return row(name, [{ file: "captures/kit.toml", message: "the kit's instance does not expand into a processor", fix: "see the captures row" }]);
    const stubs = join(tmp, "http.json");
    writeFileSync(stubs, JSON.stringify(kit.http));
    const out: Problem[] = [];
    for (const [i, c] of captures.entries()) {
      const stateDir = join(tmp, `state-${i}`);
      const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmp, ...dest.env, HOOKSPOOL_BATCH_ID: String(BATCH_ID), HOOKSPOOL_DELIVERY_ID: "kit-delivery", HOOKSPOOL_KIT_HTTP: stubs };
      if (process.env.LANG) env.LANG = process.env.LANG;
      if (m.processor.state) env.HOOKSPOOL_STATE_DIR = stateDir;
      let doc: string;
      try {
        doc = documentOf(c, instance, kit.now ?? 1_700_000_000);
      } catch {
        out.push({ file: c.file, message: "the capture's body is not JSON, so no batch can hold it", fix: "a queued capture's body is the payload the processor gets" });
        continue;
      }
      const first = await runOnce(env, instance, doc);
      if (first.code !== 0) {
        out.push({ file: c.file, message: `the processor exited ${first.code}: ${why(first)}`, fix: `run it on this capture: the batch's events are this body (add [[http]] stubs to captures/kit.toml for the API answers it needs)` });
        continue;
      }
      // The kit maps every declared output, so an item the runtime dropped is of an undeclared type.
      const dropped = /dropped the items of unmapped event types (.+)$/m.exec(first.err)?.[1];
      const bad = dropped ? `items of event type ${dropped}, which [outputs] does not declare` : emitProblem(first.out, m);
      if (bad) out.push({ file: c.file, message: bad, fix: "return items of the event types [outputs] declares, and never print" });
      const second = await runOnce(env, instance, doc);
      if (second.code !== 0 || second.out !== first.out) out.push({ file: c.file, message: "a second run of the same batch gave other emits", fix: "keep state with ctx.saveState, and make items from the batch and the state only" });
      else if (m.processor.state && !second.err.includes("replayed its journal")) out.push({ file: c.file, message: "a second run of the same batch did not replay the journal", fix: "the runtime journals a batch with state; check HOOKSPOOL_STATE_DIR reaches it" });
    }
    return row(name, out, `${captures.length} capture(s) run twice under one batch id`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
