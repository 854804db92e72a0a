// `hookspool status` and GET /healthz: one document from both, flipping to degraded
// (200) for each soft reason and to 503 for a hard limit; the human summary names each problem.
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { systemClock } from "../../src/clock.ts";
import { HEARTBEAT_STALE_S } from "../../src/obs/status.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { halfOpenIfCooled, recordTransportFailureTx } from "../../src/store/sqlite/destinations.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { setMetaTx } from "../../src/store/sqlite/meta.ts";
import { writePollBobbin } from "../helpers/bobbins.ts";
import { cli } from "../helpers/cli.ts";
import { startIntake, type TestIntake } from "../helpers/intake.ts";
import { copy, ev } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { LATEST_SCHEMA } from "../../src/store/sqlite/migrate.ts";

const SECRET = "status-test-secret";
const sig = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
const DEST = "hermes:gh";
const MIN_FREE = 1000;

/** gh takes signed requests keyed by "topic"; quiet expects an event every hour; tasks is a poll bobbin's instance. */
const CONFIG = `[limits]
min_free_bytes = ${MIN_FREE}

[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic" }
secrets.secret = { file = "{{secret:gh}}" }
action = "${DEST}"

[sources.quiet]
action = "${DEST}"
expect_every_s = 3600

[bobbins.tasks]
bobbin = "acme.tasks"
outputs = { task = "${DEST}" }
`;

interface Spot {
  t: TestIntake;
  now: number;
  /** The free-space reading the intake sees. */
  disk: { free: number };
}

async function spot(): Promise<Spot> {
  const disk = { free: 50 * 1024 ** 3 };
  // tasks is a poll bobbin's instance, from a private bobbin directory.
  const root = tempDir("hookspool-bobbins-");
  writePollBobbin(root);
  const t = await startIntake(`[spool]\nbobbin_path = ["${root}"]\n\n${CONFIG}`, {
    secrets: { gh: SECRET },
    diskFree: () => disk.free,
  });
  return { t, now: t.clock.now(), disk };
}

async function withSpot(fn: (s: Spot) => Promise<void>): Promise<void> {
  const s = await spot();
  try {
    await fn(s);
  } finally {
    await s.t.stop();
  }
}

function heartbeat(s: Spot, ageS = 0): void {
  setMetaTx(s.t.db.db, "dispatcher_heartbeat_at", s.now - ageS);
  setMetaTx(s.t.db.db, "dispatcher_pid", 4242);
}

/** A sealed batch to hermes:gh (one event). */
function sealed(s: Spot, key = "k"): number {
  const r = enqueue(s.t.db, ev({ source: "gh", key, copies: [copy("gh", DEST, { max_events: 1 })] }));
  if (r.status !== "queued") throw new Error(r.status);
  return r.placed[0].batchId;
}

function deadBatch(s: Spot): number {
  const id = sealed(s, "dead");
  const c = claimBatch(s.t.db, {
    batchId: id,
    destination: DEST,
    now: s.now,
    leaseUntil: s.now + 60,
    host: "h",
    pid: 1,
  });
  if (!c) throw new Error("not claimable");
  markDead(s.t.db, {
    batchId: id,
    attemptId: c.attemptId,
    owner: c.owner,
    now: s.now,
    attempt: { klass: "permanent", status: 422, error: "rejected", durationMs: 3, counted: false },
  });
  return id;
}

async function quarantined(s: Spot): Promise<void> {
  const body = JSON.stringify({ no: "topic" });
  const res = await s.t.post("/hooks/gh", body, { "X-Sig": sig(body) });
  expect(await res.json()).toEqual({ status: "quarantined" });
}

function trip(s: Spot): void {
  const db = s.t.db.db;
  db.transaction(() =>
    recordTransportFailureTx(db, DEST, {
      now: s.now,
      startedAt: s.now,
      tripAfter: 1,
      cooldownInitialS: 30,
      cooldownMaxS: 600,
      error: "connection refused",
    }),
  ).immediate();
}

function pollRow(
  s: Spot,
  p: { createdAgo: number; deliveredAgo?: number; nextIn?: number; skipped?: number; lastBatch?: number },
): void {
  s.t.db.db
    .query(
      `INSERT INTO polls (instance, next_at, last_tick_at, last_batch_id, delivered_at, ` +
        `delivered_tick_at, skipped, created_at)
      VALUES ('tasks', $next, $tick, $batch, $delivered, $deliveredTick, $skipped, $created)`,
    )
    .run({
      next: s.now + (p.nextIn ?? 120),
      tick: p.deliveredAgo === undefined ? null : s.now - p.deliveredAgo - 5,
      batch: p.lastBatch ?? null,
      delivered: p.deliveredAgo === undefined ? null : s.now - p.deliveredAgo,
      deliveredTick: p.deliveredAgo === undefined ? null : s.now - p.deliveredAgo - 5,
      skipped: p.skipped ?? 0,
      created: s.now - p.createdAgo,
    });
}

// biome-ignore lint/suspicious/noExplicitAny: a parsed JSON document
type Doc = any;

/** `hookspool status --json` on the intake's home, its clock pinned to the intake's fake clock. */
async function statusJson(s: Spot): Promise<Doc> {
  const r = await cli(["--home", s.t.home, "status", "--json"], {
    env: { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(s.t.clock.now() - systemClock.now()) },
  });
  const doc = JSON.parse(r.out);
  // status exits 1 exactly while it reports a problem.
  expect(r).toMatchObject({ code: doc.ok ? 0 : 1, err: "" });
  return doc;
}

async function statusText(s: Spot): Promise<string> {
  const r = await cli(["--home", s.t.home, "status"], {
    env: { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(s.t.clock.now() - systemClock.now()) },
  });
  expect(r).toMatchObject({ code: r.out.startsWith("hookspool: ok\n") ? 0 : 1, err: "" });
  return r.out;
}

async function healthz(s: Spot): Promise<{ code: number; doc: Doc }> {
  const res = await fetch(`${s.t.url}/healthz`);
  expect(res.headers.get("content-type")).toContain("application/json");
  return { code: res.status, doc: await res.json() };
}

const AGE = /_age_s$|^next_in_s$/;

/** Ages (which move with each reader's clock) and filesystem readings become placeholders. */
function shape(doc: Doc): Doc {
  return JSON.parse(JSON.stringify(doc), (k, v) => {
    if (AGE.test(k) && typeof v === "number") return "<age>";
    if ((k === "spool_bytes" || k === "disk_free_bytes") && typeof v === "number" && v > 0) return "<bytes>";
    return v;
  });
}

function ages(doc: Doc, path = ""): Record<string, number> {
  const out: Record<string, number> = {};
  if (doc === null || typeof doc !== "object") return out;
  for (const [k, v] of Object.entries(doc)) {
    if (AGE.test(k) && typeof v === "number") out[`${path}${k}`] = v;
    else Object.assign(out, ages(v, `${path}${k}.`));
  }
  return out;
}

/**
 * /healthz and `status --json` for the same state: the same document, ages within a second of
 * each other. spool.writable_checked_age_s is left to its own test below.
 */
async function both(s: Spot): Promise<{ code: number; doc: Doc }> {
  const h = await healthz(s);
  const c = await statusJson(s);
  const strip = (d: Doc) => {
    const x = structuredClone(d);
    delete x.spool.writable_checked_age_s;
    return x;
  };
  expect(shape(strip(c))).toEqual(shape(strip(h.doc)));
  const [ha, ca] = [ages(strip(h.doc)), ages(strip(c))];
  for (const [k, v] of Object.entries(ha)) expect({ k, close: Math.abs(v - ca[k]) <= 1 }).toEqual({ k, close: true });
  return h;
}

describe("status and /healthz agree and flip for each soft reason (200, degraded)", () => {
  test("a clean state with a fresh heartbeat: ok, 200, nothing degraded, no polls block", async () => {
    await withSpot(async (s) => {
      heartbeat(s, 2);
      const body = JSON.stringify({ topic: "t1" });
      expect((await s.t.post("/hooks/gh", body, { "X-Sig": sig(body) })).status).toBe(202);
      s.t.clock.advance(3);
      s.now = s.t.clock.now();
      const { code, doc } = await both(s);
      expect(code).toBe(200);
      expect(doc).toMatchObject({ ok: true, degraded: [], schema: LATEST_SCHEMA, issues_open: 0 });
      expect(doc.dispatcher).toEqual({ alive: true, heartbeat_age_s: 5, pid: 4242 });
      expect(doc.spool.last_enqueue_age_s).toBe(3);
      expect(doc.batches).toEqual({
        open: 1,
        sealed: 0,
        leased: 0,
        retry: 0,
        awaiting: 0,
        delivered: 0,
        dead: 0,
        dropped: 0,
        quarantined: 0,
      });
      expect(doc.oldest_pending_age_s).toBe(3);
      expect(doc.destinations[DEST]).toMatchObject({ state: "closed", oldest_pending_age_s: 3 });
      expect(doc.sources).toEqual({
        gh: { last_event_age_s: 3 },
        quiet: { last_event_age_s: null, expected_every_s: 3600, silent: false },
        tasks: { last_event_age_s: null },
      });
      expect(doc).not.toHaveProperty("polls");
      expect(doc.spool_bytes).toBeGreaterThan(0);
      expect(doc.disk_free_bytes).toBe(50 * 1024 ** 3);
      expect(Object.keys(doc)).toEqual([
        "ok",
        "degraded",
        "backend",
        "schema",
        "dispatcher",
        "spool",
        "batches",
        "dead_by_reason",
        "oldest_pending_age_s",
        "destinations",
        "sources",
        "issues_open",
        "spool_bytes",
        "disk_free_bytes",
      ]);
    });
  });

  const CASES: [string, (s: Spot) => void | Promise<void>, string, (doc: Doc) => void][] = [
    [
      "no dispatcher heartbeat at all",
      () => {},
      "dispatcher: no heartbeat yet",
      (doc) => expect(doc.dispatcher).toEqual({ alive: false, heartbeat_age_s: null, pid: null }),
    ],
    [
      `a heartbeat older than ${HEARTBEAT_STALE_S} s`,
      (s) => heartbeat(s, 31),
      "dispatcher: heartbeat 31s old",
      (doc) => expect(doc.dispatcher).toEqual({ alive: false, heartbeat_age_s: 31, pid: 4242 }),
    ],
    [
      "a dead batch",
      (s) => {
        heartbeat(s);
        deadBatch(s);
      },
      "batches: 1 dead (1 rejected)",
      (doc) => {
        expect(doc.batches).toMatchObject({ dead: 1, quarantined: 0 });
        expect(doc.dead_by_reason).toMatchObject({ rejected: 1, exhausted: 0 });
      },
    ],
    [
      "a quarantined batch",
      async (s) => {
        heartbeat(s);
        await quarantined(s);
      },
      "batches: 1 quarantined",
      (doc) => {
        expect(doc.batches).toMatchObject({ dead: 0, quarantined: 1 });
        expect(doc.issues_open).toBe(1);
        expect(doc.destinations).toEqual({}); // quarantine is no destination
      },
    ],
    [
      "an open breaker",
      (s) => {
        heartbeat(s);
        sealed(s);
        trip(s);
      },
      `destination ${DEST}: breaker open`,
      (doc) =>
        expect(doc.destinations[DEST]).toMatchObject({
          state: "open",
          opened_at: doc.destinations[DEST].opened_at,
          cooldown_s: 30,
          last_error: "connection refused",
        }),
    ],
    [
      "a half-open breaker",
      (s) => {
        sealed(s);
        trip(s);
        s.t.clock.advance(31);
        s.now = s.t.clock.now();
        heartbeat(s);
        expect(halfOpenIfCooled(s.t.db, DEST, s.now)).toBe(true);
      },
      `destination ${DEST}: breaker half_open`,
      (doc) => expect(doc.destinations[DEST]).toMatchObject({ state: "half_open", cooldown_s: 30 }),
    ],
    [
      "a silent source (expect_every_s passed since its last event)",
      (s) => {
        heartbeat(s);
        setMetaTx(s.t.db.db, "source:quiet:last_event_at", s.now - 3601);
      },
      "source quiet: silent",
      (doc) => expect(doc.sources.quiet).toEqual({ last_event_age_s: 3601, expected_every_s: 3600, silent: true }),
    ],
    [
      "a stale poll (no delivered tick for 3 x every_s since it was first scheduled)",
      (s) => {
        heartbeat(s);
        pollRow(s, { createdAgo: 3 * 900 + 1 });
      },
      "poll tasks: stale",
      (doc) => expect(doc.polls.tasks).toMatchObject({ every_s: 900, stale: true, delivered_at: null }),
    ],
  ];

  test.each(CASES)("%s", async (_name, setup, reason, check) => {
    await withSpot(async (s) => {
      await setup(s);
      const { code, doc } = await both(s);
      expect(code).toBe(200);
      expect(doc.ok).toBe(false);
      expect(doc.degraded).toEqual([reason]);
      check(doc);
    });
  });

  test("just inside each limit is still ok", async () => {
    await withSpot(async (s) => {
      heartbeat(s, HEARTBEAT_STALE_S - 5);
      setMetaTx(s.t.db.db, "source:quiet:last_event_at", s.now - 3599);
      pollRow(s, { createdAgo: 3 * 900 - 1 });
      const { code, doc } = await both(s);
      expect(code).toBe(200);
      expect(doc).toMatchObject({ ok: true, degraded: [] });
      expect(doc.dispatcher.alive).toBe(true);
      expect(doc.sources.quiet.silent).toBe(false);
      expect(doc.polls.tasks.stale).toBe(false);
    });
  });

  test("a poll first scheduled long ago but with a recent delivered tick is not stale", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      pollRow(s, { createdAgo: 86400, deliveredAgo: 600 });
      const { doc } = await both(s);
      expect(doc.ok).toBe(true);
      expect(doc.polls.tasks).toMatchObject({ stale: false, delivered_age_s: 600 });
    });
  });
});

describe("the polls block", () => {
  test("appears only with a polls row, with every one of its fields", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      expect(await statusJson(s)).not.toHaveProperty("polls");
      expect((await healthz(s)).doc).not.toHaveProperty("polls");
      const tick = sealed(s, "poll");
      pollRow(s, { createdAgo: 7200, deliveredAgo: 488, nextIn: 412, skipped: 2, lastBatch: tick });
      const { doc } = await both(s);
      expect(doc.polls).toEqual({
        tasks: {
          every_s: 900,
          next_at: s.now + 412,
          next_in_s: 412,
          last_tick_at: s.now - 493,
          delivered_at: s.now - 488,
          delivered_tick_at: s.now - 493,
          delivered_age_s: 488,
          pending: true, // its last tick's batch is still sealed
          skipped: 2,
          stale: false,
        },
      });
    });
  });
});

describe("per-destination fields", () => {
  test("oldest_pending_age_s always; opened_at, cooldown_s and last_error for an open breaker", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      sealed(s);
      enqueue(s.t.db, ev({ source: "gh", key: "x", copies: [copy("gh", "hermes:other")] }));
      s.t.clock.advance(41);
      s.now = s.t.clock.now();
      heartbeat(s);
      trip(s);
      const { doc } = await both(s);
      const { inflight: _a, ...open } = doc.destinations[DEST];
      // A hermes destination is paced to the gateway's rate by default; nothing of its window used.
      expect(open).toEqual({
        state: "open",
        opened_at: s.now,
        cooldown_s: 30,
        oldest_pending_age_s: 41,
        last_error: "connection refused",
        rate: {
          limit: 30,
          window_s: 60,
          used: 0,
          next_free_at: null,
          next_free_in_s: null,
          from: "the gateway's rate_limit ([hermes] rate_limit = 30)",
        },
      });
      const { inflight: _b, ...closed } = doc.destinations["hermes:other"];
      expect(closed).toEqual({ state: "closed", oldest_pending_age_s: 41 });
      expect(doc.oldest_pending_age_s).toBe(41);
    });
  });

  test("inflight: each destination says how many deliveries are in flight (its leased batches)", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      const id = sealed(s, "a");
      sealed(s, "b");
      enqueue(s.t.db, ev({ source: "gh", key: "x", copies: [copy("gh", "hermes:other")] }));
      expect(
        claimBatch(s.t.db, {
          batchId: id,
          destination: DEST,
          now: s.now,
          leaseUntil: s.now + 60,
          host: "h",
          pid: 4242,
        }),
      ).not.toBeNull();
      const { doc } = await both(s);
      expect(doc.batches.leased).toBe(1);
      expect(doc.destinations[DEST].inflight).toBe(1);
      expect(doc.destinations["hermes:other"].inflight).toBe(0);
      expect((await statusJson(s)).destinations[DEST].inflight).toBe(1);
    });
  });
});

describe("hard limits (503)", () => {
  test("free disk below limits.min_free_bytes: /healthz 503 naming the limit; back to 200 when it clears", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      expect((await healthz(s)).code).toBe(200);
      s.disk.free = MIN_FREE - 1;
      s.t.clock.advance(6); // the statfs reading is cached for 5 s
      setMetaTx(s.t.db.db, "dispatcher_heartbeat_at", s.t.clock.now());
      const { code, doc } = await healthz(s);
      expect(code).toBe(503);
      expect(doc.ok).toBe(false);
      expect(doc.degraded).toEqual([`spool: free disk below limits.min_free_bytes (${MIN_FREE})`]);
      expect(doc.disk_free_bytes).toBe(MIN_FREE - 1);
      s.disk.free = MIN_FREE;
      s.t.clock.advance(6);
      setMetaTx(s.t.db.db, "dispatcher_heartbeat_at", s.t.clock.now());
      const after = await healthz(s);
      expect(after.code).toBe(200);
      expect(after.doc).toMatchObject({ ok: true, degraded: [] });
    });
  });

  test("soft problems with a hard limit: still 503, the hard reason first", async () => {
    await withSpot(async (s) => {
      deadBatch(s);
      s.disk.free = 1;
      s.t.clock.advance(6);
      const { code, doc } = await healthz(s);
      expect(code).toBe(503);
      expect(doc.degraded).toEqual([
        `spool: free disk below limits.min_free_bytes (${MIN_FREE})`,
        "dispatcher: no heartbeat yet",
        "batches: 1 dead (1 rejected)",
      ]);
    });
  });
});

describe("spool.writable_checked_age_s", () => {
  test("status reports the same writability proof /healthz does (a recent enqueue or the last probe)", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      s.t.clock.advance(100);
      s.now = s.t.clock.now();
      heartbeat(s);
      const h = await healthz(s); // no recent enqueue: it probes now
      expect(h.doc.spool.writable_checked_age_s).toBe(0);
      s.t.clock.advance(10);
      const c = await statusJson(s);
      expect(c.spool.writable_checked_age_s).not.toBeNull();
      expect(Math.abs(c.spool.writable_checked_age_s - 10)).toBeLessThanOrEqual(1);
      const again = await healthz(s);
      expect(again.doc.spool.writable_checked_age_s).toBe(10);
    });
  });
});

describe("the human summary names each problem", () => {
  test("every reason at once, one line each, and the destination table", async () => {
    await withSpot(async (s) => {
      heartbeat(s, 45);
      deadBatch(s);
      await quarantined(s);
      sealed(s);
      trip(s);
      setMetaTx(s.t.db.db, "source:quiet:last_event_at", s.now - 7200);
      pollRow(s, { createdAgo: 86400 });
      const doc = (await both(s)).doc;
      const reasons = [
        "dispatcher: heartbeat 45s old",
        "batches: 1 dead (1 rejected)",
        "batches: 1 quarantined",
        `destination ${DEST}: breaker open`,
        "source quiet: silent",
        "poll tasks: stale",
      ];
      expect([...doc.degraded].sort()).toEqual([...reasons].sort());
      const text = await statusText(s);
      expect(text).toStartWith(`hookspool: ${reasons.length} problem(s)\n`);
      for (const r of reasons) expect(text).toContain(`\n  - ${r}\n`);
      expect(text).toMatch(/^dispatcher\s+not running \(heartbeat 45s ago, pid 4242\)$/m);
      expect(text).toMatch(
        /^batches\s+0 open, 1 sealed, 0 leased, 0 retry, 0 awaiting, 0 delivered, 1 dead, 0 dropped, 1 quarantined$/m,
      );
      expect(text).toMatch(new RegExp(`^${DEST}\\s+open\\s+.*connection refused$`, "m"));
      expect(text).toMatch(/^quiet\s+2h ago\s+60m\s+yes$/m);
      expect(() => JSON.parse(text)).toThrow();
    });
  });

  test("ok says so", async () => {
    await withSpot(async (s) => {
      heartbeat(s);
      const text = await statusText(s);
      expect(text).toStartWith("hookspool: ok\n");
      expect(text).toMatch(/^dispatcher\s+alive \(heartbeat 0s ago, pid 4242\)$/m);
    });
  });
});
