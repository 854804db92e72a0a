// The concurrency suite: one `hookspool intake` and one `hookspool
// dispatch` over one home, 4 sender processes x 1,000 signed requests on loopback, the
// destination paused for the whole sending phase. Every acked event is delivered in exactly one
// batch, per-key order holds across batches, keys are delivered in parallel, no batch is over
// its bounds, a second dispatcher exits 3, and the database passes quick_check.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool, quickCheck } from "../../src/store/sqlite/db.ts";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor, within } from "../helpers/proc.ts";
import { type Delivery, Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import type { Sent, SenderReport } from "./sender.ts";

const SENDER = join(import.meta.dir, "sender.ts");
const SENDERS = 4;
const PER_SENDER = 1000;
const KEYS = 8;
const MAX_EVENTS = 20;
// An event's share of max_bytes is its payload and its event_meta (~110 bytes here): the small
// keys' 20 events (~270 bytes each) fit, so max_events seals them; the big keys' do not.
const MAX_BYTES = 8192;
const RECEIVER_DELAY_MS = 20;
const IN_SECRET = `in-${SECRET_SENTINEL}`;
const OUT_SECRET = `whsec_${Buffer.from(`out-${SECRET_SENTINEL}`).toString("base64")}`;

function config(home: string, receiverPort: number): string {
  return (
    `[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.03
heartbeat_s = 1
parallel = 4
lease_grace_s = 5
backoff_base_s = 0.1
backoff_cap_s = 0.5

[sources.load]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", ` +
    `event_type = "type", dedup = "id" }
secrets.secret = { file = "${join(home, "in-secret")}" }
quiet_s = 0.3
max_s = 1
max_events = ${MAX_EVENTS}
max_bytes = ${MAX_BYTES}
max_body_bytes = 1024
action = "receiver"

[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${receiverPort}/hook"
allow_insecure = true
secret = { file = "${join(home, "out-secret")}" }
timeout_s = 5
max_inflight = 4
`
  );
}

interface Doc {
  key: string;
  batch_id: number;
  delivery_id: string;
  count: number;
  content_hash: string;
  events: { id: string; key: string; sender: number; seq: number }[];
  event_meta: { id: number }[];
}

type Receipt = Delivery<Doc>;

interface BatchRow {
  id: number;
  key: string;
  state: string;
  count: number;
  bytes: number;
  max_events: number;
  max_bytes: number;
  content_hash: string | null;
}

test("4 senders x 1,000 requests, one intake and one dispatcher: every acked event once, in order, " +
  "bounded", async () => {
  const t0 = performance.now();
  const mark = (label: string) => `${label} ${((performance.now() - t0) / 1000).toFixed(2)}s`;
  const timings: string[] = [];
  const home = tempDir("hookspool-concurrency-");
  writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "out-secret"), OUT_SECRET, { mode: 0o600 });
  // Verifies and records every request, holding each RECEIVER_DELAY_MS so overlaps show.
  const receiver = new Receiver<Doc>({ secret: OUT_SECRET, holdMs: RECEIVER_DELAY_MS, answer: () => 204 });
  writeFileSync(join(home, "config.toml"), config(home, receiver.port));
  const services: Hookspool[] = [];
  const senders: ReturnType<typeof Bun.spawn>[] = [];
  const spool = { current: null as ReturnType<typeof openSpool> | null };
  try {
    // The intake never migrates; the gate is closed before the first event arrives.
    const migrated = await runHookspool(home, ["migrate"]);
    expect(migrated.code, migrated.err).toBe(0);
    const paused = await runHookspool(home, ["pause", "receiver", "--reason", "concurrency suite"]);
    expect(paused.code, paused.err).toBe(0);

    const dispatch = await startHookspool(home, ["dispatch"]);
    services.push(dispatch);
    const intake = await startHookspool(home, ["intake"]);
    services.push(intake);
    const port = await intake.port();
    spool.current = openSpool(join(home, "spool.db"));
    const db = spool.current.db;
    await waitFor("the dispatcher's heartbeat", () =>
      db.query("SELECT value FROM meta WHERE key = 'dispatcher_heartbeat_at'").get(),
    );
    timings.push(mark("services up"));

    // --- sending phase, gate closed -------------------------------------------------------
    for (let s = 0; s < SENDERS; s++) {
      senders.push(
        Bun.spawn(
          [
            process.execPath,
            SENDER,
            String(port),
            String(s),
            String(PER_SENDER),
            String(KEYS),
            join(home, "in-secret"),
          ],
          {
            env: { PATH: process.env.PATH, HOME: home, PAYLOAD_MARKER: PAYLOAD_SENTINEL },
            stdout: "pipe",
            stderr: "pipe",
          },
        ),
      );
    }

    // Two dispatchers, one home: the second exits 3 at once (lock held) while the senders run.
    const second = await startHookspool(home, ["dispatch"]);
    services.push(second);
    const secondCode = await within(second.exited, 10_000, "the second dispatcher to exit");
    expect(secondCode, `second dispatcher: ${second.stderr().slice(-300)}`).toBe(3);
    expect(dispatch.proc.exitCode, "the first dispatcher died when the second started").toBeNull();
    timings.push(mark("second dispatcher exited 3"));

    const reports: SenderReport[] = await Promise.all(
      senders.map(async (p, i) => {
        const [out, err, code] = await Promise.all([
          new Response(p.stdout as ReadableStream).text(),
          new Response(p.stderr as ReadableStream).text(),
          p.exited,
        ]);
        if (code !== 0) throw new Error(`sender ${i} exited ${code}: ${err.slice(-500)}`);
        return JSON.parse(out) as SenderReport;
      }),
    );
    timings.push(mark(`${SENDERS * PER_SENDER} requests sent`));
    const sent: Sent[] = reports.flatMap((r) => r.sent);
    expect(sent.length).toBe(SENDERS * PER_SENDER);
    const acked = sent.filter((s) => s.acked);
    const unacked = sent.filter((s) => !s.acked);
    // On a healthy loopback every request is acked; anything else is a finding to look at.
    expect(unacked.map((s) => `event ${s.id}: HTTP ${s.status} ${s.answer}`).slice(0, 20)).toEqual([]);

    // While the gate was closed nothing was delivered, and the dispatcher still sealed batches.
    expect(receiver.got.length, "a request reached the receiver while the destination was paused").toBe(0);
    const leased = db
      .query<{ id: number; state: string }, []>(
        "SELECT id, state FROM batches WHERE state IN ('leased', 'delivered', 'retry', 'dead')",
      )
      .all();
    expect(leased.map((b) => `batch ${b.id} is ${b.state} while the destination is paused`)).toEqual([]);
    await waitFor(
      "the dispatcher to seal while gated",
      () => (db.query("SELECT COUNT(*) AS n FROM batches WHERE state = 'open'").get() as { n: number }).n === 0,
      5_000,
    );
    const gatedBatches = db
      .query<BatchRow, []>("SELECT id, key, state, count, bytes, max_events, max_bytes, content_hash FROM batches")
      .all();

    // --- delivery phase ----------------------------------------------------------------------
    const resumed = await runHookspool(home, ["resume", "receiver"]);
    expect(resumed.code, resumed.err).toBe(0);
    await waitFor(
      "every batch delivered",
      () => (db.query("SELECT COUNT(*) AS n FROM batches WHERE state <> 'delivered'").get() as { n: number }).n === 0,
      20_000,
    );
    timings.push(mark("every batch delivered"));
    expect(dispatch.proc.exitCode, "the first dispatcher stopped working").toBeNull();

    const problems: string[] = receiver.unverified.map((u) => `signature does not verify: ${u}`);
    const sentById = new Map(sent.map((s) => [s.id, s]));

    // Batches as the receiver saw them: distinct webhook-ids (a lease-expiry redelivery reuses
    // the per-batch id and must carry the same frozen content).
    const byWebhookId = new Map<string, Receipt>();
    for (const r of receiver.got) {
      const first = byWebhookId.get(r.webhookId);
      if (!first) byWebhookId.set(r.webhookId, r);
      else if (first.doc.content_hash !== r.doc.content_hash)
        problems.push(`batch ${r.doc.batch_id}: redelivered (${r.webhookId}) with a different content_hash`);
    }
    const delivered = [...byWebhookId.values()];

    // Every event in exactly one batch; nothing the senders did not send.
    const batchOf = new Map<string, number>();
    for (const r of delivered) {
      const d = r.doc;
      if (d.events.length !== d.count || d.event_meta.length !== d.count)
        problems.push(
          `batch ${d.batch_id}: count ${d.count} but ${d.events.length} events, ${d.event_meta.length} event_meta`,
        );
      for (const e of d.events) {
        if (!sentById.has(e.id)) problems.push(`event ${e.id} in batch ${d.batch_id} was never sent`);
        const other = batchOf.get(e.id);
        if (other === undefined) batchOf.set(e.id, d.batch_id);
        else
          problems.push(
            other === d.batch_id
              ? `event ${e.id} appears twice in batch ${d.batch_id}`
              : `event ${e.id} is in two batches: ${other} and ${d.batch_id}`,
          );
        if (e.key !== d.key)
          problems.push(`event ${e.id} (key ${e.key}) delivered in batch ${d.batch_id} of key ${d.key}`);
      }
    }
    for (const s of acked) {
      if (!batchOf.has(s.id)) problems.push(`event ${s.id} was acked (${s.status} ${s.answer}) but never delivered`);
    }

    // Bounds, as delivered (a document holds at most max_events events and at most
    // max_bytes plus one event of event bytes).
    for (const r of delivered) {
      const d = r.doc;
      const sizes = d.events.map((e) => sentById.get(e.id)?.size ?? 0);
      const bytes = sizes.reduce((a, b) => a + b, 0);
      if (d.count > MAX_EVENTS) problems.push(`batch ${d.batch_id}: ${d.count} events > max_events ${MAX_EVENTS}`);
      if (bytes > MAX_BYTES + Math.max(0, ...sizes))
        problems.push(`batch ${d.batch_id}: ${bytes} event bytes > max_bytes ${MAX_BYTES} + one event`);
    }

    // Per-key order: a key's batches go one at a time (FIFO), and across them the
    // events run in commit order with every sender's sequence numbers increasing.
    const keys = new Map<string, Receipt[]>();
    for (const r of delivered) keys.set(r.doc.key, [...(keys.get(r.doc.key) ?? []), r]);
    for (const [key, list] of keys) {
      list.sort((a, b) => a.startMs - b.startMs);
      for (let i = 1; i < list.length; i++) {
        const prev = list[i - 1];
        const cur = list[i];
        if (cur.doc.batch_id < prev.doc.batch_id)
          problems.push(`key ${key}: batch ${cur.doc.batch_id} delivered after the newer batch ${prev.doc.batch_id}`);
        if (cur.startMs < prev.endMs)
          problems.push(
            `key ${key}: batch ${cur.doc.batch_id} was in flight with batch ${prev.doc.batch_id} (FIFO per key)`,
          );
      }
      let lastEventId = 0;
      const lastSeq = new Map<number, { seq: number; id: string; batch: number }>();
      for (const r of list) {
        r.doc.events.forEach((e, i) => {
          const metaId = r.doc.event_meta[i]?.id ?? 0;
          if (metaId <= lastEventId)
            problems.push(
              `key ${key}: event ${e.id} (row ${metaId}, batch ${r.doc.batch_id}) delivered after row ${lastEventId}`,
            );
          lastEventId = Math.max(lastEventId, metaId);
          const before = lastSeq.get(e.sender);
          if (before && e.seq <= before.seq)
            problems.push(
              `key ${key}: event ${e.id} (seq ${e.seq}, batch ${r.doc.batch_id}) ` +
                `after ${before.id} (seq ${before.seq}, batch ${before.batch})`,
            );
          lastSeq.set(e.sender, { seq: e.seq, id: e.id, batch: r.doc.batch_id });
        });
      }
    }

    // The batches table agrees with what was delivered, and no row is over its bounds.
    const rows = db
      .query<BatchRow, []>("SELECT id, key, state, count, bytes, max_events, max_bytes, content_hash FROM batches")
      .all();
    const deliveredById = new Map(delivered.map((r) => [r.doc.batch_id, r.doc]));
    for (const b of rows) {
      if (b.state !== "delivered") problems.push(`batch ${b.id}: ${b.state}, not delivered`);
      if (b.count > b.max_events || b.count > MAX_EVENTS)
        problems.push(`batch ${b.id}: count ${b.count} > max_events ${b.max_events}`);
      // A batch that would pass max_bytes is sealed before the event joins, so bytes is a
      // true bound whenever one event fits (max_body_bytes 1024 <= max_bytes).
      if (b.bytes > b.max_bytes || b.bytes > MAX_BYTES)
        problems.push(`batch ${b.id}: bytes ${b.bytes} > max_bytes ${b.max_bytes}`);
      const d = deliveredById.get(b.id);
      if (!d) problems.push(`batch ${b.id} (key ${b.key}, ${b.count} events) never reached the receiver`);
      else if (d.count !== b.count || d.content_hash !== b.content_hash)
        problems.push(
          `batch ${b.id}: delivered count ${d.count} ${d.content_hash}, table says ${b.count} ${b.content_hash}`,
        );
    }
    for (const id of deliveredById.keys()) {
      if (!rows.some((b) => b.id === id)) problems.push(`batch ${id} was delivered but has no row`);
    }
    const eventRows = (db.query("SELECT COUNT(*) AS n FROM events").get() as { n: number }).n;
    if (eventRows !== batchOf.size) problems.push(`${eventRows} event rows, ${batchOf.size} events delivered`);

    expect(
      problems.length > 40 ? [...problems.slice(0, 40), `... and ${problems.length - 40} more`] : problems,
    ).toEqual([]);

    // The run exercised what it claims to: both bounds sealed batches while gated, and
    // deliveries of different keys overlapped.
    const maxEventSize = Math.max(...sent.map((s) => s.size));
    expect(
      gatedBatches.some((b) => b.count === MAX_EVENTS),
      "no batch was sealed by max_events",
    ).toBe(true);
    expect(
      gatedBatches.some((b) => b.count < MAX_EVENTS && b.bytes > MAX_BYTES - maxEventSize),
      "no batch was sealed by max_bytes",
    ).toBe(true);
    const { inflight: maxInflight, keys: maxDistinctKeys } = receiver.peaks;
    expect(maxInflight, "deliveries never overlapped").toBeGreaterThan(1);
    expect(maxDistinctKeys, "two keys were never in flight at once").toBeGreaterThan(1);

    // Clean shutdown, then the file is sound.
    spool.current.close();
    spool.current = null;
    intake.kill("SIGTERM");
    dispatch.kill("SIGTERM");
    expect(await intake.exited).toBe(0);
    expect(await dispatch.exited).toBe(0);
    const check = openSpool(join(home, "spool.db"));
    try {
      expect(quickCheck(check)).toEqual([]);
    } finally {
      check.close();
    }
    for (const s of services) {
      for (const sentinel of [SECRET_SENTINEL, PAYLOAD_SENTINEL])
        expect(s.stderr().includes(sentinel), `a log line carries ${sentinel}`).toBe(false);
    }
    timings.push(mark("done"));
    console.info(
      `concurrency: ${rows.length} batches, ${batchOf.size} events, max in ` +
        `flight ${maxInflight}; ${timings.join(", ")}`,
    );
  } finally {
    spool.current?.close();
    for (const p of senders) if (p.exitCode === null && !p.signalCode) p.kill("SIGKILL");
    for (const s of services) if (s.proc.exitCode === null && !s.proc.signalCode) s.kill("SIGKILL");
    receiver.stop();
  }
}, 40_000);
