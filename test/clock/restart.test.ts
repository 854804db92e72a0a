// Clock faults across a restart, through the persisted meta.last_tick_at, on real
// `hookspool dispatch` processes: one runs long enough to write its heartbeat and stops; the next
// starts with its wall clock an hour behind (HOOKSPOOL_TEST_CLOCK_OFFSET_S=-3600) and its time
// stands at the persisted last_tick_at; the one after starts a day ahead and delivers everything
// due at once.
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { sealReady } from "../../src/store/sqlite/queue.ts";
import { markRetry } from "../../src/store/sqlite/marks.ts";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { enqueue } from "../../src/store/sqlite/enqueue.ts";
import { getMetaNumber } from "../../src/store/sqlite/meta.ts";
import { type Hookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { copy, ev } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { rows } from "./support.ts";

const wall = () => Date.now() / 1000;

/** SIGTERM and wait: a dispatcher stops cleanly (exit 0). */
async function stop(h: Hookspool): Promise<void> {
  h.kill("SIGTERM");
  expect(await h.exited).toBe(0);
}

test("restarted an hour behind, time stands at the persisted last_tick_at; restarted a day ahead, " +
  "everything due goes at once", async () => {
  const delivered: { key: string; batch: number }[] = [];
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const doc = (await req.json()) as { key: string; batch_id: number };
      delivered.push({ key: doc.key, batch: doc.batch_id });
      return new Response("ok");
    },
  });
  const home = tempDir();
  writeFileSync(
    join(home, "config.toml"),
    `[dispatch]
poll_s = 0.05
heartbeat_s = 0.2
lease_grace_s = 5

[sources.s]
action = "out"

[destinations.out]
type = "http"
url = "http://127.0.0.1:${receiver.port}/hook"
allow_insecure = true
unsigned = true
timeout_s = 2
`,
  );
  const dbPath = join(home, "spool.db");
  const running: Hookspool[] = [];
  const start = async (offset?: number) => {
    const h = await startHookspool(home, ["dispatch"], {
      env: offset === undefined ? {} : { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(offset) },
    });
    running.push(h);
    return h;
  };
  let spool: SqliteSpool | null = null;
  try {
    // 1. A dispatcher on the true clock, until it has persisted a heartbeat twice.
    const first = await start();
    const seen = new Set<number>();
    await waitFor("two heartbeats", async () => {
      try {
        const s = openSpool(dbPath);
        try {
          const t = getMetaNumber(s, "last_tick_at");
          if (t !== null) seen.add(t);
        } finally {
          s.close();
        }
      } catch {
        // not created or migrated yet
      }
      return seen.size >= 2;
    });
    await stop(first);

    // 2. Batches seeded around the persisted tick L, as a previous run would have left them.
    const clock = new FakeClock(0);
    spool = openSpool(dbPath, { clock });
    const L = getMetaNumber(spool, "last_tick_at") as number;
    expect(Math.abs(L - wall())).toBeLessThan(5);
    const put = (key: string, at: number, window: { quiet_s: number; max_s: number }) => {
      clock.set(at);
      const r = enqueue(
        spool as SqliteSpool,
        ev({ key, copies: [copy("s", "out", window)], payload: JSON.stringify({ key }) }),
      );
      if (r.status !== "queued") throw new Error(r.status);
      return r.placed[0].batchId;
    };
    /** A sealed batch that failed once and backs off until `due`. */
    const backingOff = (key: string, due: number) => {
      const id = put(key, L - 700, { quiet_s: 0, max_s: 0 });
      sealReady(spool as SqliteSpool, L - 700);
      const c = claimBatch(spool as SqliteSpool, {
        batchId: id,
        destination: "out",
        now: L - 690,
        leaseUntil: L - 600,
        host: "earlier",
        pid: 1,
      });
      if (!c) throw new Error("claim");
      markRetry(spool as SqliteSpool, {
        batchId: id,
        attemptId: c.attemptId,
        owner: c.owner,
        now: L - 689,
        nextAttemptAt: due,
        attempt: { klass: "transport", status: 503, error: "http 503", durationMs: 3, counted: false },
      });
      return id;
    };
    const dueEarlier = backingOff("due-earlier", L - 600); // between the wall an hour behind and L: due at now_eff = L
    const dueAfter = backingOff("due-after", L + 0.5); // just after L: the real clock passes it within a second
    const quiet = put("quiet", L - 0.5, { quiet_s: 1, max_s: 600 }); // its quiet window ends at L + 0.5
    const long = put("long", L - 100, { quiet_s: 3600, max_s: 86400 });
    expect(wall() - 3600).toBeLessThan(L - 600);
    const untouched = [dueAfter, quiet, long];
    const snapshot = () => ({
      batches: rows(spool as SqliteSpool, "batches", `id IN (${untouched.join(",")})`),
      events: rows(spool as SqliteSpool, "events", `batch_id IN (${untouched.join(",")})`),
      attempts: rows(spool as SqliteSpool, "attempts", `batch_id IN (${untouched.join(",")})`),
    });
    const before = snapshot();

    // 3. Restarted an hour behind: now_eff = L, and it stays there.
    const behind = await start(-3600);
    const stateOf = (id: number) =>
      ((spool as SqliteSpool).db.query("SELECT state FROM batches WHERE id = ?").get(id) as { state: string }).state;
    await waitFor("the batch due before L delivered", () => stateOf(dueEarlier) === "delivered");
    const heartbeatAt = () => getMetaNumber(spool as SqliteSpool, "dispatcher_heartbeat_at") as number;
    await waitFor("a heartbeat from the clock an hour behind", () => heartbeatAt() < L - 3000);
    // Let the real clock run well past the quiet window and the backoff, with heartbeats beating.
    const firstBehindBeat = heartbeatAt();
    await waitFor(
      "real time past L + 1.5 and more heartbeats",
      () => wall() > L + 1.5 && heartbeatAt() > firstBehindBeat + 0.3,
    );
    // The batch due before L went out, stamped with now_eff = L, not with the wall clock.
    const sent = spool.db
      .query("SELECT started_at FROM attempts WHERE batch_id = ? ORDER BY id DESC LIMIT 1")
      .get(dueEarlier) as { started_at: number };
    expect(sent.started_at).toBe(L);
    expect(
      (spool.db.query("SELECT delivered_at FROM batches WHERE id = ?").get(dueEarlier) as { delivered_at: number })
        .delivered_at,
    ).toBe(L);
    // Nothing else became due early: no attempt, no seal, no fact rewritten; last_tick_at not moved back.
    expect(delivered.map((d) => d.key)).toEqual(["due-earlier"]);
    expect(snapshot()).toEqual(before);
    expect(getMetaNumber(spool, "last_tick_at")).toBe(L);
    await stop(behind);
    expect(getMetaNumber(spool, "last_tick_at")).toBe(L);

    // 4. Restarted a day ahead: every backoff, every window, due at once.
    const ahead = await start(86400);
    const t0 = performance.now();
    await waitFor("everything delivered", () => {
      const n = spool?.db
        .query(`SELECT COUNT(*) AS n FROM batches WHERE state = 'delivered' AND id IN (${untouched.join(",")})`)
        .get() as { n: number };
      return n.n === untouched.length;
    });
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(delivered.map((d) => d.key).sort()).toEqual(["due-after", "due-earlier", "long", "quiet"]);
    const after = rows(spool, "batches", `id IN (${untouched.join(",")})`);
    for (const b of after) {
      expect(b.delivered_at as number).toBeGreaterThan(L + 86000);
      const was = before.batches.find((x) => x.id === b.id) as Record<string, unknown>;
      expect({ first_at: b.first_at, last_at: b.last_at }).toEqual({ first_at: was.first_at, last_at: was.last_at });
    }
    // The windows closed on the jump, in the first ticks after start.
    const sealed = after.filter((b) => b.id === quiet || b.id === long).map((b) => b.sealed_at as number);
    expect(Math.max(...sealed) - Math.min(...sealed)).toBeLessThan(1);
    expect(rows(spool, "events", `batch_id IN (${untouched.join(",")})`)).toEqual(before.events);
    await waitFor(
      "the heartbeat to carry the clock forward",
      () => (getMetaNumber(spool as SqliteSpool, "last_tick_at") as number) > L + 86000,
    );
    await stop(ahead);
  } finally {
    for (const h of running) h.kill("SIGKILL");
    spool?.close();
    receiver.stop(true);
  }
}, 20_000);
