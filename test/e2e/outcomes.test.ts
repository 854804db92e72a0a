// Awaited outcomes end to end, as real processes: `hookspool run` delivers to a receiver that
// answers 202 and reports the run's outcome later, on the intake's POST /outcomes/<webhook-id>
// signed with a stock Standard Webhooks library, or with `hookspool outcome`. A forged, unsigned,
// misaddressed, unknown or repeated report is refused and changes nothing; kill -9 of the
// process while batches await loses none of them, and they settle after the restart. Each case
// runs on SQLite and on a real PostgreSQL server (skipped, saying so, without one).
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { SQL } from "bun";
import { Webhook } from "standardwebhooks";
import { openSpool } from "../../src/store/sqlite/db.ts";
import { PG_BIN, PG_SKIP_MESSAGE, serverForSuite } from "../helpers/pg.ts";
import { type Hookspool, runHookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

const IN_SECRET = "outcomes-inbound-secret";
const OUT_SECRET = `whsec_${Buffer.from("outcomes-outbound-secret-bytes").toString("base64")}`;
const OTHER_SECRET = `whsec_${Buffer.from("someone-else-entirely-secret").toString("base64")}`;

const running: Hookspool[] = [];
afterEach(() => {
  for (const h of running.splice(0)) h.kill("SIGKILL");
});

/** What a case reads of the spool, on either backend (its SQL is the same on both). */
interface Rows {
  count(where: string): Promise<number>;
  state(batchId: number): Promise<string>;
  close(): Promise<void>;
}

/** The backend a case runs on: the config's [spool] table, the env its processes need, and a reader. */
interface Backend {
  spoolTable: string;
  env: Record<string, string>;
  /** Ready for `hookspool run` (PostgreSQL's schema is made by `hookspool migrate`). */
  prepare(home: string): Promise<void>;
  rows(home: string): Rows;
}

function sqliteRows(home: string): Rows {
  const db = openSpool(join(home, "spool.db"));
  return {
    count: async (where) => (db.db.query(`SELECT COUNT(*) AS n FROM ${where}`).get() as { n: number }).n,
    state: async (id) => (db.db.query("SELECT state FROM batches WHERE id = ?").get(id) as { state: string }).state,
    close: async () => db.close(),
  };
}

function pgRows(url: string): Rows {
  const db = new SQL(url, { max: 1 });
  return {
    count: async (where) => Number((await db.unsafe(`SELECT COUNT(*) AS n FROM ${where}`))[0].n),
    state: async (id) => (await db`SELECT state FROM batches WHERE id = ${id}`)[0].state,
    close: () => db.close(),
  };
}

function home(backend: Backend, receiverPort: number): string {
  const h = tempDir();
  writeFileSync(join(h, "in-secret"), IN_SECRET, { mode: 0o600 });
  writeFileSync(join(h, "out-secret"), OUT_SECRET, { mode: 0o600 });
  writeFileSync(
    join(h, "config.toml"),
    `${backend.spoolTable}[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.05
backoff_base_s = 0.1
backoff_cap_s = 0.4

[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "type" }
secrets.secret = { file = "${join(h, "in-secret")}" }
quiet_s = 0
max_s = 0
max_events = 1
action = "agent"

[destinations.agent]
type = "http"
url = "http://127.0.0.1:${receiverPort}/run"
allow_insecure = true
secret = { file = "${join(h, "out-secret")}" }
outcome = "await"
`,
  );
  return h;
}

async function send(port: number, topic: string, n: number): Promise<void> {
  const body = JSON.stringify({ topic, type: "tick", n });
  const res = await fetch(`http://127.0.0.1:${port}/hooks/demo`, {
    method: "POST",
    body,
    headers: {
      "Content-Type": "application/json",
      "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}`,
    },
  });
  expect(res.status).toBe(202);
}

/** A report of the run's outcome, signed as our deliveries are (the delivery's own id as webhook-id). */
function signed(
  id: string,
  body: unknown,
  secret = OUT_SECRET,
  headerId = id,
): { headers: Record<string, string>; body: string } {
  const text = JSON.stringify(body);
  const at = new Date();
  const signature = new Webhook(secret).sign(headerId, at, text);
  return {
    body: text,
    headers: {
      "Content-Type": "application/json",
      "webhook-id": headerId,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": signature,
    },
  };
}

const post = (port: number, id: string, r: { headers: Record<string, string>; body: string }) =>
  fetch(`http://127.0.0.1:${port}/outcomes/${id}`, { method: "POST", ...r });

/** The three cases on one backend. */
function cases(make: () => Backend): void {
  test(
    "the intake's /outcomes endpoint settles only a report signed for the delivery; the CLI " + "settles too",
    async () => {
      const backend = make();
      const receiver = new Receiver<{ batch_id: number; key: string }>({ secret: OUT_SECRET, answer: () => 202 });
      const h = home(backend, receiver.port);
      await backend.prepare(h);
      const hs = await startHookspool(h, ["run"], { env: backend.env });
      running.push(hs);
      const port = await hs.port();
      const db = backend.rows(h);
      try {
        await send(port, "alpha", 1);
        await send(port, "alpha", 2);
        await send(port, "beta", 1);
        await waitFor("two deliveries, one per key", () => receiver.got.length === 2);
        const [a, b] = ["alpha", "beta"].map((k) => receiver.got.find((d) => d.doc.key === k));
        if (!a || !b) throw new Error("a key was not delivered");
        // The receiver counts a delivery as it arrives, before the dispatcher records its 202.
        await waitFor("alpha awaiting", async () => (await db.state(a.doc.batch_id)) === "awaiting");
        const ok = { status: "ok" };

        // Refused, each changing nothing: unsigned, signed with another secret, signed for another id,
        // an id no delivery has, a body that is not an outcome.
        expect(
          (await post(port, a.webhookId, { headers: { "Content-Type": "application/json" }, body: JSON.stringify(ok) }))
            .status,
        ).toBe(401);
        expect((await post(port, a.webhookId, signed(a.webhookId, ok, OTHER_SECRET))).status).toBe(401);
        expect((await post(port, a.webhookId, signed(a.webhookId, ok, OUT_SECRET, b.webhookId))).status).toBe(401);
        expect((await post(port, "hs_nobody_9", signed("hs_nobody_9", ok))).status).toBe(404);
        expect((await post(port, a.webhookId, signed(a.webhookId, { status: "maybe" }))).status).toBe(400);
        expect(await db.state(a.doc.batch_id)).toBe("awaiting");
        expect(receiver.got).toHaveLength(2);

        // Signed for the delivery: it settles, and the key's next batch goes.
        const res = await post(port, a.webhookId, signed(a.webhookId, ok));
        expect(res.status).toBe(200);
        expect(await res.json()).toEqual({ status: "delivered", batch_id: a.doc.batch_id });
        expect(await db.state(a.doc.batch_id)).toBe("delivered");
        await waitFor("alpha's second batch delivered", () => receiver.got.length === 3);
        // The same report again: settled already.
        expect((await post(port, a.webhookId, signed(a.webhookId, ok))).status).toBe(409);

        // The CLI: a failed run retries (a new delivery), then ok ends it; a repeat is exit 1.
        const failed = await runHookspool(
          h,
          ["outcome", b.webhookId, "failed", "--reason", "model timed out", "--json"],
          { env: backend.env },
        );
        expect(failed.code).toBe(0);
        expect(JSON.parse(failed.out)).toMatchObject({ batch: b.doc.batch_id, state: "retry" });
        await waitFor("beta delivered again", () => receiver.got.filter((d) => d.doc.key === "beta").length === 2);
        const again = receiver.got.filter((d) => d.doc.key === "beta")[1];
        expect(again.webhookId).not.toBe(b.webhookId);
        await waitFor("beta awaiting again", async () => (await db.state(b.doc.batch_id)) === "awaiting");
        expect((await runHookspool(h, ["outcome", again.webhookId, "ok"], { env: backend.env })).code).toBe(0);
        expect(await db.state(b.doc.batch_id)).toBe("delivered");
        const repeat = await runHookspool(h, ["outcome", again.webhookId, "ok"], { env: backend.env });
        expect(repeat.code).toBe(1);
        expect(repeat.err).toContain("does not await");
        const unknown = await runHookspool(h, ["outcome", "hs_nobody_9", "ok"], { env: backend.env });
        expect(unknown.code).toBe(1);
        expect((await runHookspool(h, ["outcome", again.webhookId, "maybe"], { env: backend.env })).code).toBe(2);
        // /metrics counts the outcomes as attempts of class agent, never as the receiver's answers.
        const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(metrics).toMatch(/^hookspool_attempts_30d\{[^}]*klass="agent"[^}]*\} \d+$/m);
        expect(metrics).not.toMatch(/^hookspool_answers_30d\{/m);
        // Nothing of a reason reaches a log line.
        expect(hs.stderr()).not.toContain("model timed out");
        expect(receiver.unverified).toEqual([]);
      } finally {
        await db.close();
        receiver.stop();
      }
    },
  );

  test("kill -9 while batches await loses none; after the restart their outcomes settle them", async () => {
    const backend = make();
    const receiver = new Receiver<{ batch_id: number; key: string }>({ secret: OUT_SECRET, answer: () => 202 });
    const h = home(backend, receiver.port);
    await backend.prepare(h);
    let hs = await startHookspool(h, ["run"], { env: backend.env });
    running.push(hs);
    let port = await hs.port();
    const keys = ["k1", "k2", "k3", "k4", "k5"];
    for (const k of keys) await send(port, k, 1);
    await send(port, "k1", 2);
    await waitFor("one delivery per key", () => receiver.got.length === keys.length);
    const db = backend.rows(h);
    try {
      await waitFor("all five awaiting", async () => (await db.count("batches WHERE state = 'awaiting'")) === 5);
      hs.kill("SIGKILL");
      await hs.exited;
      hs = await startHookspool(h, ["run"], { env: backend.env });
      running.push(hs);
      port = await hs.port();
      // Still awaiting after the restart (no lease to recover, nothing redelivered), k1's second batch still held.
      expect(await db.count("batches WHERE state = 'awaiting'")).toBe(5);
      expect(receiver.got).toHaveLength(keys.length);
      // The five awaited before the kill (a copy: k1's second delivery joins the live list meanwhile).
      for (const d of receiver.got.slice(0, keys.length))
        expect((await post(port, d.webhookId, signed(d.webhookId, { status: "ok" }))).status).toBe(200);
      await waitFor("k1's second batch delivered and awaiting", () => receiver.got.length === keys.length + 1);
      const last = receiver.got[keys.length];
      expect(last.doc.key).toBe("k1");
      const res = await post(port, last.webhookId, signed(last.webhookId, { status: "ok" }));
      const said = `${res.status} ${await res.text()}`;
      expect(said).toBe(`200 {"status":"delivered","batch_id":${last.doc.batch_id}}`);
      expect(await db.count("batches WHERE state <> 'delivered'")).toBe(0);
      expect(await db.count("events")).toBe(6);
    } finally {
      await db.close();
      receiver.stop();
    }
  });

  test("a report that comes before the 2xx is recorded waits for it, then settles the batch", async () => {
    const backend = make();
    // A fast run: the receiver reports the outcome, then answers 202 a moment later, so the report
    // reaches the intake while the dispatcher still waits for that answer.
    let port = 0;
    const reports: Promise<number>[] = [];
    const receiver = new Receiver<{ batch_id: number; key: string }>({
      secret: OUT_SECRET,
      answer: async (d) => {
        const id = d.headers["webhook-id"];
        reports.push(post(port, id, signed(id, { status: "ok" })).then((r) => r.status));
        await Bun.sleep(300);
        return 202;
      },
    });
    const h = home(backend, receiver.port);
    await backend.prepare(h);
    const hs = await startHookspool(h, ["run"], { env: backend.env });
    running.push(hs);
    port = await hs.port();
    const db = backend.rows(h);
    try {
      await send(port, "early", 1);
      await send(port, "early", 2);
      await waitFor(
        "both of the key's batches delivered",
        async () => (await db.count("batches WHERE state = 'delivered'")) === 2,
      );
      expect(await Promise.all(reports)).toEqual([200, 200]);
    } finally {
      await db.close();
      receiver.stop();
    }
  });
}

describe("on SQLite", () =>
  cases(() => ({
    spoolTable: "",
    env: {},
    prepare: async () => {},
    rows: sqliteRows,
  })));

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);
describe.skipIf(!PG_BIN)("on PostgreSQL", () => {
  const server = serverForSuite();
  let n = 0;
  cases(() => {
    const name = `outcomes${++n}`;
    const pg = server();
    const url = `postgres://${pg.user}@localhost/${name}?host=${pg.socketDir}`;
    const env = { HOOKSPOOL_PG_URL: url };
    return {
      spoolTable: `[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n\n`,
      env,
      prepare: async (h) => {
        await pg.createDatabase(name);
        const migrated = await runHookspool(h, ["migrate"], { env });
        if (migrated.code !== 0) throw new Error(`migrate: ${migrated.err}`);
      },
      rows: () => pgRows(url),
    };
  });
});
