// The crash points on PostgreSQL, with two intakes and two dispatchers on one database: in each
// scenario one intake and one dispatcher are armed (HOOKSPOOL_TEST_HOOK) and kill themselves
// with SIGKILL at their point, mid-load, while the others go on. The senders go through a
// "load balancer" that tries the other intake when one does not answer, as a real one would.
// Afterwards: both armed processes died at their points, every acked event was delivered, none
// twice in two batches, no batch with two contents, in order per key, every batch delivered.
// A large body's crash point, between its kept file and the commit, runs on its own: one `run`.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash, createHmac } from "node:crypto";
import { existsSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { BODY_GRACE_S } from "../../src/bodies.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../helpers/pg.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor, within } from "../helpers/proc.ts";
import { type Delivery, Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const SECRET = "pg-crash-in-secret";
const KEYS = 4;
const PER_KEY = 12;

interface Doc {
  key: string;
  batch_id: number;
  content_hash: string;
  count: number;
  events: { id: string; key: string; seq: number }[];
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
pool = 3

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
quiet_s = 0.2
max_s = 0.5
max_events = 5
action = "receiver"

[destinations.receiver]
type = "http"
url = "http://127.0.0.1:${receiverPort}/hook"
allow_insecure = true
unsigned = true
timeout_s = 2
max_inflight = 4
`
  );
}

/** One request through the "load balancer": each intake in turn until one acks, a few rounds. */
async function post(ports: number[], first: number, body: string): Promise<boolean> {
  const sig = `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
  for (let a = 0; a < 8; a++) {
    const port = ports[(first + a) % ports.length];
    try {
      const res = await fetch(`http://127.0.0.1:${port}/hooks/load`, {
        method: "POST",
        body,
        headers: { "Content-Type": "application/json", "X-Sig": sig },
      });
      const answer = ((await res.json().catch(() => ({}))) as { status?: string }).status;
      // Any 2xx is an answer (a quarantined request is kept, not an event of the load).
      if (res.status >= 200 && res.status < 300)
        return (res.status === 202 && answer === "queued") || (res.status === 200 && answer === "duplicate");
    } catch {
      // that intake is gone: the next one
    }
    await Bun.sleep(20 * (a + 1));
  }
  return false;
}

async function scenario(pg: PgServer, name: string, intakePoint: string, dispatchPoint: string): Promise<string[]> {
  const database = name.replace(/[^a-z0-9]/g, "_");
  await pg.createDatabase(database);
  // The password is the planted secret (the server trusts the socket and ignores it).
  const url = `postgres://${pg.user}:${SECRET_SENTINEL}@localhost/${database}?host=${pg.socketDir}`;
  const env = { HOOKSPOOL_PG_URL: url };
  const receiver = new Receiver<Doc>({ holdMs: 5, answer: () => 204 });
  const homes = [0, 1, 2, 3].map(() => {
    const home = tempDir("hookspool-pgcrash-");
    writeFileSync(join(home, "in-secret"), SECRET, { mode: 0o600 });
    writeFileSync(join(home, "config.toml"), config(home, receiver.port));
    return home;
  });
  const db = new SQL(url, { max: 2 });
  const procs: Hookspool[] = [];
  const problems: string[] = [];
  try {
    const migrated = await runHookspool(homes[0], ["migrate"], { env });
    if (migrated.code !== 0) throw new Error(`migrate: ${migrated.err}`);
    const armedIntake = await startHookspool(homes[0], ["intake"], { env, hook: intakePoint });
    const intake = await startHookspool(homes[1], ["intake"], { env });
    const armedDispatch = await startHookspool(homes[2], ["dispatch"], { env, hook: dispatchPoint });
    const dispatch = await startHookspool(homes[3], ["dispatch"], { env });
    procs.push(armedIntake, intake, armedDispatch, dispatch);
    const ports = await Promise.all([armedIntake.port(), intake.port()]);

    // One chain per key (its sequence committed in order), the chains in parallel.
    const acked = new Set<string>();
    await Promise.all(
      Array.from({ length: KEYS }, async (_, k) => {
        for (let seq = 0; seq < PER_KEY; seq++) {
          const id = `${name}-k${k}-${seq}`;
          if (await post(ports, seq + k, JSON.stringify({ id, key: `k${k}`, seq, type: "load" }))) acked.add(id);
          // A signed body the source cannot read: quarantined (202, not an event of the load).
          if (intakePoint.startsWith("quarantine.") && seq % 4 === 1) await post(ports, seq + k, "{not json");
        }
      }),
    );
    if (acked.size < KEYS * PER_KEY)
      problems.push(`${KEYS * PER_KEY - acked.size} requests never acked by either intake`);
    // Both armed processes reached their points and died there.
    for (const [p, what] of [
      [armedIntake, intakePoint],
      [armedDispatch, dispatchPoint],
    ] as const) {
      const code = await within(p.exited, 20_000, `the process armed at ${what} to die`).catch(() => "alive");
      if (code !== null) problems.push(`the process armed at ${what} did not die there (exit ${code})`);
    }
    await waitFor(
      `${name}: every batch delivered`,
      async () =>
        Number(
          (
            await db`SELECT COUNT(*)::int AS n FROM batches WHERE state <> 'delivered' AND destination <> 'quarantine'`
          )[0].n,
        ) === 0,
      30_000,
    );
    if (
      intakePoint.startsWith("quarantine.") &&
      Number(
        (await db`SELECT COUNT(*)::int AS n FROM batches WHERE destination = 'quarantine' AND state = 'dead'`)[0].n,
      ) === 0
    )
      problems.push("no request was quarantined");

    const byBatch = new Map<number, Delivery<Doc>>();
    for (const r of receiver.got) {
      const first = byBatch.get(r.doc.batch_id);
      if (!first) byBatch.set(r.doc.batch_id, r);
      else if (first.doc.content_hash !== r.doc.content_hash)
        problems.push(`batch ${r.doc.batch_id} delivered with two contents`);
    }
    const batchOf = new Map<string, number>();
    for (const { doc } of byBatch.values()) {
      for (const e of doc.events) {
        const other = batchOf.get(e.id);
        if (other !== undefined && other !== doc.batch_id)
          problems.push(`event ${e.id} in batches ${other} and ${doc.batch_id}`);
        batchOf.set(e.id, doc.batch_id);
      }
    }
    for (const id of acked) if (!batchOf.has(id)) problems.push(`event ${id} acked but never delivered`);
    // Per key: event rows and sequence numbers only go up across the key's deliveries.
    const perKey = new Map<string, Delivery<Doc>[]>();
    for (const r of receiver.got.filter((r) => !r.abandoned))
      perKey.set(r.doc.key, [...(perKey.get(r.doc.key) ?? []), r]);
    for (const [key, list] of perKey) {
      list.sort((a, b) => a.startMs - b.startMs);
      let lastRow = 0;
      let lastSeq = -1;
      const seen = new Set<number>();
      for (const r of list) {
        if (seen.has(r.doc.batch_id)) continue; // a redelivery after a lost mark carries the same content
        seen.add(r.doc.batch_id);
        r.doc.events.forEach((e, i) => {
          const row = r.doc.event_meta[i]?.id ?? 0;
          if (row <= lastRow) problems.push(`key ${key}: event row ${row} after ${lastRow}`);
          if (e.seq <= lastSeq) problems.push(`key ${key}: seq ${e.seq} after ${lastSeq}`);
          lastRow = Math.max(lastRow, row);
          lastSeq = Math.max(lastSeq, e.seq);
        });
      }
    }
    for (const p of procs)
      if (p.stderr().includes(SECRET_SENTINEL) || p.stderr().includes(pg.socketDir))
        problems.push("a log line carries the database URL or its password");
    return problems.map((p) => `${name}: ${p}`);
  } finally {
    for (const p of procs) if (p.proc.exitCode === null && !p.proc.signalCode) p.kill("SIGKILL");
    receiver.stop();
    await db.close();
  }
}

// Pairs of points, one intake's and one dispatcher's, run side by side (each on its own database).
const SCENARIOS: [string, string, string][] = [
  ["before-commit", "enqueue.before_commit", "claim.before_commit"],
  ["after-commit", "intake.after_commit", "deliver.after_response"],
  ["savepoint-mark", "enqueue.after_savepoint", "mark.before_commit"],
  ["quarantine-seal", "quarantine.before_commit", "seal.before_commit"],
  ["first-request", "enqueue.before_commit", "deliver.before_request"],
];

test.skipIf(!PG_BIN)(
  "crash points on PostgreSQL, two intakes and two dispatchers: nothing acked is lost, nothing " +
    "delivered twice with two contents, order per key holds",
  async () => {
    const pg = server as PgServer;
    // Every scenario to its end (its processes stopped) before the test ends, even when one fails.
    const settled = await Promise.allSettled(SCENARIOS.map(([name, i, d]) => scenario(pg, name, i, d)));
    const problems = settled.flatMap((r, i) =>
      r.status === "fulfilled" ? r.value : [`${SCENARIOS[i][0]}: ${(r.reason as Error).message}`],
    );
    expect(problems.slice(0, 30)).toEqual([]);
  },
  120_000,
);

/**
 * Killed after a large body's file was kept and before the transaction that names it, on
 * PostgreSQL: no 2xx, no row in the database, and the file is an orphan that the restarted run's
 * body sweep (maintenance's, under its lock) removes once it is past the grace; the sender's
 * retry is accepted and delivered with the whole body, its file named by its row.
 */
test.skipIf(!PG_BIN)(
  "intake.after_body_file on PostgreSQL: the orphan file is swept, the retry delivered whole",
  async () => {
    const pg = server as PgServer;
    await pg.createDatabase("after_body_file");
    const url = `postgres://${pg.user}:${SECRET_SENTINEL}@localhost/after_body_file?host=${pg.socketDir}`;
    const env = { HOOKSPOOL_PG_URL: url };
    const receiver = new Receiver<{ events: { id: string; pad: string }[] }>({ answer: () => 204 });
    const home = tempDir("hookspool-pgcrash-body-");
    writeFileSync(join(home, "in-secret"), SECRET, { mode: 0o600 });
    // Above [spool] inline_max_bytes (256 KiB), below both caps: kept in a file, delivered inline.
    const text = config(home, receiver.port)
      .replace("max_events = 5\n", "max_events = 5\nmax_body_bytes = 4194304\n")
      .replace("max_inflight = 4\n", "max_inflight = 4\nmax_body_bytes = 8388608\n");
    writeFileSync(join(home, "config.toml"), text);
    const pad = "x".repeat(2_700_000);
    const body = JSON.stringify({ id: "big-1", key: "k0", seq: 0, type: "load", pad });
    const sha = createHash("sha256").update(body).digest("hex");
    const file = join(home, "bodies", sha);
    const send = (port: number) =>
      fetch(`http://127.0.0.1:${port}/hooks/load`, {
        method: "POST",
        body,
        headers: { "X-Sig": `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}` },
      });
    const db = new SQL(url, { max: 1 });
    const procs: Hookspool[] = [];
    try {
      const migrated = await runHookspool(home, ["migrate"], { env });
      expect(migrated.code, migrated.err).toBe(0);
      const armed = await startHookspool(home, ["run"], { env, hook: "intake.after_body_file" });
      procs.push(armed);
      const first = await send(await armed.port()).then(
        (r) => `answered ${r.status}`,
        () => "dropped",
      );
      expect(first, "killed before COMMIT, the sender gets no answer").toBe("dropped");
      await within(armed.exited, 15_000, "the run armed at intake.after_body_file to die");
      expect(armed.proc.signalCode, armed.stderr().slice(-400)).toBe("SIGKILL");
      expect(Number((await db`SELECT COUNT(*)::int AS n FROM events`)[0].n), "a row survived the kill").toBe(0);
      expect(existsSync(file), "the body file was kept (fsync'd) before the kill").toBe(true);

      // The sweep leaves files younger than its grace (an intake may be about to commit): age it.
      const old = Date.now() / 1000 - 2 * BODY_GRACE_S;
      utimesSync(file, old, old);
      const again = await startHookspool(home, ["run"], { env });
      procs.push(again);
      const port = await again.port();
      await waitFor("the body sweep to remove the orphan", () => !existsSync(file), 15_000);
      const retry = await send(port);
      expect([retry.status, await retry.json()]).toEqual([202, { status: "queued" }]);
      await waitFor("the retry's delivery", () => receiver.got.length > 0, 15_000);
      expect(receiver.got.map((d) => d.doc.events.map((e) => [e.id, e.pad.length]))).toEqual([[["big-1", pad.length]]]);
      expect(existsSync(file), "the retry's body file").toBe(true);
      const rows = await db`SELECT body_file FROM events`;
      expect(rows.map((r: { body_file: string }) => r.body_file)).toEqual([sha]);
      for (const p of procs) expect(p.stderr()).not.toContain(SECRET_SENTINEL);
    } finally {
      for (const p of procs) if (p.proc.exitCode === null && !p.proc.signalCode) p.kill("SIGKILL");
      receiver.stop();
      await db.close();
    }
  },
  60_000,
);

if (!PG_BIN) test("PostgreSQL crash points", () => console.info(PG_SKIP_MESSAGE));
