// hookspool enqueue: manual injection with the intake's validation; a refused
// event changes nothing stored.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { EXTRA_CONFIG, enqueueJson, initHome, inHome, oneErrorLine, storedState, withDb } from "./home.ts";

const ev = (db: string, id: number) =>
  withDb(db, (d) => d.query("SELECT * FROM events WHERE id = ?").get(id) as Record<string, unknown>);
const batch = (db: string, id: number) =>
  withDb(db, (d) => d.query("SELECT * FROM batches WHERE id = ?").get(id) as Record<string, unknown>);

describe("enqueue", () => {
  test("from stdin: stores the payload byte for byte and says where it went", async () => {
    const h = await initHome();
    const payload = '{"topic": "t1", "n": 1,  "s": "caf\u00e9"}';
    const r = await inHome(h, ["enqueue", "--source", "demo", "--key", "t1"], { stdin: payload });
    expect(r).toMatchObject({ code: 0, err: "" });
    expect(r.out.trim()).toBe("queued event 1 in batch 1 (route demo -> script:demo-log)");
    const e = ev(h.db, 1);
    expect(e).toMatchObject({ source: "demo", route: "demo", batch_id: 1, payload, event_type: "", dedup_id: null });
    // Its size is its share of the batch document: the payload's UTF-8 bytes and its event_meta.
    expect(e.size).toBeGreaterThan(Buffer.byteLength(payload));
    expect(batch(h.db, 1)).toMatchObject({ key: "t1", state: "open", destination: "script:demo-log", count: 1 });
  });

  test("from --file, relative to the working directory", async () => {
    const h = await initHome();
    const dir = tempDir();
    mkdirSync(join(dir, "in"));
    writeFileSync(join(dir, "in", "event.json"), '{"from":"file"}');
    const r = await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--file", "in/event.json"], {
      cwd: dir,
      stdin: '{"from":"stdin"}',
    });
    expect(r.code).toBe(0);
    expect(r.out).toContain("queued event 1 in batch 1");
    expect(ev(h.db, 1).payload).toBe('{"from":"file"}');
  });

  test("--json prints the store's result", async () => {
    const h = await initHome();
    const r = await inHome(h, ["enqueue", "--json", "--source", "demo", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      status: "queued",
      placed: [{ eventId: 1, batchId: 1, route: "demo", destination: "script:demo-log", tee: false, sealed: false }],
    });
  });

  test("events of one key join one batch; another key opens its own", async () => {
    const h = await initHome();
    expect(await enqueueJson(h, "demo", "a", { n: 1 })).toBe(1);
    expect(await enqueueJson(h, "demo", "a", { n: 2 })).toBe(1);
    expect(await enqueueJson(h, "demo", "b", { n: 3 })).toBe(2);
    expect(batch(h.db, 1)).toMatchObject({ count: 2, state: "open" });
  });

  test("a batch that reaches max_events is sealed in the same command", async () => {
    const h = await initHome();
    const r = await inHome(h, ["enqueue", "--source", "once", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(0);
    expect(r.out).toContain(", sealed)");
    expect(batch(h.db, 1)).toMatchObject({ state: "sealed", count: 1 });
    expect(batch(h.db, 1).content_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  test("--dedup-id twice: the second is a duplicate and stores nothing new", async () => {
    const h = await initHome();
    const first = await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--dedup-id", "d-1"], {
      stdin: '{"n":1}',
    });
    expect(first.code).toBe(0);
    const second = await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--dedup-id", "d-1"], {
      stdin: '{"n":2}',
    });
    expect(second).toMatchObject({ code: 0, err: "" });
    expect(second.out.trim()).toBe("duplicate of event 1; nothing enqueued");
    const json = await inHome(h, ["--json", "enqueue", "--source", "demo", "--key", "k", "--dedup-id", "d-1"], {
      stdin: '{"n":3}',
    });
    expect(JSON.parse(json.out)).toEqual({ status: "duplicate", eventId: 1 });
    const s = storedState(h.db);
    expect(s.events).toBe(1);
    expect(s.dupCounts).toEqual([{ source: "demo", dedup_id: "d-1", dup_count: 2 }]);
    expect(ev(h.db, 1)).toMatchObject({ dedup_id: "d-1", payload: '{"n":1}' });
    // Another id, or the same id from another source, is a new event.
    expect(await enqueueJson(h, "demo", "k", { n: 4 }, ["--dedup-id", "d-2"])).toBe(1);
    expect(await enqueueJson(h, "once", "k", { n: 5 }, ["--dedup-id", "d-1"])).toBe(2);
  });

  test("--destination sends the event elsewhere than the source's action, in a group of its own", async () => {
    const h = await initHome();
    // An event of the same key is waiting in the route's open batch to the source's action.
    expect((await inHome(h, ["enqueue", "--source", "demo", "--key", "k"], { stdin: "{}" })).code).toBe(0);
    const r = await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--destination", "web"], { stdin: "{}" });
    expect(r.code).toBe(0);
    expect(r.out).toContain("in batch 2 (route demo->web -> web)");
    expect(batch(h.db, 1)).toMatchObject({ destination: "script:demo-log", route: "demo", count: 1 });
    expect(batch(h.db, 2)).toMatchObject({ destination: "web", route: "demo->web", source: "demo", count: 1 });
    // The next override of that key joins the override's batch, not the route's.
    expect(
      (await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--destination", "web"], { stdin: "{}" })).out,
    ).toContain("in batch 2 ");
  });

  test("a tee route gets its own copy in the same command", async () => {
    const h = await initHome({
      extra: `${EXTRA_CONFIG}\n[[routes]]\nname = "mirror"\nsource = "demo"\ntee = true\ndestination = "web"\n`,
    });
    const r = await inHome(h, ["--json", "enqueue", "--source", "demo", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(0);
    const placed = JSON.parse(r.out).placed;
    expect(
      placed.map((p: { route: string; destination: string; tee: boolean }) => [p.route, p.destination, p.tee]),
    ).toEqual([
      ["demo", "script:demo-log", false],
      ["mirror", "web", true],
    ]);
  });

  test("--event-type is stored with the event", async () => {
    const h = await initHome();
    expect(
      (await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--event-type", "push"], { stdin: "{}" })).code,
    ).toBe(0);
    expect(ev(h.db, 1).event_type).toBe("push");
  });

  test("a key of exactly 512 bytes is accepted", async () => {
    const h = await initHome();
    const key = "\u00e9".repeat(256);
    expect(Buffer.byteLength(key)).toBe(512);
    expect(await enqueueJson(h, "demo", key, {})).toBe(1);
    expect(batch(h.db, 1).key).toBe(key);
  });

  test("a body of exactly the source's max_body_bytes is accepted", async () => {
    const h = await initHome();
    const body = `{"p":"${"x".repeat(56)}"}`;
    expect(body.length).toBe(64);
    const r = await inHome(h, ["enqueue", "--source", "small", "--key", "k"], { stdin: body });
    expect(r.code).toBe(0);
  });
});

describe("enqueue refuses bad input: one line, non-zero, nothing stored changes", () => {
  const enc = new TextEncoder();
  const cases: { name: string; argv: string[]; stdin?: string | Uint8Array; code: number; says: string | RegExp }[] = [
    { name: "invalid JSON", argv: [], stdin: '{"a":', code: 2, says: "not valid JSON" },
    {
      name: "invalid UTF-8",
      argv: [],
      stdin: new Uint8Array([...enc.encode('{"a":"'), 0xff, 0xfe, ...enc.encode('"}')]),
      code: 2,
      says: "not valid UTF-8",
    },
    { name: "an empty payload", argv: [], stdin: "", code: 2, says: "payload is empty" },
    { name: "a blank payload", argv: [], stdin: " \n\t\n", code: 2, says: "payload is empty" },
    {
      name: "a body over the source's max_body_bytes",
      argv: ["--source", "small"],
      stdin: `{"p":"${"x".repeat(57)}"}`,
      code: 2,
      says: "65 bytes; source small accepts at most 64",
    },
    { name: "a key over 512 bytes", argv: ["--key", "\u00e9".repeat(257)], code: 2, says: "514 bytes; at most 512" },
    { name: "an empty key", argv: ["--key", ""], code: 2, says: "key is empty" },
    { name: "an unknown source", argv: ["--source", "nope"], code: 2, says: 'no source "nope"' },
    { name: "an unknown script destination", argv: ["--destination", "script:nope"], code: 2, says: "script:nope" },
    { name: "a bare destination name without a table", argv: ["--destination", "nowhere"], code: 2, says: '"nowhere"' },
    { name: "hermes: without a route", argv: ["--destination", "hermes:"], code: 2, says: "hermes:" },
    {
      name: "quarantine as destination",
      argv: ["--destination", "quarantine"],
      code: 2,
      says: "quarantine is reserved",
    },
    {
      name: "a missing --file",
      argv: ["--file", "/nonexistent/event.json"],
      code: 1,
      says: "cannot read /nonexistent/event.json (ENOENT)",
    },
    {
      name: "a repeated dedup id with invalid JSON",
      argv: ["--dedup-id", "seen"],
      stdin: "nope",
      code: 2,
      says: "not valid JSON",
    },
    { name: "no --key", argv: ["--key"], code: 2, says: /key/ },
  ];

  for (const c of cases) {
    test(c.name, async () => {
      const h = await initHome();
      await enqueueJson(h, "demo", "k", { first: true }, ["--dedup-id", "seen"]);
      await enqueueJson(h, "small", "k", { first: true });
      const before = storedState(h.db);
      expect(before.events).toBe(2);
      // Defaults a case overrides: a valid source, key and payload.
      const argv = ["enqueue", "--source", "demo", "--key", "k", ...c.argv];
      const r = await inHome(h, argv, { stdin: c.stdin ?? '{"ok":true}' });
      expect(r.code).toBe(c.code);
      expect(r.out).toBe("");
      const line = oneErrorLine(r.err);
      if (typeof c.says === "string") expect(line).toContain(c.says);
      else expect(line).toMatch(c.says);
      expect(storedState(h.db)).toEqual(before);
    });
  }

  test("--destination that does not resolve names the flag, not the config", async () => {
    const h = await initHome();
    const r = await inHome(h, ["enqueue", "--source", "demo", "--key", "k", "--destination", "script:nope"], {
      stdin: "{}",
    });
    expect(r.code).toBe(2);
    const line = oneErrorLine(r.err);
    expect(line).toContain("--destination");
    expect(line).not.toContain("sources.demo.action");
  });

  test("a source whose action does not resolve names the config file and key", async () => {
    const h = await initHome({ extra: `${EXTRA_CONFIG}\n[sources.broken]\naction = "script:missing"\n` });
    const before = storedState(h.db);
    const r = await inHome(h, ["enqueue", "--source", "broken", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(2);
    const line = oneErrorLine(r.err);
    expect(line).toContain(h.config);
    expect(line).toContain("sources.broken.action");
    expect(line).toContain("script:missing");
    expect(storedState(h.db)).toEqual(before);
  });

  test("a tee route whose destination does not resolve names the route's key", async () => {
    const h = await initHome({
      extra: `${EXTRA_CONFIG}\n[[routes]]\nname = "mirror"\nsource = "demo"\ntee = true\ndestination = "script:gone"\n`,
    });
    const before = storedState(h.db);
    const r = await inHome(h, ["enqueue", "--source", "demo", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(2);
    const line = oneErrorLine(r.err);
    expect(line).toContain(`${h.config}: routes[0].destination: destination "script:gone"`);
    expect(storedState(h.db)).toEqual(before);
  });

  test("the config is read from --config when given", async () => {
    const h = await initHome();
    const other = join(tempDir(), "other.toml");
    writeFileSync(other, '[sources.elsewhere]\naction = "script:x"\n[destinations."script:x"]\nargv = ["/bin/true"]\n');
    const r = await cli(["--home", h.home, "--config", other, "enqueue", "--source", "elsewhere", "--key", "k"], {
      stdin: "{}",
    });
    expect(r.code).toBe(0);
    expect(batch(h.db, 1)).toMatchObject({ source: "elsewhere", destination: "script:x" });
    expect(
      (await cli(["--home", h.home, "--config", other, "enqueue", "--source", "demo", "--key", "k"], { stdin: "{}" }))
        .code,
    ).toBe(2);
  });
});
