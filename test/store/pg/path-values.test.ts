// The values at the indexed paths a writer gives PostgreSQL (events.path_values) are the
// server's own reading of the payload at those paths, value for value, on a corpus of the
// payloads where the two readers could part (escapes, duplicate keys, numbers, arrays, nesting,
// what jsonb refuses); rows written as a group carry them, and a payload index built over rows
// with and without them finds the same events. Skipped, saying so, without PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { PgSpool } from "../../../src/store/pg/db.ts";
import { enqueueGroupPg } from "../../../src/store/pg/enqueue.ts";
import { migratePg } from "../../../src/store/pg/migrate.ts";
import { syncPayloadIndexesPg } from "../../../src/store/pg/where.ts";
import { parseWheres } from "../../../src/store/where.ts";
import { pgStores } from "../../../src/store/open.ts";
import { copy, ev, T0 } from "../../helpers/spool.ts";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../../helpers/pg.ts";

const PATHS = ["a", "a.b", "s", "n", "t", "z", "__proto__", "arr.0", "o.k", "u"];

const CORPUS: string[] = [
  JSON.stringify({ a: "x", s: "café", t: true, z: null, o: { k: "v" }, n: 1 }),
  '{"a": {"b": "nested"}, "s": "caf\\u00e9 \\"q\\" \\\\ \\n \\t \\/", "u": "\\u00e9\\u4e2d"}',
  '{"a": "first", "a": "last", "o": {"k": 1}, "o": {"k": "second"}}',
  '{"__proto__": "p", "arr": ["x", "y"], "s": ""}',
  '{"a": "x", "n": 9007199254740993, "big": 1e300, "small": -1.5e-300}',
  '{"a": ["x"], "s": {"deep": "no"}, "t": false, "z": "null"}',
  '\uFEFF{"a": "bom"}',
  '{"a": "nul", "d": "\\u0000"}',
  '{"a": "lone", "d": "\\ud800"}',
  '{"a": "pair", "d": "\\uD83D\\uDE00"}',
  `{"a": "deep", "d": ${"[".repeat(70)}0${"]".repeat(70)}}`,
  '{"a": "exp", "d": 1e1001}',
  '"just a string"',
  "[1, 2, 3]",
  "{}",
];

if (!PG_BIN) console.log(PG_SKIP_MESSAGE);

describe.skipIf(!PG_BIN)("path_values on PostgreSQL", () => {
  let server: PgServer;
  let pg: PgSpool;
  beforeAll(async () => {
    server = await startPostgres();
    await server.createDatabase("paths");
    pg = new PgSpool({ path: server.socket, user: server.user, database: "paths" });
    await migratePg(pg, "0123456789ab");
    await pg.readPaths(PATHS);
    // One group: the set path that writes path_values.
    const jobs = CORPUS.map((payload, i) => [
      ev({ key: `k${i}`, dedupId: `d${i}`, payload, copies: [copy("r", "http:d", { max_events: 1 })] }),
    ]);
    const out = await enqueueGroupPg(pg, jobs, T0);
    for (const o of out) expect("ok" in o).toBe(true);
  }, 60_000);
  afterAll(async () => {
    await pg?.close();
    await server?.stop();
  });

  test("every value given is the server's own reading of the payload at its path", async () => {
    const rows = (await pg.sql.unsafe(
      `SELECT e.id, p.path, (e.path_values -> p.path) -> 0 AS given,
          hookspool_payload_json(e.payload) #> string_to_array(p.path, '.') AS read,
          ((e.path_values -> p.path) -> 0) IS NOT DISTINCT FROM
            (hookspool_payload_json(e.payload) #> string_to_array(p.path, '.')) AS same
        FROM events e CROSS JOIN LATERAL jsonb_object_keys(e.path_values) AS p(path) ORDER BY e.id, p.path`,
    )) as { id: string; path: string; given: unknown; read: unknown; same: boolean }[];
    expect(rows.length).toBeGreaterThan(20);
    for (const r of rows)
      expect({ id: r.id, path: r.path, same: r.same }).toEqual({ id: r.id, path: r.path, same: true });
  });

  test("what each row was given: only what jsonb reads alike, nothing where it might not", async () => {
    const rows = (await pg.sql`SELECT id, path_values FROM events ORDER BY id`) as {
      id: string;
      path_values: Record<string, unknown[]> | string | null;
    }[];
    const given = rows.map((r) =>
      r.path_values === null ? null : typeof r.path_values === "string" ? JSON.parse(r.path_values) : r.path_values,
    );
    expect(given[0]).toEqual({
      a: ["x"],
      s: ["café"],
      t: [true],
      z: [null],
      "a.b": [],
      "arr.0": [],
      "o.k": ["v"],
      u: [],
      ["__proto__"]: [],
    });
    expect(given[2]).toMatchObject({ a: ["last"], "o.k": ["second"] });
    expect(Object.keys(given[3] ?? {})).toContain("__proto__");
    // A number or a path through an array is left out; the rest of the row is given.
    expect(given[4]).not.toHaveProperty("n");
    expect(given[3]).not.toHaveProperty("arr.0");
    // A byte-order mark, \u0000, surrogate escapes, deep nesting, a far exponent: none at all.
    for (const i of [6, 7, 8, 9, 10, 11]) expect({ i, given: given[i] }).toEqual({ i, given: null });
  });

  test("a payload index built over the rows finds what the payload says", async () => {
    await syncPayloadIndexesPg(pg, ["a", "s"]);
    const op = pgStores(pg).operator();
    const found = async (cond: string) =>
      (await op.listBatches({ where: parseWheres([cond]), limit: 100 })).map((b) => b.id).sort((x, y) => x - y);
    expect(await found("a = last")).toEqual([3]);
    expect(await found("a = x")).toEqual([1, 5]);
    expect(await found("a = bom")).toEqual([7]);
    // jsonb takes a surrogate pair, refuses a lone one and \u0000 (the whole payload unread).
    expect(await found("a = pair")).toEqual([10]);
    expect(await found("a = lone")).toEqual([]);
    expect(await found("a = nul")).toEqual([]);
    expect(await found('s = ""')).toEqual([4]);
    expect(await found("s = café")).toEqual([1]);
    // Read from the payload (no path_values for these): the same rule.
    await pg.sql`UPDATE events SET path_values = NULL`;
    expect(await found("a = last")).toEqual([3]);
    expect(await found("a = x")).toEqual([1, 5]);
    expect(await found("s = café")).toEqual([1]);
  });
});
