// A pull destination and a pull source end to end, as two real `hookspool run` processes on
// loopback: signed webhooks over 200 keys land on the public side, whose action is
// pull:laptop; the private side leases them, commits them to its own spool and delivers them
// to a local receiver. Meanwhile, at seeded random moments, each side is killed with kill -9
// three times and restarted on its home, and the private side is also down for 30 s. After the
// drain: every webhook the public side acked 2xx reached the receiver, each event in one
// local batch only and once in the private spool, in the public side's ack order per key, and
// nothing of pull:laptop is left upstream. HOOKSPOOL_E2E_SEED=<n> replays a run's schedule.
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Rng, seededRng } from "../../src/clock.ts";
import { type Hookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const SEED = Number(process.env.HOOKSPOOL_E2E_SEED ?? Date.now() % 1_000_000);
const IN_SECRET = "pull-e2e-inbound-secret";
const TOKEN = "pull-e2e-laptop-token-0123456789";
const KEYS = 200;
/** How long the senders keep starting bursts. */
const LOAD_MS = 35_000;
const OUTAGE_MS = 30_000;
/** Batch states that are not finished: none of pull:laptop may be left in them. */
const PENDING = "('open', 'sealed', 'retry', 'leased')";

/** One webhook as the load sends it: `uid` names it in every document and spool row. */
interface Hook {
  key: string;
  seq: number;
  uid: string;
  /** Sent with an X-Id header, the public source's dedup id; without one the event has none. */
  withId: boolean;
  /** A try failed after the request may have reached the intake (not a refused connection). */
  ambiguous: boolean;
}

interface Payload {
  key: string;
  seq: number;
  uid: string;
  type: string;
}

interface Doc {
  key: string;
  batch_id: number;
  events: Payload[];
}

/** The public source: signed with X-Sig, keyed on the payload's key, its dedup id the X-Id header when sent. */
const TEMPLATE =
  'template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "key", ' +
  'dedup = "header:X-Id", event_type = "type" }';

/** `v` appended to `map`'s list at `key`. */
function append<K, V>(map: Map<K, V[]>, key: K, v: V): void {
  const list = map.get(key);
  if (list) list.push(v);
  else map.set(key, [v]);
}

/** A port free now, for the public intake to listen on across its restarts. */
function freePort(): number {
  const s = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  const port = s.port as number;
  s.stop(true);
  return port;
}

const int = (rng: Rng, lo: number, hi: number) => lo + Math.floor(rng.next() * (hi - lo + 1));

/** One side's `hookspool run` on its home, killed and started again; every incarnation's stderr kept. */
class Side {
  proc: Hookspool | null = null;
  port = 0;
  readonly logs: string[] = [];

  constructor(
    readonly name: string,
    readonly home: string,
  ) {}

  async start(): Promise<void> {
    this.proc = await startHookspool(this.home, ["run"], { listenTimeoutMs: 30_000 });
    this.port = await this.proc.port();
  }

  async kill9(): Promise<void> {
    const p = this.proc;
    this.proc = null;
    if (!p) return;
    p.kill("SIGKILL");
    await p.exited;
    this.logs.push(p.stderr());
  }

  async stop(): Promise<number | null> {
    const p = this.proc;
    this.proc = null;
    if (!p) return null;
    p.kill("SIGTERM");
    const code = await p.exited;
    this.logs.push(p.stderr());
    return code;
  }

  /** Rows of its spool, read-only, while the process may be writing it. */
  rows<T>(sql: string): T[] {
    const db = new Database(join(this.home, "spool.db"), { readonly: true });
    try {
      return db.query(sql).all() as T[];
    } finally {
      db.close();
    }
  }
}

function writePublic(home: string, port: number): void {
  writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "token"), TOKEN, { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[intake]
listen = "127.0.0.1:${port}"

[dispatch]
poll_s = 0.1
heartbeat_s = 1
lease_grace_s = 5

[sources.demo]
${TEMPLATE}
secrets.secret = { file = "${join(home, "in-secret")}" }
quiet_s = 0.2
max_s = 1
max_events = 20
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "${join(home, "token")}" }
timeout_s = 5
api_rate = "100000/min"
`,
  );
}

function writePrivate(home: string, upstreamPort: number, receiverPort: number): void {
  writeFileSync(join(home, "token"), TOKEN, { mode: 0o600 });
  writeFileSync(
    join(home, "config.toml"),
    `[intake]
listen = "127.0.0.1:0"

[dispatch]
poll_s = 0.1
heartbeat_s = 1
lease_grace_s = 5
backoff_base_s = 0.1
backoff_cap_s = 0.5

[sources.office]
action = "local"
quiet_s = 0.2
max_s = 1
max_events = 50

[sources.office.pull]
url = "http://127.0.0.1:${upstreamPort}"
destination = "laptop"
token = { file = "${join(home, "token")}" }
wait_s = 1
max = 50
allow_insecure = true
consumer = "e2e-box"

[destinations.local]
type = "http"
url = "http://127.0.0.1:${receiverPort}/in"
allow_insecure = true
unsigned = true
timeout_s = 2
max_inflight = 16
`,
  );
}

/** Each key's bursts, fixed by the seed: a pause before each, then that many webhooks back to back. */
function plan(rng: Rng): { key: string; bursts: { pauseMs: number; hooks: Hook[] }[] }[] {
  return Array.from({ length: KEYS }, (_, k) => {
    const key = `k${String(k).padStart(3, "0")}`;
    let seq = 0;
    let at = 0;
    const bursts: { pauseMs: number; hooks: Hook[] }[] = [];
    for (;;) {
      const pauseMs = int(rng, 200, 9_000);
      at += pauseMs;
      if (at > LOAD_MS) break;
      const hooks = Array.from({ length: int(rng, 1, 4) }, () => {
        seq++;
        return { key, seq, uid: `${key}-${seq}`, withId: rng.next() >= 0.25, ambiguous: false };
      });
      bursts.push({ pauseMs, hooks });
    }
    return { key, bursts };
  });
}

test("pull: every acked webhook delivered here once, in order per key, through kill -9 on both sides", async () => {
  console.log(`pull e2e seed=${SEED} (HOOKSPOOL_E2E_SEED=${SEED} replays this schedule)`);
  const rng = seededRng(SEED);
  const t0 = performance.now();
  const at = () => `${((performance.now() - t0) / 1000).toFixed(1)}s`;
  const receiver = new Receiver<Doc>({});
  const pub = new Side("public", tempDir("hookspool-pull-pub-"));
  const priv = new Side("private", tempDir("hookspool-pull-priv-"));
  const upstreamPort = freePort();
  writePublic(pub.home, upstreamPort);
  writePrivate(priv.home, upstreamPort, receiver.port);

  const hooks = new Map<string, Hook>();
  /** Per key, the uids in the order the public side acked them. */
  const ackOrder = new Map<string, string[]>();
  const refusedAnswers: string[] = [];
  let requests = 0;

  /** POST one webhook until the public side acks it 2xx; a try that fails is sent again, body unchanged. */
  async function send(h: Hook): Promise<void> {
    const body = JSON.stringify({ key: h.key, seq: h.seq, uid: h.uid, type: "tick" } satisfies Payload);
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}`,
    };
    if (h.withId) headers["X-Id"] = `id-${h.uid}`;
    for (;;) {
      requests++;
      try {
        const res = await fetch(`http://127.0.0.1:${upstreamPort}/hooks/demo`, {
          method: "POST",
          body,
          headers,
          signal: AbortSignal.timeout(10_000),
        });
        await res.arrayBuffer();
        if (res.status >= 200 && res.status < 300) {
          append(ackOrder, h.key, h.uid);
          return;
        }
        // A 4xx other than 429 would be refused again: a fault of this test or of the intake.
        if (res.status < 500 && res.status !== 429) {
          refusedAnswers.push(`${h.uid}: ${res.status}`);
          return;
        }
      } catch (e) {
        // Refused: nothing reached the intake. Anything else (a reset as it is killed, a timeout)
        // may have come after its commit, so a webhook without a dedup id may now be there twice.
        if ((e as { code?: string }).code !== "ECONNREFUSED") h.ambiguous = true;
      }
      await Bun.sleep(100);
    }
  }

  const schedule = plan(seededRng(SEED + 1));
  for (const k of schedule) for (const b of k.bursts) for (const h of b.hooks) hooks.set(h.uid, h);
  const faults: string[] = [];
  const note = (what: string) => {
    faults.push(`${at()} ${what}`);
    console.log(`pull e2e ${at()} ${what}`);
  };

  let codes = {};
  try {
    await pub.start();
    await priv.start();
    note(`started: public :${pub.port}, private :${priv.port}, ${hooks.size} webhooks over ${KEYS} keys`);
    const load = Promise.all(
      schedule.map(async (k) => {
        for (const b of k.bursts) {
          await Bun.sleep(b.pauseMs);
          for (const h of b.hooks) await send(h);
        }
      }),
    );
    // The public side: three kills, each restarted at once on the same home and port.
    const publicFaults = (async () => {
      for (let i = 1; i <= 3; i++) {
        await Bun.sleep(int(rng, 3_000, 12_000));
        await pub.kill9();
        note(`kill -9 public (${i} of 3)`);
        await pub.start();
        note("public restarted");
      }
    })();
    // The private side: three kills restarted at once, and one 30 s outage, in a seeded order.
    const privateFaults = (async () => {
      const steps = ["kill", "kill", "kill", "outage"];
      for (let i = steps.length - 1; i > 0; i--) {
        const j = int(rng, 0, i);
        [steps[i], steps[j]] = [steps[j], steps[i]];
      }
      for (const step of steps) {
        await Bun.sleep(int(rng, 2_000, 8_000));
        await priv.kill9();
        note(`kill -9 private${step === "outage" ? `, down for ${OUTAGE_MS / 1000} s` : ""}`);
        if (step === "outage") await Bun.sleep(OUTAGE_MS);
        await priv.start();
        note("private restarted");
      }
    })();
    await Promise.all([load, publicFaults, privateFaults]);
    note(`load and faults done: ${hooks.size} webhooks acked in ${requests} requests`);

    // The drain: every acked webhook here, and nothing of pull:laptop unfinished on either side.
    const seen = new Set<string>();
    let read = 0;
    await waitFor(
      "every acked webhook delivered here and both spools drained",
      () => {
        for (; read < receiver.got.length; read++) for (const e of receiver.got[read].doc.events) seen.add(e.uid);
        if (seen.size < hooks.size) return false;
        const up = pub.rows<{ n: number }>(
          `SELECT COUNT(*) AS n FROM batches WHERE destination = 'pull:laptop' AND state IN ${PENDING}`,
        );
        const here = priv.rows<{ n: number }>(`SELECT COUNT(*) AS n FROM batches WHERE state IN ${PENDING}`);
        return up[0].n === 0 && here[0].n === 0;
      },
      90_000,
    );
    note("drained");

    expect(refusedAnswers).toEqual([]);
    // Every webhook was acked (the senders try until it is), once per key in send order.
    for (const k of schedule)
      expect(ackOrder.get(k.key) ?? []).toEqual(k.bursts.flatMap((b) => b.hooks.map((h) => h.uid)));
    // A webhook without a dedup id whose try was cut off after it may have committed upstream
    // may be there twice, as two events: the sender sent it twice. Every other one is there once.
    const once = (h: Hook) => h.withId || !h.ambiguous;

    // The receiver: each event in one local batch only (the same batch delivered again after a
    // kill is the same document), every one of them one the load sent.
    const batchesOf = new Map<string, Set<number>>();
    for (const d of receiver.got)
      for (const e of d.doc.events) {
        const set = batchesOf.get(e.uid) ?? new Set<number>();
        set.add(d.doc.batch_id);
        batchesOf.set(e.uid, set);
      }
    const unknown = [...batchesOf.keys()].filter((uid) => !hooks.has(uid));
    expect(unknown).toEqual([]);
    const missing = [...hooks.keys()].filter((uid) => !batchesOf.has(uid));
    expect(missing).toEqual([]);
    const inTwoBatches = [...hooks.values()]
      .filter((h) => once(h) && (batchesOf.get(h.uid)?.size ?? 0) > 1)
      .map((h) => `${h.uid} in local batches ${[...(batchesOf.get(h.uid) ?? [])].join(",")}`);
    expect(inTwoBatches).toEqual([]);

    // The private spool: each acked event exactly once (a batch leased again is a duplicate here).
    const stored = new Map<string, number>();
    for (const r of priv.rows<{ payload: string }>("SELECT payload FROM events")) {
      const uid = (JSON.parse(r.payload) as Payload).uid;
      stored.set(uid, (stored.get(uid) ?? 0) + 1);
    }
    const wrongCount = [...hooks.values()]
      .filter((h) => {
        const n = stored.get(h.uid) ?? 0;
        return once(h) ? n !== 1 : n < 1;
      })
      .map((h) => `${h.uid} x${stored.get(h.uid) ?? 0}`);
    expect(wrongCount).toEqual([]);
    expect(stored.size).toBe(hooks.size);

    // Per key, the order of first local delivery is the order the public side acked them.
    const firstSeen = new Map<string, string[]>();
    const first = new Set<string>();
    for (const d of receiver.got)
      for (const e of d.doc.events)
        if (!first.has(e.uid)) {
          first.add(e.uid);
          append(firstSeen, e.key, e.uid);
        }
    const outOfOrder = schedule
      .filter((k) => JSON.stringify(firstSeen.get(k.key) ?? []) !== JSON.stringify(ackOrder.get(k.key) ?? []))
      .map((k) => `${k.key}: delivered ${firstSeen.get(k.key)?.join(" ")}; acked ${ackOrder.get(k.key)?.join(" ")}`);
    expect(outOfOrder).toEqual([]);

    // Nothing left upstream, nothing dead on either side.
    const upstream = pub.rows<{ state: string; n: number }>(
      "SELECT state, COUNT(*) AS n FROM batches WHERE destination = 'pull:laptop' GROUP BY state",
    );
    expect(upstream.filter((r) => r.state !== "delivered")).toEqual([]);
    expect(priv.rows("SELECT id, state, last_error FROM batches WHERE state <> 'delivered'")).toEqual([]);
    // What the faults made happen: leases that ran out upstream, batches leased again, and
    // their events duplicates here.
    const twice = [...hooks.values()].filter((h) => (stored.get(h.uid) ?? 0) > 1).length;
    const [expired] = pub.rows<{ n: number }>("SELECT COUNT(*) AS n FROM attempts WHERE error = 'lease expired'");
    const [dups] = priv.rows<{ n: number }>("SELECT COALESCE(SUM(dup_count), 0) AS n FROM dedup");
    note(
      `checked: ${receiver.got.length} local deliveries, ` +
        `${upstream.reduce((n, r) => n + r.n, 0)} upstream batches, ${expired.n} upstream leases expired, ` +
        `${dups.n} duplicates here, ${[...hooks.values()].filter((h) => h.ambiguous).length} cut-off tries, ` +
        `${twice} sent twice without an id`,
    );
  } finally {
    codes = { public: await pub.stop(), private: await priv.stop() };
    receiver.stop();
    console.log(`pull e2e seed=${SEED} faults:\n  ${faults.join("\n  ")}`);
  }
  expect(codes).toEqual({ public: 0, private: 0 });
  for (const side of [pub, priv])
    for (const log of side.logs) {
      expect(log).not.toContain(TOKEN);
      expect(log).not.toContain(IN_SECRET);
    }
}, 300_000);
