// The pull API over real HTTP, on both backends: a pull destination's heads leased in FIFO
// order per key, the document a push would have sent, acks fenced by the lease (a stale or
// forged one refused and never touching the holder's attempt), retry and dead as for any
// destination, an expired lease ready again; and what it refuses: no token, a wrong one,
// another destination's, an unknown destination, an oversized max or wait, a bad ack body, a
// request over api_rate, a spool that cannot take the lease's write (503). No token reaches a
// log line.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { parseLeaseId, PULL_MAX_LEASE } from "../../src/intake/pull-wire.ts";
import { copy, ev } from "../helpers/spool.ts";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { LOG_LINES, startIntake } from "../helpers/intake.ts";
import { sqliteStores } from "../../src/store/open.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const TOKEN = "pull-token-laptop-0123456789";
const OTHER = "pull-token-desk-9876543210";

const CONFIG = `[dispatch]
lease_grace_s = 10

[sources.gh]
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "{{secret:laptop}}" }
timeout_s = 30

[destinations."pull:desk"]
token = { file = "{{secret:desk}}" }
api_rate = "3/min"
`;

const auth = (token = TOKEN) => ({ Authorization: `Bearer ${token}`, "X-Hookspool-Consumer": "laptop-1" });

interface Leased {
  lease: string;
  deadline: number;
  batch_id: number;
  webhook_id: string;
  attempt: number;
  document: { source: string; key: string; events: unknown[]; event_meta: { dedup_id: string | null }[] };
}

async function start(open: OpenWorld): Promise<WorldIntake> {
  return startIntakeOn(open, CONFIG, { secrets: { laptop: TOKEN, desk: OTHER } });
}

/** Events for pull:laptop, ready at once, sealed as the dispatcher's tick would. */
async function queue(t: WorldIntake, keys: string[]): Promise<void> {
  for (const [i, key] of keys.entries())
    await t.world.enqueue(
      ev({
        source: "gh",
        key,
        dedupId: `d-${key}-${i}`,
        payload: JSON.stringify({ key, i }),
        copies: [copy("gh", "pull:laptop", { quiet_s: 0, max_s: 0, max_events: 1 })],
      }),
    );
  const d = await t.world.dispatch();
  await d.sealReady(await d.effectiveNow());
}

/** What the API helpers need of an intake: its post. */
type Poster = Pick<WorldIntake, "post">;

async function lease(t: Poster, query = "wait=0&max=10", headers = auth()): Promise<Leased[]> {
  const r = await t.post(`/pull/laptop/lease?${query}`, "", headers);
  expect(r.status).toBe(200);
  return ((await r.json()) as { leases: Leased[] }).leases;
}

async function ack(t: Poster, acks: unknown[], headers = auth()): Promise<string[]> {
  const r = await t.post("/pull/laptop/ack", JSON.stringify({ acks }), headers);
  expect(r.status).toBe(200);
  return ((await r.json()) as { results: { verdict: string }[] }).results.map((x) => x.verdict);
}

onBothWorlds((open) => {
  describe("the pull API", () => {
    test("heads of their keys only, in order; the document a push would send; ok ends them", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a", "a", "b"]);
        const first = await lease(t);
        // a's second batch waits behind its head; b's head is leased beside a's.
        expect(first.map((l) => l.document.key).sort()).toEqual(["a", "b"]);
        const a = first.find((l) => l.document.key === "a") as Leased;
        expect(a.document.source).toBe("gh");
        expect(a.document.event_meta[0].dedup_id).toBe("d-a-0");
        expect(a.document.events).toEqual([{ key: "a", i: 0 }]);
        expect(a.webhook_id).toMatch(/^hs_[0-9a-f]+_\d+$/);
        expect(a.attempt).toBe(1);
        expect(await lease(t)).toEqual([]);
        expect(
          await ack(
            t,
            first.map((l) => ({ lease: l.lease, result: "ok" })),
          ),
        ).toEqual(["recorded", "recorded"]);
        expect(await t.count("batches", "state = 'delivered'")).toBe(2);
        const next = await lease(t);
        expect(next.map((l) => l.document.events)).toEqual([[{ key: "a", i: 1 }]]);
        // Acked twice: the lease is gone.
        expect(await ack(t, [{ lease: a.lease, result: "ok" }])).toEqual(["stale"]);
      } finally {
        await t.stop();
      }
    });

    test("a forged lease id (another nonce) is refused and leaves the holder's lease and attempt be", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a"]);
        const [l] = await lease(t);
        const id = parseLeaseId(l.lease);
        if (!id) throw new Error("unparsable lease id");
        // The spool keeps only the nonce's digest: what a reader of the database sees cannot ack.
        const owner = String(
          (await t.world.rows.get("SELECT lease_owner FROM batches WHERE id = ?", id.batchId))?.lease_owner,
        );
        expect(owner).toMatch(/^pull:laptop-1\/[0-9a-f]{32}:0:\d+$/);
        expect(owner).not.toContain(id.nonce);
        const fromOwner = owner.split("/")[1].split(":")[0];
        expect(await ack(t, [{ lease: `${id.batchId}.${id.attemptId}.${fromOwner}`, result: "ok" }])).toEqual([
          "stale",
        ]);
        const forged = `${id.batchId}.${id.attemptId}.${"0".repeat(32)}`;
        expect(await ack(t, [{ lease: forged, result: "dead" }])).toEqual(["stale"]);
        expect(
          await ack(t, [
            { lease: "12.x.y", result: "ok" },
            { lease: "99999.1." + "a".repeat(32), result: "ok" },
          ]),
        ).toEqual(["unknown", "unknown"]);
        expect(await t.count("attempts", "finished_at IS NULL")).toBe(1);
        expect(await t.count("batches", "state = 'leased'")).toBe(1);
        expect(await ack(t, [{ lease: l.lease, result: "ok" }])).toEqual(["recorded"]);
      } finally {
        await t.stop();
      }
    });

    test("retry backs the batch off with the consumer's reason; dead makes it a dead letter", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a", "b"]);
        const leases = await lease(t);
        const [ra, rb] = [leases[0], leases[1]];
        expect(
          await ack(t, [
            { lease: ra.lease, result: "retry", reason: "agent busy" },
            { lease: rb.lease, result: "dead", reason: "cannot parse" },
          ]),
        ).toEqual(["recorded", "recorded"]);
        const a = await t.world.rows.get("SELECT state, last_error, attempts FROM batches WHERE id = ?", ra.batch_id);
        expect(a).toMatchObject({ state: "retry", last_error: "agent busy" });
        expect(Number(a?.attempts)).toBe(1);
        const b = await t.world.rows.get("SELECT state, last_error FROM batches WHERE id = ?", rb.batch_id);
        expect(b).toMatchObject({ state: "dead", last_error: "cannot parse" });
        // Backing off: not leased again before its retry falls due.
        expect(await lease(t)).toEqual([]);
      } finally {
        await t.stop();
      }
    });

    test("an expired lease makes the batch ready again, and the slow consumer's ack is refused", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a"]);
        const [slow] = await lease(t);
        // Past the lease: timeout_s and lease_grace_s.
        t.clock.advance(30 + 10 + 1);
        const d = await t.world.dispatch();
        expect(await d.recoverLeases({ now: await d.effectiveNow(), startup: false })).toEqual([slow.batch_id]);
        const [again] = await lease(t);
        expect(again.batch_id).toBe(slow.batch_id);
        expect(again.lease).not.toBe(slow.lease);
        expect(await ack(t, [{ lease: slow.lease, result: "ok" }])).toEqual(["stale"]);
        expect(await ack(t, [{ lease: again.lease, result: "ok" }])).toEqual(["recorded"]);
      } finally {
        await t.stop();
      }
    });

    test("a consumer's lease outlives a dispatcher's start; its ack is taken after it", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a"]);
        const [l] = await lease(t);
        const d = await t.world.dispatch();
        expect(await d.recoverLeases({ now: await d.effectiveNow(), startup: true })).toEqual([]);
        expect(await ack(t, [{ lease: l.lease, result: "ok" }])).toEqual(["recorded"]);
      } finally {
        await t.stop();
      }
    });

    test("a waiting lease answers when a batch becomes ready, not at its wait's end", async () => {
      const t = await start(open);
      try {
        const started = performance.now();
        const waiting = lease(t, "wait=20&max=5");
        await queue(t, ["late"]);
        const got = await waiting;
        expect(got.map((l) => l.document.key)).toEqual(["late"]);
        expect(performance.now() - started).toBeLessThan(10_000);
      } finally {
        await t.stop();
      }
    });

    test("refused: no token, a wrong one, another destination's, an unknown name, bad bounds, a bad body", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a"]);
        const status = async (path: string, headers: Record<string, string>, body = "") =>
          (await t.post(path, body, headers)).status;
        const none = await t.post("/pull/laptop/lease?wait=0", "");
        expect(none.status).toBe(401);
        expect(await none.text()).toBe("");
        expect(await status("/pull/laptop/lease?wait=0", auth("wrong-token"))).toBe(401);
        expect(await status("/pull/laptop/lease?wait=0", auth(OTHER))).toBe(401);
        expect(await status("/pull/laptop/lease?wait=0", { Authorization: TOKEN })).toBe(401);
        expect(await status("/pull/nowhere/lease?wait=0", auth())).toBe(401);
        expect(await status("/pull/laptop/other", auth())).toBe(404);
        expect(await status(`/pull/laptop/lease?wait=0&max=${PULL_MAX_LEASE + 1}`, auth())).toBe(400);
        expect(await status("/pull/laptop/lease?wait=0&max=0", auth())).toBe(400);
        expect(await status("/pull/laptop/lease?wait=3600", auth())).toBe(400);
        expect(await status("/pull/laptop/lease?wait=0", { ...auth(), "X-Hookspool-Consumer": "a b" })).toBe(400);
        expect(await status("/pull/laptop/ack", auth(), "{not json")).toBe(400);
        expect(await status("/pull/laptop/ack", auth(), JSON.stringify({ acks: [{ lease: 1, result: "ok" }] }))).toBe(
          400,
        );
        const get = await fetch(`${t.url}/pull/laptop/lease`, { headers: auth() });
        expect(get.status).toBe(405);
        // Nothing was leased by any of them.
        expect(await t.count("batches", "state = 'leased'")).toBe(0);
        const logged = LOG_LINES.join("\n");
        for (const secret of [TOKEN, OTHER, "wrong-token"]) expect(logged).not.toContain(secret);
        // Each refusal is logged, with why and from where, never with the token.
        for (const why of ["token refused", "no such pull destination", "method GET", "bad consumer name"])
          expect(LOG_LINES.some((l) => l.includes("pull refused") && l.includes(why) && l.includes("remote="))).toBe(
            true,
          );
      } finally {
        await t.stop();
      }
    });

    test("a destination's api_rate: over it, 429 with Retry-After", async () => {
      const t = await start(open);
      try {
        const desk = { Authorization: `Bearer ${OTHER}` };
        const codes: number[] = [];
        for (let i = 0; i < 4; i++) codes.push((await t.post("/pull/desk/lease?wait=0", "", desk)).status);
        expect(codes).toEqual([200, 200, 200, 429]);
        const over = await t.post("/pull/desk/lease?wait=0", "", desk);
        expect(Number(over.headers.get("retry-after"))).toBeGreaterThan(0);
        // Another destination's window is its own.
        expect((await t.post("/pull/laptop/lease?wait=0", "", auth())).status).toBe(200);
        t.clock.advance(61);
        expect((await t.post("/pull/desk/lease?wait=0", "", desk)).status).toBe(200);
      } finally {
        await t.stop();
      }
    });
  });
});

describe("the pull API on a spool that refuses writes", () => {
  test("a lease it cannot write is 503 with Retry-After, and nothing is leased", async () => {
    const t = await startIntake(CONFIG, { secrets: { laptop: TOKEN, desk: OTHER }, shareSpool: true });
    try {
      const stores = sqliteStores(t.db, () => {});
      await stores
        .intake()
        .enqueueAll(
          [ev({ source: "gh", copies: [copy("gh", "pull:laptop", { quiet_s: 0, max_s: 0 })] })],
          t.clock.now(),
        );
      const d = await stores.dispatch("test");
      await d.sealReady(await d.effectiveNow());
      t.intakeSpool?.db.run("PRAGMA query_only = ON");
      const r = await t.post("/pull/laptop/lease?wait=0", "", auth());
      expect(r.status).toBe(503);
      expect(r.headers.get("retry-after")).toBe("5");
      expect(t.count("batches", "state = 'leased'")).toBe(0);
      t.intakeSpool?.db.run("PRAGMA query_only = OFF");
      expect((await lease(t)).length).toBe(1);
    } finally {
      await t.stop();
    }
  });
});
