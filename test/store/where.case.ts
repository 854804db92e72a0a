// --where through the operator role, the same on every backend: each condition against a
// corpus of payloads (strings, numbers written several ways, booleans, nulls, arrays, keys of
// digits, $ and -, LIKE's wildcards), held to test/helpers/where-model.ts and to a few answers
// written out; a batch matched by any one of its events, with the other filters, in list,
// export, replay's selections and route test's stored requests; payloads the database cannot
// read; and migrate's payload indexes, built and dropped.
import { expect, test } from "bun:test";
import { parseWhere, parseWheres } from "../../src/store/where.ts";
import { copy, ev, T0 } from "../helpers/spool.ts";
import type { StoreUnderTest } from "../helpers/store-under-test.ts";
import { matchesAll } from "../helpers/where-model.ts";
import type { Suite } from "./suite.ts";

/** The corpus, as stored text: p0 is batch 1, p1 batch 2, ... (42.0 and 1.50 written as a sender may). */
const CORPUS: string[] = [
  JSON.stringify({
    action: "opened",
    number: 42,
    pull_request: { number: 42, title: "Fix 100% of _it_", merged: false, labels: [{ name: "bug" }, { name: "ui" }] },
    repository: { full_name: "acme/api" },
  }),
  JSON.stringify({
    action: "synchronize",
    number: "42",
    pull_request: { number: 42.5, merged: true, labels: [] },
    repository: { full_name: "acme/web" },
  }),
  JSON.stringify({
    action: "closed",
    pull_request: { number: 7, title: "a, b (c)", merged: true },
    repository: { full_name: "Acme/Api" },
    flag: 1,
  }),
  JSON.stringify({ action: null, flag: true, obj: { "0": "zero", "1": { x: "y" } }, $ref: { "a-b": "dollar" } }),
  JSON.stringify({ action: "", repository: { full_name: { nested: "acme/api" } }, items: [[1, 2], [3]] }),
  JSON.stringify([1, 2, 3]),
  JSON.stringify("just a string"),
  '{"big": 1e20, "neg": -3, "zero": 0, "n": 42.0, "price": 1.50, ' +
    '"str_num": "0.5", "t": "true", "quote": "say \\"hi\\""}',
];

/** Each condition, and the payloads (by index) it matches: the model must say the same. */
const ANSWERS: [string, number[]][] = [
  ["action = opened", [0]],
  ["action in (opened, synchronize)", [0, 1]],
  ["action != opened", [1, 2, 4]],
  ["action exists", [0, 1, 2, 4]],
  ['action = ""', [4]],
  ["action ~ en", [0]],
  ["action ~ EN", []],
  ["number = 42", [0, 1]],
  ['number = "42"', [1]],
  ["n = 42", [7]],
  ["number = 42.0", [0]],
  ["pull_request.number in (7, 42.5)", [1, 2]],
  ["pull_request.merged = true", [1, 2]],
  ["pull_request.merged != true", [0]],
  ["pull_request.title ~ 100%", [0]],
  ["pull_request.title ~ _it_", [0]],
  ["pull_request.title ~ %_", []],
  ['pull_request.title in ("a, b (c)", x)', [2]],
  ["pull_request.title = a, b (c)", [2]],
  ["pull_request.labels.1.name = ui", [0]],
  ["pull_request.labels exists", [0, 1]],
  ["pull_request.labels.0 exists", [0]],
  ["repository.full_name = acme/api", [0]],
  ["repository.full_name != acme/api", [1, 2]],
  ["flag = true", [3]],
  ["flag = 1", [2]],
  ["obj.0 = zero", [3]],
  ["obj.1.x = y", [3]],
  ["$ref.a-b = dollar", [3]],
  ["items.0.1 = 2", [4]],
  ["0 = 1", [5]],
  ["big = 100000000000000000000", [7]],
  ["neg = -3", [7]],
  ["zero = 0", [7]],
  ["price = 1.5", [7]],
  ["price = 1.50", [7]],
  ['price = "1.50"', []],
  ["str_num = 0.50", []],
  ["str_num = 0.5", [7]],
  ["t = true", [7]],
  ['quote = say "hi"', [7]],
  ['quote = "say \\"hi\\""', [7]],
  ['quote ~ "\\""', [7]],
  ["missing exists", []],
  ["missing != x", []],
];

/** More conditions, held to the model alone. */
const MORE = [
  "action = closed",
  "action in (closed, nope, opened)",
  "action != closed",
  "pull_request.number = 42",
  "pull_request.number != 42",
  "pull_request.number exists",
  "pull_request.merged = false",
  "pull_request.merged in (true, false)",
  "pull_request.title exists",
  "pull_request.labels.0.name in (bug, ui)",
  "pull_request.labels.5.name exists",
  "repository.full_name ~ acme",
  "repository.full_name exists",
  "repository exists",
  "flag exists",
  "flag != true",
  "obj.1 exists",
  "items.1.0 = 3",
  "items.1.1 exists",
  "2 = 3",
  "big = 1e20",
  "zero = -0",
  "t != true",
  "str_num ~ .",
  "action = null",
];

/** Every path the cases read. */
const PATHS = [
  ...new Set([...[...ANSWERS.map(([c]) => c), ...MORE].map((c) => parseWhere(c).path), "id", "a", "d", "number"]),
];

/**
 * The --where cases, on whatever store fresh() opens; `readPaths`: every event written with the
 * values at PATHS as the writing process read them, where the backend uses them (the answers
 * must not change).
 */
export function whereCases({ fresh: open }: Suite, o: { readPaths?: boolean } = {}): void {
  const fresh = async () => {
    const s = await open();
    if (o.readPaths) await s.readPaths(PATHS);
    return s;
  };

  /** Each payload of the corpus in a batch of its own (key p<i>); the batch ids in order. */
  async function corpus(s: StoreUnderTest): Promise<number[]> {
    const ids: number[] = [];
    for (const [i, payload] of CORPUS.entries()) {
      const [r] = await s.intake.enqueueAll([ev({ key: `p${i}`, payload })], T0 + i);
      if (r.status !== "queued") throw new Error(r.status);
      ids.push(r.placed[0].batchId);
    }
    return ids;
  }

  /** The corpus indexes of the batches list gives for these conditions, in order. */
  async function listed(s: StoreUnderTest, ids: number[], conds: string[]): Promise<number[]> {
    const rows = await s.operator.listBatches({ where: parseWheres(conds), limit: 100 });
    return rows.map((b) => ids.indexOf(b.id)).sort((a, b) => a - b);
  }

  const modelled = (conds: string[]) => CORPUS.flatMap((text, i) => (matchesAll(parseWheres(conds), text) ? [i] : []));

  test("each condition matches the payloads its meaning says, with and without a payload index", async () => {
    const s = await fresh();
    const ids = await corpus(s);
    // The variant is what it says: the rows hold the values their writer read.
    if (o.readPaths) {
      const given = (await s.rows("events", { cols: ["path_values"] })).filter((r) => r.path_values !== null);
      expect(given.length).toBeGreaterThan(3);
    }
    for (const indexed of [false, true]) {
      if (indexed) {
        const paths = [...new Set([...ANSWERS.map(([c]) => c), ...MORE].map((c) => parseWhere(c).path))];
        await s.payloadIndexes(paths);
      }
      for (const [cond, want] of ANSWERS) {
        expect({ cond, indexed, model: modelled([cond]) }).toEqual({ cond, indexed, model: want });
        expect({ cond, indexed, got: await listed(s, ids, [cond]) }).toEqual({ cond, indexed, got: want });
      }
      for (const cond of MORE)
        expect({ cond, indexed, got: await listed(s, ids, [cond]) }).toEqual({ cond, indexed, got: modelled([cond]) });
      const both = ["action in (opened, closed)", "pull_request.merged = true"];
      expect(await listed(s, ids, both)).toEqual([2]);
    }
  });

  test("a batch matches when one of its events matches every condition, with the other filters", async () => {
    const s = await fresh();
    const one = (payload: object, over: Parameters<typeof ev>[0] = {}) =>
      s.intake.enqueueAll([ev({ payload: JSON.stringify(payload), ...over })], s.clock.now());
    // Batch 1 holds two events: one opened, one with number 42; neither both.
    await one({ action: "opened", number: 1 }, { key: "two" });
    await one({ action: "closed", number: 42 }, { key: "two" });
    s.clock.advance(100);
    await one({ action: "opened", number: 42 }, { key: "both", source: "other" });
    const ids = async (f: Parameters<typeof s.operator.listBatches>[0]) =>
      (await s.operator.listBatches(f)).map((b) => b.id);
    const w = (...c: string[]) => parseWheres(c);
    expect(await ids({ where: w("action = opened") })).toEqual([2, 1]);
    expect(await ids({ where: w("number = 42") })).toEqual([2, 1]);
    expect(await ids({ where: w("action = opened", "number = 42") })).toEqual([2]);
    expect(await ids({ where: w("action = opened"), source: "s" })).toEqual([1]);
    expect(await ids({ where: w("action = opened"), since: T0 + 50 })).toEqual([2]);
    expect(await ids({ where: w("action = opened"), state: "open", before: 2 })).toEqual([1]);
    expect(await ids({ where: w("action = opened"), limit: 1 })).toEqual([2]);
    expect(await ids({ where: w("action = nope") })).toEqual([]);

    const exported: number[] = [];
    for await (const r of s.operator.exportBatches({ where: w("number = 42"), until: T0 + 50 }))
      exported.push(r.batch.id);
    expect(exported).toEqual([1]);

    await s.update("batches", { state: "dead", dead_reason: "rejected" }, { id: 1 });
    await s.update("batches", { state: "delivered", content_hash: "sha256:x", sealed_at: T0 }, { id: 2 });
    expect(await s.operator.deadBatchIds({ where: w("action = opened") })).toEqual([1]);
    expect(await s.operator.deadBatchIds({ where: w("action = opened", "number = 42") })).toEqual([]);
    expect(await s.operator.deliveredBatchIds({ where: w("number = 42") })).toEqual([2]);
    expect(await s.operator.deliveredBatchIds({ where: w("number = 42"), source: "s" })).toEqual([]);

    // route test reads requests: each event's own payload, not its batch's.
    const requests = async (conds: string[], source?: string) =>
      (await s.operator.storedRequests({ since: T0, limit: 100, where: w(...conds), source })).map(
        (r) => JSON.parse(r.payload) as unknown,
      );
    expect(await requests(["number = 42"])).toEqual([
      { action: "closed", number: 42 },
      { action: "opened", number: 42 },
    ]);
    expect(await requests(["action = opened", "number = 42"], "other")).toEqual([{ action: "opened", number: 42 }]);
    expect(await requests(["action = opened", "number = 42"], "s")).toEqual([]);
  });

  test("an integer past 2^53 equals itself only, not the double nearest it", async () => {
    const s = await fresh();
    // JavaScript reads both as 9007199254740992; the databases keep them apart, as the sender wrote them.
    const texts = ['{"id": 9007199254740993}', '{"id": 9007199254740992}', '{"id": 9223372036854775807}'];
    for (const [i, payload] of texts.entries()) await s.intake.enqueueAll([ev({ key: `k${i}`, payload })], T0 + i);
    const ids = async (cond: string) =>
      (await s.operator.listBatches({ where: parseWheres([cond]) })).map((b) => b.id).sort();
    for (const indexed of [false, true]) {
      if (indexed) await s.payloadIndexes(["id"]);
      expect({ indexed, got: await ids("id = 9007199254740993") }).toEqual({ indexed, got: [1] });
      expect({ indexed, got: await ids("id in (9007199254740992)") }).toEqual({ indexed, got: [2] });
      expect({ indexed, got: await ids("id != 9007199254740993") }).toEqual({ indexed, got: [2, 3] });
      expect({ indexed, got: await ids("id = 9223372036854775807") }).toEqual({ indexed, got: [3] });
    }
  });

  test("a payload the database cannot read matches nothing, and fails no insert into an index or read", async () => {
    const s = await fresh();
    await s.payloadIndexes(["a", "d"]);
    const deep = `${"[".repeat(1200)}0${"]".repeat(1200)}`;
    const texts = [
      `\uFEFF{"a": "x"}`,
      `{"a": "x", "d": ${deep}}`,
      `{"a": "x", "d": "nul \\u0000"}`,
      `{"a": "x", "d": "lone \\ud800"}`,
      `{"a": "x"}`,
      // Longer than a B-tree entry may be (2704 bytes on PostgreSQL): the index still takes it.
      `{"a": "x", "d": "${"y".repeat(5000)}"}`,
    ];
    for (const [i, payload] of texts.entries()) {
      const [r] = await s.intake.enqueueAll(
        [ev({ key: `k${i}`, payload, copies: [copy("r", "http:d", { max_events: 1 })] })],
        T0 + i,
      );
      expect(r.status).toBe("queued");
    }
    const ids = (await s.operator.listBatches({ where: parseWheres(["a = x"]) })).map((b) => b.id);
    // A byte-order mark is skipped on both; what else each reader refuses differs (SQLite's
    // stops at 1000 levels, jsonb at \u0000 and a lone surrogate), and is simply not matched.
    for (const id of [1, 5, 6]) expect(ids).toContain(id);
    const unread = s.name === "sqlite" ? [2] : [3, 4];
    for (const id of unread) expect(ids).not.toContain(id);
    expect(await s.operator.listBatches({ where: parseWheres(["d exists", "d ~ nul"]) })).toBeArray();
    expect((await s.operator.listBatches({ where: parseWheres(["d ~ yyyy"]) })).map((b) => b.id)).toEqual([6]);
  });

  test("migrate's payload indexes: one per path, kept, and dropped when no bobbin declares the path", async () => {
    const s = await fresh();
    const first = await s.payloadIndexes(["repository.full_name", "a-b", "a_b", "repository.full_name"]);
    expect(first.created.map((c) => c.path)).toEqual(["a-b", "a_b", "repository.full_name"]);
    expect(new Set(first.created.map((c) => c.name)).size).toBe(3);
    for (const c of first.created) expect(c.name).toMatch(/^events_where_[A-Za-z0-9_]+$/);
    expect(await s.payloadIndexes(["a_b", "a-b", "repository.full_name"])).toEqual({ created: [], dropped: [] });
    const name = (p: string) => first.created.find((c) => c.path === p)?.name ?? "";
    expect(await s.payloadIndexes(["a_b"], true)).toEqual({
      created: [],
      dropped: [name("a-b"), name("repository.full_name")].sort(),
    });
    expect(await s.payloadIndexes(["a_b", "x"])).toEqual({
      created: [{ path: "x", name: expect.stringMatching(/^events_where_x_/) }],
      dropped: [name("a-b"), name("repository.full_name")].sort(),
    });
    expect(await s.payloadIndexes([])).toEqual({ created: [], dropped: expect.arrayContaining([name("a_b")]) });
    expect(await s.payloadIndexes([])).toEqual({ created: [], dropped: [] });
  });
}
