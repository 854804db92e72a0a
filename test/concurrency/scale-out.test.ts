// Scale-out on PostgreSQL: two `hookspool intake` processes and two `hookspool dispatch`
// processes, each in a home of its own as on four hosts, share one database on a throwaway
// server. Four senders (two per intake) post signed requests over loopback; one dispatcher is
// killed with kill -9 while it holds a lease. Every acked event is delivered in exactly one
// batch, never with two contents, in order per key, and the killed dispatcher's lease is
// recovered and delivered by the other.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { PAYLOAD_SENTINEL, SECRET_SENTINEL } from "../helpers/logs.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../helpers/pg.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor, within } from "../helpers/proc.ts";
import { type Delivery, Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";
import type { Sent, SenderReport } from "./sender.ts";

const SENDER = join(import.meta.dir, "sender.ts");
const SENDERS = 4;
const PER_SENDER = 300;
const KEYS = 8;
const MAX_EVENTS = 20;
const MAX_BYTES = 4096;
const IN_SECRET = `in-${SECRET_SENTINEL}`;
const OUT_SECRET = `whsec_${Buffer.from(`out-${SECRET_SENTINEL}`).toString("base64")}`;

interface Doc {
  key: string;
  batch_id: number;
  content_hash: string;
  count: number;
  events: { id: string; key: string; sender: number; seq: number }[];
  event_meta: { id: number }[];
}

let server: PgServer | null = null;

beforeAll(async () => {
  if (PG_BIN) server = await startPostgres();
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

function config(home: string, receiverPort: number): string {
  return (
    `[spool]
backend = "postgres"
url = { env = "HOOKSPOOL_PG_URL" }
pool = 4

[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.2
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
# Room for both dispatchers' four workers at once: with the gate holding every delivery, a limit of
# four (the destination's, across dispatchers) could all go to one, and the other never lease.
max_inflight = 8
`
  );
}

test.skipIf(!PG_BIN)(
  "two intakes and two dispatchers on one PostgreSQL database, one dispatcher killed: every acked " +
    "event once, in order per key",
  async () => {
    const pgServer = server as PgServer;
    await pgServer.createDatabase("scaleout");
    // The password is the planted secret (the server trusts the socket and ignores it): no log line may carry it.
    const url = `postgres://${pgServer.user}:${SECRET_SENTINEL}@localhost/scaleout?host=${pgServer.socketDir}`;
    const env = { HOOKSPOOL_PG_URL: url };
    // Every delivery waits at the receiver until the dispatcher to be killed is seen holding a
    // lease, so it is killed with one in its hands: a lease held for a few milliseconds at a
    // time could be missed by every poll until the queue drained.
    let openGate = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const receiver = new Receiver<Doc>({
      secret: OUT_SECRET,
      holdMs: 15,
      answer: async () => {
        await gate;
        return 204;
      },
    });
    const homes = ["intake-a", "intake-b", "dispatch-c", "dispatch-d"].map((name) => {
      const home = tempDir(`hookspool-scaleout-${name}-`);
      writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
      writeFileSync(join(home, "out-secret"), OUT_SECRET, { mode: 0o600 });
      writeFileSync(join(home, "config.toml"), config(home, receiver.port));
      return home;
    });
    const db = new SQL(url, { max: 2 });
    const services: Hookspool[] = [];
    const senders: ReturnType<typeof Bun.spawn>[] = [];
    try {
      const migrated = await runHookspool(homes[0], ["migrate"], { env });
      expect(migrated.code, migrated.err).toBe(0);
      expect(migrated.out).toContain("PostgreSQL schema");
      const intakes = [
        await startHookspool(homes[0], ["intake"], { env }),
        await startHookspool(homes[1], ["intake"], { env }),
      ];
      const dispatchers = [
        await startHookspool(homes[2], ["dispatch"], { env }),
        await startHookspool(homes[3], ["dispatch"], { env }),
      ];
      services.push(...intakes, ...dispatchers);
      const ports = await Promise.all(intakes.map((i) => i.port()));
      await waitFor(
        "both dispatchers' heartbeats",
        async () => Number((await db`SELECT COUNT(*)::int AS n FROM dispatchers`)[0].n) === 2,
      );

      for (let s = 0; s < SENDERS; s++) {
        senders.push(
          Bun.spawn(
            [
              process.execPath,
              SENDER,
              String(ports[s % 2]),
              String(s),
              String(PER_SENDER),
              String(KEYS),
              join(homes[0], "in-secret"),
            ],
            {
              env: { PATH: process.env.PATH, HOME: homes[0], PAYLOAD_MARKER: PAYLOAD_SENTINEL },
              stdout: "pipe",
              stderr: "pipe",
            },
          ),
        );
      }

      // kill -9 of the dispatcher that holds maintenance, while it also holds a lease (its pid is
      // in lease_owner): the other must take over both its lease and maintenance.
      const holderPid = await waitFor("a dispatcher to hold maintenance", async () => {
        const [r] = await db`SELECT value FROM meta WHERE key = 'maintenance_holder'`;
        return r
          ? Number(
              String(JSON.parse(String(r.value)).holder)
                .split(":")
                .pop(),
            )
          : null;
      });
      const victim = dispatchers.find((d) => d.proc.pid === holderPid) as Hookspool;
      expect(victim, "the maintenance holder is one of the two dispatchers").toBeDefined();
      const survivorProc = dispatchers.find((d) => d !== victim) as Hookspool;
      const owner = `:${victim.proc.pid}:`;
      const held = await waitFor(
        "the first dispatcher to hold a lease",
        async () => {
          const rows =
            await db`SELECT id FROM batches WHERE state = 'leased' AND lease_owner LIKE ${`%${owner}%`} LIMIT 1`;
          return rows.length ? Number(rows[0].id) : null;
        },
        20_000,
      );
      victim.kill("SIGKILL");
      expect(await within(victim.exited, 5_000, "the killed dispatcher to go")).toBeNull();
      openGate();

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
      const sent: Sent[] = reports.flatMap((r) => r.sent);
      expect(sent.length).toBe(SENDERS * PER_SENDER);
      const acked = sent.filter((s) => s.acked);
      expect(
        sent
          .filter((s) => !s.acked)
          .map((s) => `event ${s.id}: HTTP ${s.status} ${s.answer}`)
          .slice(0, 20),
      ).toEqual([]);

      await waitFor(
        "every batch delivered by the surviving dispatcher",
        async () => Number((await db`SELECT COUNT(*)::int AS n FROM batches WHERE state <> 'delivered'`)[0].n) === 0,
        40_000,
      );
      expect(survivorProc.proc.exitCode, "the surviving dispatcher stopped").toBeNull();

      // The killed dispatcher's lease expired and was taken over, not lost.
      const recovered = await db`SELECT error FROM attempts WHERE batch_id = ${held}::bigint ORDER BY id`;
      expect(recovered.map((a: { error: string | null }) => a.error)).toContain("lease expired");

      const problems: string[] = receiver.unverified.map((u) => `signature does not verify: ${u}`);
      const sentById = new Map(sent.map((s) => [s.id, s]));
      const byBatch = new Map<number, Delivery<Doc>>();
      for (const r of receiver.got) {
        const first = byBatch.get(r.doc.batch_id);
        if (!first) byBatch.set(r.doc.batch_id, r);
        else if (first.doc.content_hash !== r.doc.content_hash)
          problems.push(`batch ${r.doc.batch_id} delivered with two contents`);
      }
      const batchOf = new Map<string, number>();
      for (const { doc: d } of byBatch.values()) {
        if (d.events.length !== d.count)
          problems.push(`batch ${d.batch_id}: count ${d.count} but ${d.events.length} events`);
        if (d.count > MAX_EVENTS) problems.push(`batch ${d.batch_id}: ${d.count} events > max_events`);
        for (const e of d.events) {
          if (!sentById.has(e.id)) problems.push(`event ${e.id} was never sent`);
          const other = batchOf.get(e.id);
          if (other !== undefined) problems.push(`event ${e.id} is in batches ${other} and ${d.batch_id}`);
          batchOf.set(e.id, d.batch_id);
          if (e.key !== d.key) problems.push(`event ${e.id} (key ${e.key}) in batch ${d.batch_id} of key ${d.key}`);
        }
      }
      for (const s of acked) if (!batchOf.has(s.id)) problems.push(`event ${s.id} was acked but never delivered`);

      // Per key: one batch in flight at a time, batches in id order, events in commit order and
      // every sender's sequence increasing, whichever intake took them and whichever dispatcher delivered.
      const keys = new Map<string, Delivery<Doc>[]>();
      for (const r of receiver.got.filter((r) => r.status === 204 && !r.abandoned))
        keys.set(r.doc.key, [...(keys.get(r.doc.key) ?? []), r]);
      for (const [key, all] of keys) {
        all.sort((a, b) => a.startMs - b.startMs);
        // A batch the killed dispatcher delivered but could not record is delivered again (at
        // least once), with the same content (checked above): the order is that of first deliveries.
        const seen = new Set<number>();
        const list = all.filter((r) => !seen.has(r.doc.batch_id) && seen.add(r.doc.batch_id));
        let lastEvent = 0;
        const lastSeq = new Map<number, number>();
        for (let i = 0; i < list.length; i++) {
          const cur = list[i];
          if (i > 0 && cur.doc.batch_id < list[i - 1].doc.batch_id)
            problems.push(`key ${key}: batch ${cur.doc.batch_id} after the newer ${list[i - 1].doc.batch_id}`);
          if (i > 0 && cur.startMs < list[i - 1].endMs)
            problems.push(`key ${key}: batch ${cur.doc.batch_id} in flight with ${list[i - 1].doc.batch_id}`);
          cur.doc.events.forEach((e, j) => {
            const metaId = cur.doc.event_meta[j]?.id ?? 0;
            if (metaId <= lastEvent) problems.push(`key ${key}: event row ${metaId} after row ${lastEvent}`);
            lastEvent = Math.max(lastEvent, metaId);
            if ((lastSeq.get(e.sender) ?? -1) >= e.seq)
              problems.push(`key ${key}: sender ${e.sender} seq ${e.seq} out of order`);
            lastSeq.set(e.sender, e.seq);
          });
        }
      }
      const [{ n: eventRows }] = await db`SELECT COUNT(*)::int AS n FROM events`;
      if (Number(eventRows) !== batchOf.size)
        problems.push(`${eventRows} event rows, ${batchOf.size} events delivered`);
      expect(problems.slice(0, 40)).toEqual([]);

      // status reads the shared database: both dispatchers' heartbeats (the killed one's going
      // stale), and maintenance taken over by the survivor.
      const survivor = `${hostname()}:${survivorProc.proc.pid}`;
      const doc = await waitFor("the survivor to hold maintenance", async () => {
        const status = await runHookspool(homes[3], ["status", "--json"], { env });
        expect(status.code, status.err).toBe(0);
        const d = JSON.parse(status.out) as {
          batches: { delivered: number };
          dispatchers: { id: string; alive: boolean }[];
          maintenance: { holder: string } | null;
        };
        return d.maintenance?.holder === survivor ? d : null;
      });
      expect(doc.batches.delivered).toBe(byBatch.size);
      expect(doc.dispatchers.map((d) => d.id).sort()).toEqual([`${hostname()}:${victim.proc.pid}`, survivor].sort());
      expect(doc.dispatchers.find((d) => d.id === survivor)?.alive).toBe(true);

      for (const s of [...intakes, survivorProc]) s.kill("SIGTERM");
      const stopping: [string, Hookspool][] = [
        ["intake a", intakes[0]],
        ["intake b", intakes[1]],
        ["the surviving dispatcher", survivorProc],
      ];
      for (const [name, s] of stopping) {
        const what = `${name} to stop cleanly; its log ends: ${s.stderr().slice(-1500)}`;
        expect(await within(s.exited, 15_000, what)).toBe(0);
      }
      for (const s of services) {
        for (const sentinel of [SECRET_SENTINEL, PAYLOAD_SENTINEL])
          expect(s.stderr().includes(sentinel), `a log line carries ${sentinel}`).toBe(false);
        expect(s.stderr().includes(pgServer.socketDir), "a log line carries the database URL").toBe(false);
      }
      console.info(
        `scale-out: ${byBatch.size} batches, ${batchOf.size} events, batch ${held} recovered from the ` +
          `killed dispatcher`,
      );
    } finally {
      openGate();
      for (const p of senders) if (p.exitCode === null && !p.signalCode) p.kill("SIGKILL");
      for (const s of services) if (s.proc.exitCode === null && !s.proc.signalCode) s.kill("SIGKILL");
      receiver.stop();
      await db.close();
    }
  },
  120_000,
);

if (!PG_BIN) test("scale-out suite", () => console.info(PG_SKIP_MESSAGE));
