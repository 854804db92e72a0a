// hookspool list and show: batches newest first, payloads only on request.
import { describe, expect, test } from "bun:test";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead, markRetry } from "../../src/store/sqlite/marks.ts";
import { eventSize } from "../../src/store/enqueue.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { ev as storeEvent } from "../helpers/spool.ts";
import { excludeEvents } from "../../src/store/sqlite/operator.ts";
import { type Home, enqueueJson, initHome, inHome, oneErrorLine, withSpool } from "./home.ts";

/** A string that must never appear unless payloads were asked for. */
const SECRET = "payload-marker-7f3a";

/** One delivery attempt of a sealed batch, ended as retry or dead through the store. */
function attemptOnce(h: Home, batchId: number, outcome: "retry" | "dead"): void {
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const claim = claimBatch(spool, {
      batchId,
      destination: "script:demo-log",
      now,
      leaseUntil: now + 60,
      host: "test",
      pid: 1,
    });
    if (!claim) throw new Error(`batch ${batchId} was not claimable`);
    const base = { batchId, attemptId: claim.attemptId, owner: claim.owner, now };
    const r =
      outcome === "retry"
        ? markRetry(spool, {
            ...base,
            nextAttemptAt: now + 30,
            attempt: { klass: "transport", status: null, error: "connection refused", durationMs: 12, counted: false },
          })
        : markDead(spool, {
            ...base,
            attempt: { klass: "permanent", status: 64, error: "script said no", durationMs: 7, counted: true },
          });
    if (!r.applied) throw new Error("mark not applied");
  });
}

/** A quarantined request, as the intake will store one. */
function quarantineOne(h: Home): number {
  const request = {
    source: "demo",
    raw: new TextEncoder().encode(`{"raw":"${SECRET}"}`),
    headers: { "content-type": "application/json" },
    authHeaders: [] as string[],
    url: null,
    reason: "plugin_error:TypeError",
  };
  return withSpool(h.db, (spool) => quarantine(spool, request).batchId);
}

const listIds = async (h: Home, argv: string[] = []) => {
  const r = await inHome(h, ["--json", "list", ...argv]);
  expect(r).toMatchObject({ code: 0, err: "" });
  return (JSON.parse(r.out) as { id: number }[]).map((b) => b.id);
};

describe("list", () => {
  test("newest first, as an aligned table", async () => {
    const h = await initHome();
    for (const key of ["a", "b", "c"]) await enqueueJson(h, "demo", key, { s: SECRET });
    const r = await inHome(h, ["list"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    const lines = r.out.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID\s+STATE\s+SOURCE\s+ROUTE\s+KEY\s+DESTINATION\s+EVENTS\s+BYTES\s+AGE/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 5))).toEqual([
      ["3", "open", "demo", "demo", "c"],
      ["2", "open", "demo", "demo", "b"],
      ["1", "open", "demo", "demo", "a"],
    ]);
    expect(r.out).not.toContain(SECRET);
    expect(await listIds(h)).toEqual([3, 2, 1]);
  });

  test("an empty spool says so", async () => {
    const h = await initHome();
    const r = await inHome(h, ["list"]);
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe("no batches");
    expect(await listIds(h)).toEqual([]);
  });

  test("--state, --source, --destination and --limit filter", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "a", {}); // 1 open
    await enqueueJson(h, "once", "a", {}); // 2 sealed
    await enqueueJson(h, "demo", "b", {}, ["--destination", "web"]); // 3 open, to web
    await enqueueJson(h, "once", "b", {}); // 4 sealed
    expect(await listIds(h, ["--state", "open"])).toEqual([3, 1]);
    expect(await listIds(h, ["--state", "sealed"])).toEqual([4, 2]);
    expect(await listIds(h, ["--state", "dead"])).toEqual([]);
    expect(await listIds(h, ["--source", "once"])).toEqual([4, 2]);
    expect(await listIds(h, ["--destination", "web"])).toEqual([3]);
    expect(await listIds(h, ["--destination", "script:demo-log", "--state", "open"])).toEqual([1]);
    expect(await listIds(h, ["--limit", "2"])).toEqual([4, 3]);
    expect(await listIds(h, ["--limit=1", "--source", "demo"])).toEqual([3]);
  });

  test("--destination quarantine lists quarantined requests", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "a", {});
    const q = quarantineOne(h);
    expect(await listIds(h, ["--destination", "quarantine"])).toEqual([q]);
    const r = await inHome(h, ["list", "--destination", "quarantine"]);
    expect(r.out).toMatch(new RegExp(`^${q}\\s+dead\\s+demo\\s+demo\\s+quarantine\\s+quarantine\\s`, "m"));
    expect(r.out).toContain("quarantine");
    expect(r.out).not.toContain(SECRET);
  });

  test("--json is one valid JSON array without payload fields", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "a", { s: SECRET }, ["--dedup-id", "d1", "--event-type", "push"]);
    quarantineOne(h);
    const r = await inHome(h, ["list", "--json"]);
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.out) as Record<string, unknown>[];
    expect(rows).toHaveLength(2);
    expect(rows[1]).toMatchObject({
      id: 1,
      state: "open",
      source: "demo",
      key: "a",
      count: 1,
      destination: "script:demo-log",
    });
    for (const row of rows) {
      for (const field of ["payload", "raw", "headers", "events"]) expect(row).not.toHaveProperty(field);
    }
    expect(r.out).not.toContain(SECRET);
  });

  test("a bad --state or --limit is a usage error", async () => {
    const h = await initHome();
    const bad = await inHome(h, ["list", "--state", "stuck"]);
    expect(bad.code).toBe(2);
    expect(oneErrorLine(bad.err)).toContain(
      "--state must be one of open, sealed, leased, retry, awaiting, delivered, dead, dropped",
    );
    for (const limit of ["0", "x", "-3", "1.5"]) {
      const r = await inHome(h, ["list", `--limit=${limit}`]);
      expect({ limit, code: r.code }).toEqual({ limit, code: 2 });
      expect(oneErrorLine(r.err)).toContain("--limit");
    }
  });
});

describe("show", () => {
  test("one batch, without its payloads", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "topic-1", { s: SECRET });
    await enqueueJson(h, "demo", "topic-1", { s: SECRET, n: 2 });
    const r = await inHome(h, ["show", "1"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out).toMatch(/^batch\s+1$/m);
    expect(r.out).toMatch(/^state\s+open$/m);
    expect(r.out).toMatch(/^key\s+topic-1$/m);
    expect(r.out).toMatch(/^destination\s+script:demo-log$/m);
    expect(r.out).toMatch(/^events\s+2 \(/m);
    expect(r.out).toMatch(/^window\s+quiet 5s, max 30s, 500 events/m);
    expect(r.out).not.toContain(SECRET);
    expect(r.out).not.toContain("EVENT ");
  });

  test("--events lists ids, types, sizes and dedup ids, still without payloads", async () => {
    const h = await initHome();
    const p1 = JSON.stringify({ s: SECRET });
    const p2 = JSON.stringify({ s: SECRET, more: "x".repeat(40) });
    await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--event-type", "push", "--dedup-id", "gh-1"], {
      stdin: p1,
    });
    await inHome(h, ["enqueue", "--source", "demo", "--key", "k"], { stdin: p2 });
    const r = await inHome(h, ["show", "1", "--events"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^EVENT\s+TYPE\s+RECEIVED\s+BYTES\s+DEDUP ID/m);
    // BYTES is each event's share of the batch document (its payload and event_meta), what
    // max_bytes counts. The last column says why each event is here: the implicit route, its own window.
    const sizes = withSpool(h.db, (spool) =>
      (spool.db.query("SELECT id, size FROM events ORDER BY id").all() as { size: number }[]).map((e) => e.size),
    );
    const received = withSpool(
      h.db,
      (spool) =>
        (spool.db.query("SELECT received_at FROM events WHERE id = 1").get() as { received_at: number }).received_at,
    );
    expect(sizes[0]).toBe(eventSize(storeEvent({ payload: p1, eventType: "push", dedupId: "gh-1" }), received));
    expect(sizes[1]).toBeGreaterThan(p2.length);
    expect(r.out).toMatch(
      new RegExp(`^1\\s+push\\s+\\S+Z\\s+${sizes[0]}\\s+gh-1\\s+implicit demo, window from source$`, "m"),
    );
    expect(r.out).toMatch(
      new RegExp(`^2\\s+-\\s+\\S+Z\\s+${sizes[1]}\\s+-\\s+implicit demo, window from source$`, "m"),
    );
    expect(r.out).not.toContain(SECRET);

    const j = await inHome(h, ["show", "1", "--events", "--json"]);
    const doc = JSON.parse(j.out);
    expect(doc.batch).toMatchObject({ id: 1, count: 2 });
    expect(
      doc.events.map((e: Record<string, unknown>) => [e.id, e.event_type, e.size, e.dedup_id, e.excluded_at]),
    ).toEqual([
      [1, "push", sizes[0], "gh-1", null],
      [2, "", sizes[1], null, null],
    ]);
    for (const e of doc.events) expect(Object.keys(e)).not.toContain("payload");
    expect(j.out).not.toContain(SECRET);
    expect(doc).not.toHaveProperty("payloads");
    expect(doc).not.toHaveProperty("attempts");
  });

  test("--events shows an excluded event, still listed", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", { n: 1 });
    await enqueueJson(h, "demo", "k", { n: 2 });
    withSpool(h.db, (spool) => excludeEvents(spool, 1, [2], spool.clock.now()));
    const r = await inHome(h, ["show", "1", "--events"]);
    expect(r.out).toMatch(/^1\s+-\s+\S+Z\s+\d+\s+-\s+implicit demo, window from source$/m);
    expect(r.out).toMatch(/^2\s+-\s+\S+Z\s+\d+\s+-\s+\d{4}-\d\d-\d\dT\S+Z\s+implicit demo, window from source$/m);
    const doc = JSON.parse((await inHome(h, ["--json", "show", "1", "--events"])).out);
    expect(doc.events[0].excluded_at).toBeNull();
    expect(doc.events[1].excluded_at).toBeNumber();
  });

  test("--attempts lists each try", async () => {
    const h = await initHome();
    const id = await enqueueJson(h, "once", "k", {});
    const none = await inHome(h, ["show", String(id), "--attempts"]);
    expect(none.out).toContain("no attempts");
    attemptOnce(h, id, "retry");
    const r = await inHome(h, ["show", String(id), "--attempts"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^state\s+retry$/m);
    expect(r.out).toMatch(/^next attempt\s/m);
    expect(r.out).toMatch(/^last error\s+transport: connection refused$/m);
    expect(r.out).toMatch(/^ATTEMPT\s+N\s+STARTED\s+OUTCOME\s+CLASS/m);
    expect(r.out).toMatch(/^1\s+1\s+\S+Z\s+retry\s+transport\s+12\s+connection refused$/m);
    const j = JSON.parse((await inHome(h, ["--json", "show", String(id), "--attempts"])).out);
    expect(j.attempts).toHaveLength(1);
    expect(j.attempts[0]).toMatchObject({
      n: 1,
      outcome: "retry",
      klass: "transport",
      error: "connection refused",
      counted: 0,
      destination: "script:demo-log",
    });
  });

  test("a dead batch says how to replay it", async () => {
    const h = await initHome();
    const id = await enqueueJson(h, "once", "k", {});
    attemptOnce(h, id, "dead");
    const r = await inHome(h, ["show", String(id)]);
    expect(r.out).toMatch(/^state\s+dead$/m);
    expect(r.out).toMatch(/^attempts\s+1 counted$/m);
    expect(r.out).toMatch(new RegExp(`^next step\\s+hookspool replay ${id}$`, "m"));
  });

  test("--payload prints the payloads; not a tty: no warning", async () => {
    const h = await initHome();
    const p1 = JSON.stringify({ s: SECRET, n: 1 });
    await inHome(h, ["enqueue", "--source", "demo", "--key", "k"], { stdin: p1 });
    await enqueueJson(h, "demo", "k", { n: 2 });
    const r = await inHome(h, ["show", "1", "--payload"]);
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out).toContain(`--- event 1\n${p1}\n`);
    expect(r.out).toContain('--- event 2\n{"n":2}\n');
    const j = JSON.parse((await inHome(h, ["show", "1", "--payload", "--json"])).out);
    expect(j.payloads.map((p: { id: number; payload: string }) => [p.id, p.payload])).toEqual([
      [1, p1],
      [2, '{"n":2}'],
    ]);
  });

  test("--payload on a terminal warns on stderr first", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", { s: SECRET });
    const r = await inHome(h, ["show", "1", "--payload"], { tty: true });
    expect(r.code).toBe(0);
    expect(r.err).toBe("warning: payloads may hold secrets or personal data\n");
    expect(r.out).toContain(SECRET);
    const quiet = await inHome(h, ["show", "1"], { tty: true });
    expect(quiet.err).toBe("");
  });

  test("--payload on a quarantined request shows the raw body", async () => {
    const h = await initHome();
    const id = quarantineOne(h);
    const r = await inHome(h, ["show", String(id), "--payload"]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^destination\s+quarantine$/m);
    expect(r.out).toContain(`{"raw":"${SECRET}"}`);
  });

  test("a missing batch is exit 1; a non-numeric id exit 2", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", {});
    const missing = await inHome(h, ["show", "99"]);
    expect(missing.code).toBe(1);
    expect(oneErrorLine(missing.err)).toBe("hookspool: no batch 99");
    expect(missing.out).toBe("");
    for (const bad of ["abc", "0", "1.5", "1e3"]) {
      const r = await inHome(h, ["show", bad]);
      expect({ bad, code: r.code }).toEqual({ bad, code: 2 });
      expect(oneErrorLine(r.err)).toContain("batch must be a positive integer");
    }
    const none = await inHome(h, ["show"]);
    expect(none.code).toBe(2);
    expect(oneErrorLine(none.err)).toMatch(/BATCH/i);
  });

  test("--json is the batch row", async () => {
    const h = await initHome();
    await enqueueJson(h, "demo", "k", { s: SECRET });
    const r = await inHome(h, ["show", "--json", "1"]);
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(Object.keys(doc)).toEqual(["batch"]);
    expect(doc.batch).toMatchObject({
      id: 1,
      state: "open",
      source: "demo",
      key: "k",
      destination: "script:demo-log",
      count: 1,
      content_hash: null,
    });
    expect(r.out).not.toContain(SECRET);
  });
});
