// The operator's verbs against a spool seeded through the store and
// a dispatcher with fake destinations: replay, retry, split, exclude, drop, pause, resume, issues,
// metrics. Each case checks the exit code, the output (human and --json) and the tables after.
import { batchContent } from "../../src/store/sqlite/enqueue.ts";
import { documentShare } from "../../src/store/content.ts";
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type FakeClock, systemClock } from "../../src/clock.ts";
import { outcome } from "../../src/delivery.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { computeContentHashTx } from "../../src/store/sqlite/enqueue.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { raiseIssue } from "../../src/store/sqlite/issues.ts";
import { cli } from "../helpers/cli.ts";
import { batchIdOf, down, type FakeDestination, fakeDestination, ok, type Rig, rig } from "../helpers/dispatch.ts";
import { startIntake, startIntakeIn } from "../helpers/intake.ts";
import { payloadOf } from "../helpers/spool.ts";
import { tempDir } from "../helpers/tmp.ts";
import { oneErrorLine } from "./home.ts";

const A = "hermes:a";
const B = "hermes:b";
const CONFIG = `[limits]
min_free_bytes = 1

[sources.s]
action = "${A}"

[sources.t]
action = "${B}"
`;

/** A 422: the batch goes dead (permanent) and a delivery:<dest>:permanent issue opens. */
const rejected = () => outcome({ kind: "dead", klass: "permanent", reason: "http 422", status: 422 });

interface World {
  r: Rig;
  a: FakeDestination;
  b: FakeDestination;
}

function world(config = CONFIG): World {
  const a = fakeDestination(A);
  const b = fakeDestination(B);
  return { r: rig(config, [a, b]), a, b };
}

/**
 * Run the CLI on `home` with its clock pinned to the test's fake clock (the CLI reads the wall
 * clock; HOOKSPOOL_TEST_CLOCK_OFFSET_S shifts it), so "due now" and --since mean the fake now.
 */
function op(at: { home: string; clock: FakeClock }, argv: string[]) {
  return cli(["--home", at.home, ...argv], {
    env: { HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(at.clock.now() - systemClock.now()) },
  });
}

/** A batch of `events` events for `key`, delivered once and refused (422): dead, permanent. */
async function dead(
  w: World,
  key: string,
  o: { dest?: string; source?: string; events?: number; payload?: (i: number) => string } = {},
): Promise<number> {
  const dest = o.dest ?? A;
  const fake = w.r.dests[dest];
  fake.answer = rejected;
  let id = 0;
  for (let i = 0; i < (o.events ?? 1); i++) {
    if (i > 0) w.r.clock.advance(1);
    id = batchIdOf(w.r.put(key, dest, { source: o.source ?? "s", ...(o.payload ? { payload: o.payload(i) } : {}) }));
  }
  await w.r.step();
  fake.answer = () => ok();
  expect(w.r.batch(id)).toMatchObject({ state: "dead", last_class: "permanent", count: o.events ?? 1 });
  return id;
}

/** A batch that failed once with a transport error: retry, with a backoff ahead of it. */
async function retrying(w: World, key: string, dest = B): Promise<number> {
  const fake = w.r.dests[dest];
  fake.answer = down;
  const id = batchIdOf(w.r.put(key, dest, { source: dest === B ? "t" : "s" }));
  await w.r.step();
  fake.answer = () => ok();
  expect(w.r.batch(id).state).toBe("retry");
  return id;
}

async function delivered(w: World, key: string): Promise<number> {
  const id = batchIdOf(w.r.put(key, A));
  await w.r.step();
  expect(w.r.batch(id).state).toBe("delivered");
  return id;
}

/** Everything an operator verb could touch, to prove a refusal changed nothing. */
function snapshot(r: Rig) {
  const all = (sql: string) => r.spool.db.query(sql).all();
  return {
    batches: all("SELECT * FROM batches ORDER BY id"),
    events: all("SELECT id, batch_id, excluded_at FROM events ORDER BY id"),
    issues: all("SELECT * FROM issues ORDER BY id"),
    destinations: all("SELECT * FROM destinations ORDER BY name"),
  };
}

const eventIds = (r: Rig, batchId: number) =>
  (r.spool.db.query("SELECT id FROM events WHERE batch_id = ? ORDER BY id").all(batchId) as { id: number }[]).map(
    (e) => e.id,
  );
const issue = (r: Rig, fingerprint: string) =>
  r.spool.db.query("SELECT * FROM issues WHERE fingerprint = ?").get(fingerprint) as Record<string, unknown> | null;

describe("replay", () => {
  test("<id> of a dead batch: retry, due now, attempts 0, content unchanged; the note says out of order", async () => {
    const w = world();
    // two counted failures (batch class), then a 422: dead with attempts 2
    w.a.answer = () => outcome({ kind: "retry", klass: "batch", reason: "exit 1", status: 1 });
    const id = batchIdOf(w.r.put("k1", A));
    await w.r.step();
    w.r.clock.advance(30);
    await w.r.step();
    w.a.answer = rejected;
    w.r.clock.advance(60);
    await w.r.step();
    const before = w.r.batch(id);
    expect(before).toMatchObject({ state: "dead", attempts: 2, last_class: "permanent" });
    w.r.clock.advance(600);
    const res = await op(w.r, ["replay", String(id)]);
    expect(res).toMatchObject({ code: 0, err: "" });
    expect(res.out).toContain(`batch ${id}: dead -> retry, due now\n`);
    expect(res.out).toMatch(/^note: .*out of order/m);
    expect(res.out).toEndWith(
      "note: a replayed batch re-enters its key's queue by its first event, so it delivers out of order\n",
    );
    const after = w.r.batch(id);
    expect(after).toMatchObject({ state: "retry", attempts: 0, content_hash: before.content_hash, count: 1 });
    expect(after.next_attempt_at as number).toBeCloseTo(w.r.clock.now(), 0);
    expect(after.not_before as number).toBeCloseTo(w.r.clock.now(), 0);
    // due now: the next tick delivers it
    w.a.answer = () => ok();
    w.r.clock.advance(1);
    await w.r.step();
    expect(w.r.batch(id).state).toBe("delivered");
    expect(w.a.calls.at(-1)?.batchId).toBe(id);
  });

  test("--json, and several ids at once", async () => {
    const w = world();
    const [d1, d2, d3] = [await dead(w, "k1"), await dead(w, "k2"), await dead(w, "k3")];
    const j = await op(w.r, ["--json", "replay", String(d1)]);
    expect(j).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(j.out)).toEqual({ replayed: [{ batchId: d1, kind: "replayed" }] });
    const res = await op(w.r, ["replay", String(d2), String(d3)]);
    expect(res).toMatchObject({ code: 0, err: "" });
    expect(res.out).toContain(`batch ${d2}: dead -> retry, due now\nbatch ${d3}: dead -> retry, due now\n`);
    for (const id of [d1, d2, d3]) expect(w.r.batch(id)).toMatchObject({ state: "retry", attempts: 0 });
  });

  test("a batch that is not dead is exit 1 and nothing changes; a missing id is exit 1", async () => {
    const w = world();
    const done = await delivered(w, "k1");
    const open = batchIdOf(w.r.put("k2", A));
    const before = snapshot(w.r);
    for (const [id, state] of [
      [done, "delivered"],
      [open, "open"],
    ] as const) {
      const res = await op(w.r, ["replay", String(id)]);
      expect(res.code).toBe(1);
      expect(oneErrorLine(res.err)).toMatch(
        new RegExp(`batch ${id} is (delivered|open); replay applies to dead batches`),
      );
      // the store's message names the batch; it is not said twice, and nothing was replayed to note;
      // a delivered batch is told the verb that does resend it
      const instead =
        state === "delivered" ? ` (hookspool replay --delivered ${id} resends it under a new delivery id)` : "";
      expect(res.err).toBe(`hookspool: batch ${id} is ${state}; replay applies to dead batches${instead}\n`);
      expect(res.out).toBe("");
    }
    const missing = await op(w.r, ["replay", "999"]);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.err)).toContain("no batch 999");
    expect(missing.err).toBe("hookspool: no batch 999\n");
    expect(missing.out).toBe("");
    const j = await op(w.r, ["--json", "replay", "999"]);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.out)).toEqual({ replayed: [{ batchId: 999, error: "no batch 999" }] });
    const jd = await op(w.r, ["--json", "replay", String(done)]);
    expect(JSON.parse(jd.out)).toEqual({
      replayed: [
        {
          batchId: done,
          error: `batch ${done} is delivered; replay applies to dead batches`,
          hint: `hookspool replay --delivered ${done} resends it under a new delivery id`,
        },
      ],
    });
    expect(snapshot(w.r)).toEqual(before);
  });

  test("a run where some ids fail: the note once for the replayed ones, each failure once, exit 1", async () => {
    const w = world();
    const d1 = await dead(w, "k1");
    const done = await delivered(w, "k2");
    const res = await op(w.r, ["replay", String(done), String(d1), "999"]);
    expect(res.code).toBe(1);
    expect(res.err).toBe(
      `hookspool: batch ${done} is delivered; replay applies to dead batches (hookspool replay ` +
        `--delivered ${done} resends it under a new delivery id)\nhookspool: no batch 999\n`,
    );
    expect(res.out).toBe(
      `batch ${d1}: dead -> retry, due now\nnote: a replayed batch re-enters its key's queue by its ` +
        `first event, so it delivers out of order\n`,
    );
  });

  test("usage: ids with --dead, filters without --dead, nothing at all, a bad --since are exit 2", async () => {
    const w = world();
    const id = await dead(w, "k1");
    const before = snapshot(w.r);
    for (const argv of [
      ["replay", String(id), "--dead"],
      ["replay", "--destination", A],
      ["replay", String(id), "--since", "24h"],
      ["replay"],
      ["replay", "--dead", "--since", "yesterday"],
    ]) {
      const res = await op(w.r, argv);
      expect({ argv, code: res.code }).toEqual({ argv, code: 2 });
      expect(oneErrorLine(res.err)).toMatch(/--dead|--since/);
      expect(res.out).toBe("");
    }
    expect(snapshot(w.r)).toEqual(before);
  });

  /** old: s -> a two days ago; a1: s -> a; ta: t -> a; b1: t -> b; q: a quarantined request of s. */
  async function filterWorld() {
    const w = world();
    const old = await dead(w, "old");
    w.r.clock.advance(2 * 86400);
    const a1 = await dead(w, "a1");
    const ta = await dead(w, "ta", { source: "t" });
    const b1 = await dead(w, "b1", { dest: B, source: "t" });
    const q = quarantine(w.r.spool, {
      source: "s",
      raw: new TextEncoder().encode("{"),
      headers: {},
      authHeaders: [],
      url: null,
      reason: "plugin_error:SyntaxError",
    }).batchId;
    return { w, ids: { old, a1, ta, b1, q } };
  }

  test.each([
    ["--dead alone: every dead batch, not quarantine", [], ["old", "a1", "ta", "b1"]],
    ["--destination", ["--destination", B], ["b1"]],
    ["--source", ["--source", "t"], ["ta", "b1"]],
    ["--since 24h", ["--since", "24h"], ["a1", "ta", "b1"]],
    ["--since 24h with --source s", ["--since", "24h", "--source", "s"], ["a1"]],
    ["--destination with no dead batch there", ["--destination", "hermes:none"], []],
  ] as [string, string[], string[]][])("%s", async (_name, flags, want) => {
    const { w, ids } = await filterWorld();
    const byName = ids as Record<string, number>;
    const res = await op(w.r, ["--json", "replay", "--dead", ...flags]);
    const doc = JSON.parse(res.out);
    if (want.length === 0) {
      expect(res.code).toBe(1);
      expect(doc).toEqual({ replayed: [] });
      return;
    }
    expect(res).toMatchObject({ code: 0, err: "" });
    expect(doc.replayed.map((x: { batchId: number }) => x.batchId).sort()).toEqual(want.map((n) => byName[n]).sort());
    for (const [name, id] of Object.entries(byName)) {
      const state = w.r.batch(id).state;
      expect({ name, state }).toEqual({ name, state: want.includes(name) ? "retry" : "dead" });
    }
  });

  test("--since takes Unix seconds too", async () => {
    const { w, ids } = await filterWorld();
    const res = await op(w.r, ["replay", "--dead", "--since", String(w.r.clock.now() - 3600), "--destination", A]);
    expect(res).toMatchObject({ code: 0, err: "" });
    expect(res.out).toContain(`batch ${ids.a1}: dead -> retry`);
    expect(res.out).toContain(`batch ${ids.ta}: dead -> retry`);
    expect(res.out).not.toContain(`batch ${ids.old}:`);
    expect(w.r.batch(ids.old).state).toBe("dead");
  });

  test("--dead with nothing matching is exit 1", async () => {
    const w = world();
    await delivered(w, "k1");
    const before = snapshot(w.r);
    const res = await op(w.r, ["replay", "--dead"]);
    expect(res.code).toBe(1);
    expect(res.out.trim()).toBe("no dead batches match");
    const again = await op(w.r, ["replay", "--dead", "--destination", B]);
    expect(again.code).toBe(1);
    expect(snapshot(w.r)).toEqual(before);
  });

  test("the delivery:<dest>:permanent issue resolves when no dead batch is left for it", async () => {
    const w = world();
    const d1 = await dead(w, "k1");
    const d2 = await dead(w, "k2");
    const fp = `delivery:${A}:permanent`;
    expect(issue(w.r, fp)).toMatchObject({ state: "open", count: 2, kind: "delivery", destination: A });
    expect((await op(w.r, ["replay", String(d1)])).code).toBe(0);
    expect(issue(w.r, fp)?.state).toBe("open");
    expect((await op(w.r, ["replay", String(d2)])).code).toBe(0);
    expect(issue(w.r, fp)?.state).toBe("resolved");
    const list = await op(w.r, ["--json", "issues"]);
    expect(JSON.parse(list.out)).toEqual([]);
  });
});

const SECRET = "operator-test-secret";
const sig = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
const GH = `[limits]
min_free_bytes = 1

[sources.gh]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "kind" }
secrets.secret = { file = "{{secret:gh}}" }
action = "hermes:gh"
`;

describe("replay of a quarantine batch", () => {
  /** Two signed requests the template cannot key (no "topic"): two quarantine batches. */
  async function quarantinedHome() {
    const t = await startIntake(GH, { secrets: { gh: SECRET } });
    const bodies = [
      JSON.stringify({ repo: "o/r", kind: "push", n: 1 }),
      JSON.stringify({ repo: "o/s", kind: "issue", n: 2 }),
    ];
    try {
      for (const body of bodies) {
        const res = await t.post("/hooks/gh", body, { "X-Sig": sig(body), "Content-Type": "application/json" });
        expect(res.status).toBe(202);
        expect(await res.json()).toEqual({ status: "quarantined" });
      }
    } finally {
      await t.stop();
    }
    const spool = { home: t.home, clock: t.clock };
    const q = (await op(spool, ["--json", "list", "--destination", "quarantine"])).out;
    const ids = (JSON.parse(q) as { id: number }[]).map((b) => b.id).sort((x, y) => x - y);
    expect(ids).toHaveLength(2);
    return { t, spool, ids, bodies };
  }

  const db = (home: string) => new Database(join(home, "spool.db"));

  test(
    "reclassifies through the fixed plugin: a normal event, the quarantine batch delivered " +
      "'reclassified', the quarantine issue resolved",
    async () => {
      const { t, spool, ids, bodies } = await quarantinedHome();
      const cfg = join(t.home, "config.toml");
      writeFileSync(cfg, readFileSync(cfg, "utf8").replace('key = "topic"', 'key = "repo"'));
      const look = db(t.home);
      try {
        // No "topic" in the payload: key_missing, filed under the source.
        const issueState = () =>
          (look.query("SELECT state FROM issues WHERE fingerprint = 'source:quarantine:gh'").get() as { state: string })
            .state;
        expect(issueState()).toBe("open");

        const res = await op(spool, ["replay", String(ids[0])]);
        expect(res).toMatchObject({ code: 0, err: "" });
        expect(res.out).toContain(`batch ${ids[0]}: quarantined request(s) classified again`);
        // a reclassified request is a new event in its key's queue, not a batch out of order
        expect(res.out).not.toContain("note:");
        expect(look.query("SELECT state, result FROM batches WHERE id = ?").get(ids[0])).toEqual({
          state: "delivered",
          result: "reclassified",
        });
        const made = look
          .query(
            "SELECT e.source, e.event_type, e.payload, b.key, b.destination, b.state FROM events e JOIN " +
              "batches b ON b.id = e.batch_id WHERE e.payload IS NOT NULL ORDER BY e.id",
          )
          .all();
        expect(made).toEqual([
          { source: "gh", event_type: "push", payload: bodies[0], key: "o/r", destination: "hermes:gh", state: "open" },
        ]);
        // one quarantine batch is left, so the issue stays open
        expect(issueState()).toBe("open");

        const j = await op(spool, ["--json", "replay", "--dead", "--destination", "quarantine"]);
        expect(j).toMatchObject({ code: 0, err: "" });
        const doc = JSON.parse(j.out);
        expect(doc.replayed).toHaveLength(1);
        expect(doc.replayed[0]).toMatchObject({
          batchId: ids[1],
          kind: "reclassified",
          results: [{ status: "queued" }],
        });
        expect(look.query("SELECT state, result FROM batches WHERE id = ?").get(ids[1])).toEqual({
          state: "delivered",
          result: "reclassified",
        });
        expect(
          look.query("SELECT COUNT(*) AS n FROM events WHERE payload IS NOT NULL AND event_type = 'issue'").get(),
        ).toEqual({ n: 1 });
        expect(issueState()).toBe("resolved");
        // the auth header never reached the stored events
        expect(JSON.stringify(look.query("SELECT headers FROM events").all())).not.toMatch(/x-sig/i);

        // a reclassified batch is no longer dead
        const again = await op(spool, ["replay", String(ids[0])]);
        expect(again.code).toBe(1);
        expect(oneErrorLine(again.err)).toContain("is delivered");
      } finally {
        look.close();
      }
    },
  );

  test("while the plugin still cannot classify it: one error line, not 0, nothing changed", async () => {
    const { t, spool, ids } = await quarantinedHome();
    const look = db(t.home);
    try {
      const before = look.query("SELECT * FROM batches ORDER BY id").all();
      const res = await op(spool, ["replay", String(ids[0])]);
      expect(res.code).not.toBe(0);
      expect(look.query("SELECT * FROM batches ORDER BY id").all()).toEqual(before);
      expect(look.query("SELECT COUNT(*) AS n FROM events WHERE payload IS NOT NULL").get()).toEqual({ n: 0 });
      // an operator's replay before the fix is an expected situation, not a crash (a
      // user-caused error is one line; only a bug prints whole)
      expect(res.err).not.toContain("internal error");
      expect(oneErrorLine(res.err)).toContain(`batch ${ids[0]}`);
      expect(res.err.split(`batch ${ids[0]}`)).toHaveLength(2);
      expect(res.out).toBe("");
    } finally {
      look.close();
    }
  });
});

describe("retry", () => {
  test("a batch in retry becomes due now", async () => {
    const w = world();
    const id = await retrying(w, "k1");
    const id2 = await retrying(w, "k2");
    expect(w.r.batch(id).next_attempt_at as number).toBeGreaterThan(w.r.clock.now() + 10);
    const res = await op(w.r, ["retry", String(id)]);
    expect(res).toMatchObject({ code: 0, err: "", out: `batch ${id}: due now\n` });
    expect(w.r.batch(id)).toMatchObject({ state: "retry", attempts: 0 });
    expect(w.r.batch(id).next_attempt_at as number).toBeCloseTo(w.r.clock.now(), 0);
    const j = await op(w.r, ["--json", "retry", String(id2)]);
    expect(j).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(j.out)).toEqual({ batch: id2, due: "now" });
    expect(w.r.batch(id2).next_attempt_at as number).toBeCloseTo(w.r.clock.now(), 0);
    w.r.clock.advance(1);
    await w.r.step();
    expect(w.r.batch(id).state).toBe("delivered");
    expect(w.r.batch(id2).state).toBe("delivered");
  });

  test("any other state is exit 1 and nothing changes; so is a missing batch", async () => {
    const w = world();
    const ids = { dead: await dead(w, "d"), delivered: await delivered(w, "k"), open: batchIdOf(w.r.put("o", A)) };
    const before = snapshot(w.r);
    for (const [state, id] of Object.entries(ids)) {
      const res = await op(w.r, ["retry", String(id)]);
      expect({ state, code: res.code }).toEqual({ state, code: 1 });
      const instead: Record<string, string> = {
        dead: ` (hookspool replay ${id} puts it back into retry)`,
        delivered: ` (hookspool replay --delivered ${id} resends it under a new delivery id)`,
        open: "",
      };
      expect(oneErrorLine(res.err)).toBe(
        `hookspool: batch ${id} is ${state}; retry applies to retry batches${instead[state]}`,
      );
      expect(res.out).toBe("");
    }
    const missing = await op(w.r, ["retry", "999"]);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.err)).toBe("hookspool: no batch 999");
    expect(snapshot(w.r)).toEqual(before);
  });
});

describe("split", () => {
  function piece(r: Rig, id: number) {
    return r.spool.db
      .query(
        "SELECT id, state, route, source, destination, key, count, bytes, not_before, content_hash " +
          "FROM batches WHERE id = ?",
      )
      .get(id) as Record<string, unknown>;
  }

  test(
    "--max-events: consecutive pieces listed, events moved, hashes recomputed, the original " + "dropped 'split'",
    async () => {
      const w = world();
      const id = await dead(w, "k", { events: 5 });
      const events = eventIds(w.r, id);
      const original = w.r.batch(id);
      w.r.clock.advance(60);
      const res = await op(w.r, ["split", String(id), "--max-events", "2"]);
      expect(res).toMatchObject({ code: 0, err: "" });
      const m = /^batch (\d+): split into #(\d+), #(\d+), #(\d+) .*batch \1 is dropped with result split$/m.exec(
        res.out,
      );
      expect(m).not.toBeNull();
      const pieces = (m as RegExpExecArray).slice(2, 5).map(Number);
      expect(Number((m as RegExpExecArray)[1])).toBe(id);
      expect(w.r.batch(id)).toMatchObject({ state: "dropped", result: "split" });
      expect(String(w.r.batch(id).last_error)).toContain(pieces.map((p) => `#${p}`).join(", "));
      expect(pieces.map((p) => eventIds(w.r, p))).toEqual([events.slice(0, 2), events.slice(2, 4), events.slice(4)]);
      expect(eventIds(w.r, id)).toEqual([]);
      const hashes = new Set<unknown>([original.content_hash]);
      for (const p of pieces) {
        const row = piece(w.r, p);
        expect(row).toMatchObject({
          state: "sealed",
          route: original.route,
          source: "s",
          destination: A,
          key: "k",
          count: eventIds(w.r, p).length,
        });
        expect(row.content_hash).toBe(computeContentHashTx(w.r.spool.db, p));
        expect(row.not_before as number).toBeCloseTo(w.r.clock.now(), 0);
        hashes.add(row.content_hash);
      }
      expect(hashes.size).toBe(4);
      // the pieces are due: the dispatcher delivers them, in order
      w.r.clock.advance(1);
      for (let i = 0; i < 3; i++) await w.r.step();
      expect(pieces.map((p) => w.r.batch(p).state)).toEqual(["delivered", "delivered", "delivered"]);
      expect(w.a.calls.slice(-3).map((c) => c.batchId)).toEqual(pieces);
    },
  );

  test("--max-bytes and --at (with --json)", async () => {
    const w = world();
    const id = await dead(w, "k", { events: 4, payload: () => payloadOf(100) });
    const events = eventIds(w.r, id);
    // Pieces are measured as the join rule measures: each event's share of the document.
    const share = documentShare(batchContent(w.r.spool, id)[0]);
    const res = await op(w.r, [
      "--json",
      "split",
      String(id),
      "--max-bytes",
      String(2 * share + Math.floor(share / 2)),
    ]);
    expect(res).toMatchObject({ code: 0, err: "" });
    const doc = JSON.parse(res.out);
    expect(doc.batch).toBe(id);
    expect(doc.pieces).toHaveLength(2);
    expect(doc.pieces.map((p: number) => eventIds(w.r, p))).toEqual([events.slice(0, 2), events.slice(2)]);
    for (const p of doc.pieces)
      expect(piece(w.r, p)).toMatchObject({
        bytes: 2 * share,
        count: 2,
        content_hash: computeContentHashTx(w.r.spool.db, p),
      });

    const id2 = await dead(w, "k2", { events: 3 });
    const ev2 = eventIds(w.r, id2);
    const at = await op(w.r, ["--json", "split", String(id2), "--at", String(ev2[2])]);
    expect(at).toMatchObject({ code: 0, err: "" });
    const pieces = JSON.parse(at.out).pieces as number[];
    expect(pieces.map((p) => eventIds(w.r, p))).toEqual([ev2.slice(0, 2), [ev2[2]]]);
    expect(w.r.batch(id2)).toMatchObject({ state: "dropped", result: "split" });
  });

  test("two options, or none, are exit 2; nothing to split is exit 1; nothing changes", async () => {
    const w = world();
    const id = await dead(w, "k", { events: 3 });
    const events = eventIds(w.r, id);
    const open = batchIdOf(w.r.put("o", A));
    w.r.put("o", A);
    const before = snapshot(w.r);
    for (const argv of [
      ["--max-events", "1", "--at", String(events[1])],
      ["--max-events", "1", "--max-bytes", "10"],
      [],
      ["--max-events", "0"],
    ]) {
      const res = await op(w.r, ["split", String(id), ...argv]);
      expect({ argv, code: res.code }).toEqual({ argv, code: 2 });
      oneErrorLine(res.err);
    }
    for (const [argv, why] of [
      [["split", String(id), "--max-events", "10"], "nothing to split"],
      [["split", String(id), "--max-bytes", "100000"], "nothing to split"],
      [["split", String(id), "--at", String(events[0])], "nothing to split"],
      [["split", String(id), "--at", "999"], "event 999 is not in this batch"],
      [["split", String(open), "--max-events", "1"], "split applies to sealed, retry or dead batches"],
      [["split", "999", "--max-events", "1"], "no batch 999"],
    ] as [string[], string][]) {
      const res = await op(w.r, argv);
      expect({ argv, code: res.code }).toEqual({ argv, code: 1 });
      expect(oneErrorLine(res.err)).toContain(why);
    }
    // the store's message already names the batch: printed once, as it is
    expect((await op(w.r, ["split", String(open), "--max-events", "1"])).err).toBe(
      `hookspool: batch ${open} is open; split applies to sealed, retry or dead batches\n`,
    );
    expect(snapshot(w.r)).toEqual(before);
  });
});

describe("exclude", () => {
  const marked = (i: number) => JSON.stringify({ marker: `event-${i}` });

  test(
    "needs --yes; then the event is excluded, the hash recomputed and printed, and show --events " + "lists it",
    async () => {
      const w = world();
      const id = await dead(w, "k", { events: 3, payload: marked });
      const [e1, e2, e3] = eventIds(w.r, id);
      const hash = w.r.batch(id).content_hash;
      const before = snapshot(w.r);

      const unconfirmed = await op(w.r, ["exclude", String(id), String(e2)]);
      expect(unconfirmed.code).toBe(2);
      expect(oneErrorLine(unconfirmed.err)).toContain("--yes");
      expect(unconfirmed.out).toBe("");
      expect(snapshot(w.r)).toEqual(before);

      w.r.clock.advance(30);
      const res = await op(w.r, ["exclude", String(id), String(e2), "--yes"]);
      expect(res).toMatchObject({ code: 0, err: "" });
      const newHash = w.r.batch(id).content_hash as string;
      expect(newHash).not.toBe(hash);
      expect(newHash).toBe(computeContentHashTx(w.r.spool.db, id));
      expect(res.out.trim()).toBe(`batch ${id}: excluded event(s) ${e2}; content_hash ${newHash}`);
      const row = w.r.spool.db.query("SELECT batch_id, excluded_at FROM events WHERE id = ?").get(e2) as {
        batch_id: number;
        excluded_at: number;
      };
      expect(row.batch_id).toBe(id);
      expect(row.excluded_at).toBeCloseTo(w.r.clock.now(), 0);
      expect(w.r.batch(id)).toMatchObject({ state: "dead", count: 3 });

      const shown = await op(w.r, ["show", String(id), "--events"]);
      expect(shown.code).toBe(0);
      expect(shown.out).toMatch(new RegExp(`^${e1}\\s.*\\S$`, "m"));
      expect(shown.out).toMatch(new RegExp(`^${e2}\\s+.*\\s\\d{4}-\\d\\d-\\d\\dT\\S+Z\\s+\\S.*$`, "m"));
      const shownJson = JSON.parse((await op(w.r, ["--json", "show", String(id), "--events"])).out);
      expect(
        shownJson.events.map((e: { id: number; excluded_at: number | null }) => [e.id, e.excluded_at === null]),
      ).toEqual([
        [e1, true],
        [e2, false],
        [e3, true],
      ]);

      const j = await op(w.r, ["--json", "exclude", String(id), String(e3), "--yes"]);
      expect(j).toMatchObject({ code: 0, err: "" });
      expect(JSON.parse(j.out)).toEqual({
        batch: id,
        excluded: [e3],
        content_hash: computeContentHashTx(w.r.spool.db, id),
      });

      // the replayed document carries only what is left
      expect((await op(w.r, ["replay", String(id)])).code).toBe(0);
      w.r.clock.advance(1);
      await w.r.step();
      const body = JSON.parse(w.a.calls.at(-1)?.body ?? "{}");
      expect(body.event_meta.map((e: { id: number }) => e.id)).toEqual([e1]);
      expect(JSON.stringify(body.events)).not.toContain("event-1");
    },
  );

  test("an event of another batch is exit 1; excluding every event is exit 1; nothing changes", async () => {
    const w = world();
    const id = await dead(w, "k", { events: 2 });
    const other = await dead(w, "other");
    const [foreign] = eventIds(w.r, other);
    const before = snapshot(w.r);
    const res = await op(w.r, ["exclude", String(id), String(foreign), "--yes"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.err)).toContain(`event ${foreign} is not in batch ${id}`);
    expect(res.err).toBe(`hookspool: event ${foreign} is not in batch ${id}\n`);
    const all = await op(w.r, ["exclude", String(id), ...eventIds(w.r, id).map(String), "--yes"]);
    expect(all.code).toBe(1);
    expect(oneErrorLine(all.err)).toContain(`hookspool drop ${id} --yes`);
    const missing = await op(w.r, ["exclude", "999", "1", "--yes"]);
    expect(missing.code).toBe(1);
    const noEvents = await op(w.r, ["exclude", String(id), "--yes"]);
    expect(noEvents.code).toBe(2);
    expect(snapshot(w.r)).toEqual(before);
  });
});

describe("drop", () => {
  async function states(w: World) {
    const ids = {
      dead: await dead(w, "d"),
      retry: await retrying(w, "r"),
      open: batchIdOf(w.r.put("o", A)),
      sealed: batchIdOf(w.r.put("s", A, { window: { max_events: 1 } })),
    };
    const leased = batchIdOf(w.r.put("l", A, { window: { max_events: 1 } }));
    const now = w.r.clock.now();
    expect(
      claimBatch(w.r.spool, { batchId: leased, destination: A, now, leaseUntil: now + 60, host: "elsewhere", pid: 1 }),
    ).not.toBeNull();
    for (const [state, id] of Object.entries({ ...ids, leased })) expect(w.r.batch(id).state).toBe(state);
    return { ids, leased };
  }

  test("open, sealed, retry and dead drop with --yes; without it exit 2 and nothing changes", async () => {
    const w = world();
    const { ids } = await states(w);
    const list = Object.values(ids).map(String);
    const before = snapshot(w.r);
    const unconfirmed = await op(w.r, ["drop", ...list]);
    expect(unconfirmed.code).toBe(2);
    expect(oneErrorLine(unconfirmed.err)).toContain("--yes");
    expect(snapshot(w.r)).toEqual(before);

    const res = await op(w.r, ["drop", ...list.slice(0, 2), "--yes"]);
    expect(res).toMatchObject({ code: 0, err: "", out: `dropped batch(es) ${list.slice(0, 2).join(", ")}\n` });
    const j = await op(w.r, ["--json", "drop", ...list.slice(2), "--yes"]);
    expect(j).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(j.out)).toEqual({ dropped: list.slice(2).map(Number) });
    for (const id of Object.values(ids)) {
      const b = w.r.batch(id);
      expect(b).toMatchObject({ state: "dropped", result: "dropped", next_attempt_at: null });
      expect(b.delivered_at as number).toBeCloseTo(w.r.clock.now(), 0);
    }
    // the dead batch was the only one behind the permanent issue
    expect(issue(w.r, `delivery:${A}:permanent`)?.state).toBe("resolved");
    // dropped is final: the dispatcher never takes them
    w.r.clock.advance(3600);
    const seen = [w.a.calls.length, w.b.calls.length];
    await w.r.step();
    const taken = [...w.a.calls.slice(seen[0]), ...w.b.calls.slice(seen[1])].map((c) => c.batchId);
    for (const id of [ids.open, ids.sealed, ids.retry]) expect(taken).not.toContain(id);
    for (const id of Object.values(ids)) expect(w.r.batch(id).state).toBe("dropped");
  });

  test("a leased batch is refused with exit 1 and none of the others is dropped; so is a missing one", async () => {
    const w = world();
    const { ids, leased } = await states(w);
    const before = snapshot(w.r);
    const res = await op(w.r, ["drop", String(ids.dead), String(leased), String(ids.open), "--yes"]);
    expect(res.code).toBe(1);
    expect(oneErrorLine(res.err)).toContain(
      `batch ${leased} is leased; drop applies to open, sealed, retry, awaiting or dead batches`,
    );
    expect(res.err).toBe(
      `hookspool: batch ${leased} is leased; drop applies to open, sealed, retry, awaiting or dead batches\n`,
    );
    expect(res.out).toBe("");
    const missing = await op(w.r, ["drop", String(ids.open), "999", "--yes"]);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.err)).toContain("no batch 999");
    expect(snapshot(w.r)).toEqual(before);
    const none = await op(w.r, ["drop", "--yes"]);
    expect(none.code).toBe(2);
  });
});

describe("pause and resume", () => {
  test(
    "pause: row paused with the reason, a delivery:<dest>:paused issue, status shows it, nothing " +
      "delivered; resume: closed, issue resolved",
    async () => {
      const w = world();
      await delivered(w, "before");
      const res = await op(w.r, ["pause", A, "--reason", "receiver migration"]);
      expect(res).toMatchObject({ code: 0, err: "" });
      expect(res.out).toContain(`${A}: paused`);
      const row = w.r.dest(A);
      expect(row.state).toBe("paused");
      expect(String(row.paused_by)).toContain("receiver migration");
      expect(row.paused_at as number).toBeCloseTo(w.r.clock.now(), 0);
      expect(issue(w.r, `delivery:${A}:paused`)).toMatchObject({ state: "open", kind: "delivery", destination: A });
      expect(String(issue(w.r, `delivery:${A}:paused`)?.last_error)).toContain("receiver migration");

      const status = JSON.parse((await op(w.r, ["--json", "status"])).out);
      expect(status.destinations[A].state).toBe("paused");
      expect((await op(w.r, ["status"])).out).toMatch(new RegExp(`^${A}\\s+paused\\s`, "m"));

      // spooling continues, delivery does not
      const id = batchIdOf(w.r.put("during", A));
      const calls = w.a.calls.length;
      await w.r.step();
      await w.r.step();
      expect(w.a.calls.length).toBe(calls);
      expect(w.r.batch(id).state).toBe("sealed");

      const resumed = await op(w.r, ["--json", "resume", A]);
      expect(resumed).toMatchObject({ code: 0, err: "" });
      expect(JSON.parse(resumed.out)).toEqual({ destination: A, state: "closed" });
      expect(w.r.dest(A)).toMatchObject({ state: "closed", paused_at: null, paused_by: null, consecutive_failures: 0 });
      expect(issue(w.r, `delivery:${A}:paused`)?.state).toBe("resolved");
      w.r.clock.advance(1);
      await w.r.step();
      expect(w.r.batch(id).state).toBe("delivered");
    },
  );

  test("pause --json; resume of a destination that is not paused is exit 1", async () => {
    const w = world();
    const j = await op(w.r, ["--json", "pause", B]);
    expect(j).toMatchObject({ code: 0, err: "" });
    expect(JSON.parse(j.out)).toEqual({ destination: B, state: "paused" });
    expect(w.r.dest(B).state).toBe("paused");
    expect((await op(w.r, ["resume", B])).out).toBe(`${B}: resumed\n`);
    const before = snapshot(w.r);
    for (const name of [B, A]) {
      const res = await op(w.r, ["resume", name]);
      expect(res.code).toBe(1);
      expect(oneErrorLine(res.err)).toBe(`hookspool: ${name} is not paused`);
    }
    expect(snapshot(w.r)).toEqual(before);
    const noName = await op(w.r, ["pause"]);
    expect(noName.code).toBe(2);
  });

  test(
    "resume --budget: the budget's spends count from now, so held batches go; without a budget it " + "is exit 1",
    async () => {
      const w = world(`${CONFIG}\n[destinations."${A}"]\nbudget = "1/h"\n`);
      const first = batchIdOf(w.r.put("k1", A));
      const held = batchIdOf(w.r.put("k2", A));
      await w.r.step();
      expect(w.r.batch(first).state).toBe("delivered");
      w.r.clock.advance(1);
      await w.r.step();
      expect(w.r.batch(held).state).toBe("sealed");
      expect(issue(w.r, `budget:${A}`)).toMatchObject({ state: "open", destination: A });
      const res = await op(w.r, ["--json", "resume", A, "--budget"]);
      expect(res).toMatchObject({ code: 0, err: "" });
      expect(JSON.parse(res.out)).toEqual({ destination: A, budget: "released" });
      w.r.clock.advance(1);
      await w.r.step();
      expect(w.r.batch(held).state).toBe("delivered");
      const none = await op(w.r, ["resume", B, "--budget"]);
      expect(none.code).toBe(1);
      expect(oneErrorLine(none.err)).toBe(`hookspool: ${B} has no budget or key_budget`);
    },
  );

  test("pause of a name that is no destination at all is refused and writes nothing", async () => {
    const w = world();
    const before = snapshot(w.r);
    const res = await op(w.r, ["pause", "hermes:typo"]);
    expect(res.code).not.toBe(0);
    oneErrorLine(res.err);
    expect(snapshot(w.r)).toEqual(before);
  });
});

describe("issues", () => {
  /** Three issues: a permanent delivery issue (a dead batch), config:file and source_silent:s. */
  async function issueWorld() {
    const w = world();
    await dead(w, "k");
    const now = w.r.clock.now();
    raiseIssue(w.r.spool, { fingerprint: "config:file", kind: "config", error: "bad toml", now: now + 1 });
    raiseIssue(w.r.spool, {
      fingerprint: "source_silent:s",
      kind: "source_silent",
      route: "s",
      error: "no event for 2h",
      now: now + 2,
    });
    const id = (fp: string) => (issue(w.r, fp) as { id: number }).id;
    return { w, perm: id(`delivery:${A}:permanent`), file: id("config:file"), silent: id("source_silent:s") };
  }
  const listed = async (w: World, argv: string[] = []) => {
    const res = await op(w.r, ["--json", "issues", ...argv]);
    expect(res).toMatchObject({ code: 0, err: "" });
    return (JSON.parse(res.out) as { id: number; state: string }[]).map((i) => [i.id, i.state]);
  };

  test("the default list (open and acked), --state, and the human table", async () => {
    const { w, perm, file, silent } = await issueWorld();
    expect(await listed(w)).toEqual([
      [silent, "open"],
      [file, "open"],
      [perm, "open"],
    ]);
    const human = await op(w.r, ["issues"]);
    expect(human).toMatchObject({ code: 0, err: "" });
    expect(human.out).toMatch(/^ID\s+STATE\s+KIND\s+FINGERPRINT\s+COUNT/);
    expect(human.out).toMatch(new RegExp(`^${perm}\\s+open\\s+delivery\\s+delivery:hermes:a:permanent\\s+1\\s`, "m"));
    expect(human.out).toContain("hookspool replay");
    expect((await op(w.r, ["issues", "list"])).out).toBe(human.out);

    expect((await op(w.r, ["issues", "ack", String(perm)])).code).toBe(0);
    expect((await op(w.r, ["issues", "resolve", String(file)])).code).toBe(0);
    expect((await op(w.r, ["issues", "ignore", String(silent)])).code).toBe(0);
    expect(await listed(w)).toEqual([[perm, "acked"]]);
    expect(await listed(w, ["list", "--state", "resolved"])).toEqual([[file, "resolved"]]);
    expect(await listed(w, ["list", "--state", "ignored"])).toEqual([[silent, "ignored"]]);
    expect(await listed(w, ["list", "--state", "acked"])).toEqual([[perm, "acked"]]);
    expect((await listed(w, ["list", "--state", "all"])).sort()).toEqual(
      [
        [perm, "acked"],
        [file, "resolved"],
        [silent, "ignored"],
      ].sort(),
    );
    expect(await listed(w, ["list", "--state", "open"])).toEqual([]);
    expect((await op(w.r, ["issues", "list", "--state", "open"])).out.trim()).toBe("no open issues");
    const bad = await op(w.r, ["issues", "list", "--state", "closed"]);
    expect(bad.code).toBe(2);
    expect(oneErrorLine(bad.err)).toContain("--state must be one of");
  });

  test(
    "ack only from open; resolve from open or acked; ignore; each change shown in human and --json " + "form",
    async () => {
      const { w, perm, file, silent } = await issueWorld();
      const state = (id: number) =>
        (w.r.spool.db.query("SELECT state FROM issues WHERE id = ?").get(id) as { state: string }).state;
      const run = async (verb: string, id: number, json = false) =>
        op(w.r, [...(json ? ["--json"] : []), "issues", verb, String(id)]);

      const acked = await run("ack", perm);
      expect(acked).toMatchObject({ code: 0, err: "", out: `issue ${perm}: acked\n` });
      expect(state(perm)).toBe("acked");
      const twice = await run("ack", perm);
      expect(twice.code).toBe(1);
      expect(oneErrorLine(twice.err)).toBe(`hookspool: issue ${perm} cannot be acked from its current state`);

      const resolved = await run("resolve", perm, true);
      expect(resolved).toMatchObject({ code: 0, err: "" });
      expect(JSON.parse(resolved.out)).toMatchObject({
        id: perm,
        state: "resolved",
        fingerprint: `delivery:${A}:permanent`,
      });
      expect(state(perm)).toBe("resolved");
      for (const verb of ["ack", "resolve"]) {
        const res = await run(verb, perm);
        expect({ verb, code: res.code }).toEqual({ verb, code: 1 });
      }

      expect((await run("resolve", file)).out).toBe(`issue ${file}: resolved\n`);

      const ignored = await run("ignore", silent, true);
      expect(ignored).toMatchObject({ code: 0, err: "" });
      expect(JSON.parse(ignored.out)).toMatchObject({ id: silent, state: "ignored" });
      for (const verb of ["ack", "resolve", "ignore"]) {
        const res = await run(verb, silent);
        expect({ verb, code: res.code }).toEqual({ verb, code: 1 });
      }
      // ignored never reopens; a resolved issue does
      raiseIssue(w.r.spool, { fingerprint: "source_silent:s", kind: "source_silent", now: w.r.clock.now() + 10 });
      expect(state(silent)).toBe("ignored");
      raiseIssue(w.r.spool, { fingerprint: "config:file", kind: "config", now: w.r.clock.now() + 10 });
      expect(state(file)).toBe("open");
      // ignore applies to a resolved issue too (it will not reopen again)
      expect((await run("resolve", file)).code).toBe(0);
      expect((await run("ignore", file)).out).toBe(`issue ${file}: ignored\n`);

      const before = snapshot(w.r);
      for (const verb of ["ack", "resolve", "ignore"]) {
        const missing = await run(verb, 999);
        expect({ verb, code: missing.code }).toEqual({ verb, code: 1 });
        expect(oneErrorLine(missing.err)).toBe("hookspool: no issue 999");
        const bad = await op(w.r, ["issues", verb, "x"]);
        expect({ verb, code: bad.code }).toEqual({ verb, code: 2 });
      }
      expect(snapshot(w.r)).toEqual(before);
    },
  );

  test("the issues subcommands have --help", async () => {
    for (const verb of ["list", "ack", "resolve", "ignore"]) {
      const r = await cli(["issues", verb, "--help"]);
      expect({ verb, code: r.code, err: r.err }).toEqual({ verb, code: 0, err: "" });
      expect(r.out).toContain(`issues ${verb}`);
    }
  });
});

/** Every table-derived metric. */
const TABLE_METRICS = [
  "hookspool_attempts_30d",
  "hookspool_batches_delivered_7d",
  "hookspool_attempt_duration_seconds_sum_30d",
  "hookspool_attempt_duration_seconds_count_30d",
  "hookspool_batches",
  "hookspool_oldest_pending_age_seconds",
  "hookspool_destination_state",
  "hookspool_destination_oldest_pending_age_seconds",
  "hookspool_issues_open",
  "hookspool_spool_bytes",
  "hookspool_disk_free_bytes",
  "hookspool_dispatcher_heartbeat_age_seconds",
  "hookspool_source_last_event_age_seconds",
];
const INTAKE_COUNTERS = [
  "hookspool_events_received_total",
  "hookspool_events_duplicate_total",
  "hookspool_events_quarantined_total",
  "hookspool_requests_rejected_total",
];

/** The sample value of `name{labels}` (labels in the order written), or undefined. */
function sample(text: string, name: string, labels = ""): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels ? `{${labels}}` : ""} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

describe("metrics", () => {
  test(
    "after a scripted scenario: every table-derived metric from `hookspool metrics`, and the " +
      "intake counters too on GET /metrics",
    async () => {
      const secrets = tempDir();
      const secretFile = join(secrets, "demo");
      writeFileSync(secretFile, SECRET, { mode: 0o600 });
      const config = `[intake]
listen = "127.0.0.1:0"

[dispatch.breaker]
trip_after = 1

${CONFIG}
[sources.demo]
template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", dedup = "id" }
secrets.secret = { file = "${secretFile}" }
action = "hermes:c"
`;
      const a = fakeDestination(A);
      const b = fakeDestination(B);
      const c = fakeDestination("hermes:c");
      const p = fakeDestination("hermes:p");
      const r = rig(config, [a, b, c, p]);
      // two deliveries ok on a, one transport failure on b (trips it: trip_after 1), one 422 on c
      for (const k of ["k1", "k2"]) r.put(k, A);
      b.answer = down;
      r.put("k3", B, { source: "t" });
      c.answer = rejected;
      r.put("k4", "hermes:c");
      await r.step();
      // and a paused destination holding a pending batch
      r.put("k5", "hermes:p");
      expect((await op(r, ["pause", "hermes:p", "--reason", "maintenance"])).code).toBe(0);
      r.clock.advance(20);

      const res = await op(r, ["metrics"]);
      expect(res).toMatchObject({ code: 0, err: "" });
      const text = res.out;
      for (const name of TABLE_METRICS) {
        expect(text).toContain(`# TYPE ${name} gauge\n`);
        expect(text).toMatch(new RegExp(`^${name}(\\{[^}]*\\})? [0-9.e+-]+$`, "m"));
      }
      expect(sample(text, "hookspool_attempts_30d", `destination="${A}",outcome="ok",klass=""`)).toBe(2);
      expect(sample(text, "hookspool_attempts_30d", `destination="${B}",outcome="retry",klass="transport"`)).toBe(1);
      expect(sample(text, "hookspool_attempts_30d", `destination="hermes:c",outcome="dead",klass="permanent"`)).toBe(1);
      expect(sample(text, "hookspool_batches_delivered_7d", `destination="${A}"`)).toBe(2);
      expect(sample(text, "hookspool_attempt_duration_seconds_count_30d", `destination="${A}"`)).toBe(2);
      expect(sample(text, "hookspool_attempt_duration_seconds_sum_30d", `destination="${A}"`)).toBeGreaterThanOrEqual(
        0,
      );
      expect(sample(text, "hookspool_batches", 'state="delivered"')).toBe(2);
      expect(sample(text, "hookspool_batches", 'state="retry"')).toBe(1);
      expect(sample(text, "hookspool_batches", 'state="dead"')).toBe(1);
      expect(sample(text, "hookspool_batches", 'state="open"')).toBe(1);
      expect(sample(text, "hookspool_batches", 'state="quarantined"')).toBe(0);
      for (const s of ["sealed", "leased", "dropped"])
        expect(sample(text, "hookspool_batches", `state="${s}"`)).toBe(0);
      expect(sample(text, "hookspool_oldest_pending_age_seconds")).toBeCloseTo(20, 0);
      expect(sample(text, "hookspool_destination_state", `destination="${A}"`)).toBe(0);
      expect(sample(text, "hookspool_destination_state", `destination="${B}"`)).toBe(2);
      expect(sample(text, "hookspool_destination_state", 'destination="hermes:p"')).toBe(3);
      expect(sample(text, "hookspool_destination_oldest_pending_age_seconds", 'destination="hermes:p"')).toBeCloseTo(
        20,
        0,
      );
      expect(sample(text, "hookspool_destination_oldest_pending_age_seconds", `destination="${B}"`)).toBeCloseTo(20, 0);
      // delivery:hermes:c:permanent, delivery:hermes:b:unreachable (the trip), delivery:hermes:p:paused
      expect(sample(text, "hookspool_issues_open")).toBe(3);
      expect(sample(text, "hookspool_spool_bytes")).toBeGreaterThan(0);
      expect(sample(text, "hookspool_disk_free_bytes")).toBeGreaterThan(0);
      expect(sample(text, "hookspool_dispatcher_heartbeat_age_seconds")).toBeCloseTo(20, 0);
      expect(sample(text, "hookspool_source_last_event_age_seconds", 'source="s"')).toBeCloseTo(20, 0);
      expect(sample(text, "hookspool_source_last_event_age_seconds", 'source="t"')).toBeCloseTo(20, 0);
      expect(text).not.toMatch(/^hookspool_source_last_event_age_seconds\{source="demo"\}/m); // no event yet
      // Per-process counters: the intake's own.
      expect(JSON.stringify(INTAKE_COUNTERS.filter((n) => text.includes(n)))).toBe("[]");

      const t = await startIntakeIn(r.home, { clock: r.clock });
      try {
        const post = (payload: object, good = true) => {
          const body = JSON.stringify(payload);
          return t.post("/hooks/demo", body, { "X-Sig": good ? sig(body) : "sha256=00" });
        };
        expect((await post({ topic: "x", id: "1" })).status).toBe(202);
        expect((await post({ topic: "x", id: "1" })).status).toBe(200);
        expect((await post({ id: "2" })).status).toBe(202);
        expect((await post({ topic: "x", id: "3" }, false)).status).toBe(401);
        const scraped = await fetch(`${t.url}/metrics`);
        expect(scraped.status).toBe(200);
        expect(scraped.headers.get("content-type")).toContain("text/plain");
        const all = await scraped.text();
        expect(sample(all, "hookspool_events_received_total", 'source="demo"')).toBe(1);
        expect(sample(all, "hookspool_events_duplicate_total", 'source="demo"')).toBe(1);
        expect(sample(all, "hookspool_events_quarantined_total", 'source="demo"')).toBe(1);
        expect(sample(all, "hookspool_requests_rejected_total", 'source="demo",reason="unverified"')).toBe(1);
        for (const name of INTAKE_COUNTERS) expect(all).toContain(`# TYPE ${name} counter\n`);
        for (const name of TABLE_METRICS) expect(all).toMatch(new RegExp(`^${name}(\\{[^}]*\\})? [0-9.e+-]+$`, "m"));
        expect(sample(all, "hookspool_batches", 'state="quarantined"')).toBe(1);
        expect(sample(all, "hookspool_destination_state", 'destination="hermes:p"')).toBe(3);
        expect(sample(all, "hookspool_source_last_event_age_seconds", 'source="demo"')).toBe(0);
        expect(sample(all, "hookspool_issues_open")).toBe(4); // + config:plugin:demo
      } finally {
        await t.stop();
      }
    },
  );
});
