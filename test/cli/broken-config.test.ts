// A config.toml that does not load must not lock the operator out of the spool: list, show,
// status and export read the database alone (one warning); every other command still refuses.
import { describe, expect, test } from "bun:test";
import { appendFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Home, enqueueJson, initHome, inHome, oneErrorLine, storedState } from "./home.ts";

const BAD_VALUE = '[intake]\nmax_body_bytes = "big"\n';

/** A home with one batch (key k) whose config is then replaced by `toml`. */
async function brokenHome(toml: string): Promise<Home> {
  const h = await initHome();
  await enqueueJson(h, "demo", "k", { n: 1 });
  writeFileSync(h.config, toml);
  return h;
}

const warning = (h: Home, problem: string) =>
  `hookspool: warning: ${h.config}: cannot use the config (${problem}); reading the database alone\n`;

describe("a config that does not validate", () => {
  test("list, show and export work from the database, with one warning on stderr", async () => {
    const h = await brokenHome(BAD_VALUE);
    const expected = warning(h, "intake.max_body_bytes: expected an integer, got a string");
    const list = await inHome(h, ["list"]);
    expect(list).toMatchObject({ code: 0, err: expected });
    expect(list.out).toMatch(/^1\s+open\s+demo\s+demo\s+k\s+script:demo-log\s/m);
    const json = await inHome(h, ["--json", "list"]);
    expect(json).toMatchObject({ code: 0, err: expected });
    expect(JSON.parse(json.out)).toMatchObject([{ id: 1, key: "k" }]);
    const show = await inHome(h, ["show", "1", "--payload"]);
    expect(show).toMatchObject({ code: 0, err: expected });
    expect(show.out).toMatch(/^key\s+k$/m);
    expect(show.out).toContain('--- event 1\n{"n":1}\n');
    const exported = await inHome(h, ["export"]);
    expect(exported).toMatchObject({ code: 0, err: `${expected}exported 1 batch (1 event)\n` });
    expect(JSON.parse(exported.out)).toMatchObject({ batch: { id: 1, key: "k" } });
  });

  test("status runs on an empty config: batches, destinations and issues, no sources", async () => {
    const h = await brokenHome(BAD_VALUE);
    const r = await inHome(h, ["--json", "status"]);
    expect(r.err).toBe(warning(h, "intake.max_body_bytes: expected an integer, got a string"));
    const doc = JSON.parse(r.out);
    expect(r.code).toBe(doc.ok ? 0 : 1);
    expect(doc.batches).toMatchObject({ open: 1 });
    expect(Object.keys(doc.destinations)).toEqual(["script:demo-log"]);
    expect(doc.sources).toEqual({});
    expect(doc.issues_open).toBe(0);
    const human = await inHome(h, ["status"]);
    expect(human.out).toMatch(/^batches\s+1 open, /m);
  });

  test("every other command still fails on it, with the one config error line", async () => {
    const h = await brokenHome(BAD_VALUE);
    const before = storedState(h.db);
    for (const argv of [
      ["enqueue", "--source", "demo", "--key", "k"],
      ["replay", "1"],
      ["drop", "1", "--yes"],
      ["migrate"],
      ["metrics"],
      ["prune"],
      ["issues"],
    ]) {
      const r = await inHome(h, argv, { stdin: "{}" });
      expect({ argv, code: r.code, out: r.out }).toEqual({ argv, code: 2, out: "" });
      expect(oneErrorLine(r.err)).toBe(
        `hookspool: ${h.config}: intake.max_body_bytes: expected an integer, got a string`,
      );
    }
    const check = await inHome(h, ["check"]);
    expect(check.code).toBe(2);
    expect(check.out).toContain("error: intake.max_body_bytes: expected an integer, got a string");
    expect(storedState(h.db)).toEqual(before);
  });

  test("large on a destination that is not http: the one error line names its key", async () => {
    const h = await initHome();
    appendFileSync(h.config, '\n[destinations.audit]\ntype = "script"\nargv = ["true"]\nlarge = "refuse"\n');
    const r = await inHome(h, ["prune"]);
    expect({ code: r.code, out: r.out }).toEqual({ code: 2, out: "" });
    expect(oneErrorLine(r.err)).toBe(
      `hookspool: ${h.config}: destinations.audit.large: large applies only to an http destination, not a script ` +
        "one (drop it: beyond max_body_bytes a hermes destination refuses such a body, a script gets its file's path)",
    );
  });

  test("spool.db from a config whose TOML parses is still used; HOOKSPOOL_DB wins", async () => {
    const h = await brokenHome(BAD_VALUE);
    renameSync(h.db, join(h.home, "moved.db"));
    writeFileSync(h.config, `[spool]\ndb = "moved.db"\n${BAD_VALUE}`);
    const r = await inHome(h, ["--json", "list"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject([{ id: 1, key: "k" }]);
    const other = await initHome();
    const env = await inHome(h, ["--json", "list"], { env: { HOOKSPOOL_DB: other.db } });
    expect(env.code).toBe(0);
    expect(JSON.parse(env.out)).toEqual([]);
  });
});

describe("a config whose TOML does not parse", () => {
  test("list and show fall back to --home; the warning names the line", async () => {
    const h = await brokenHome("[intake\nlisten = 1\n");
    const list = await inHome(h, ["list"]);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^1\s+open\s+demo/m);
    const line = oneErrorLine(list.err);
    expect(line).toStartWith(`hookspool: warning: ${h.config}: cannot use the config (line 1, column `);
    expect(line).toContain("invalid TOML");
    expect(line).toEndWith("; reading the database alone");
    const show = await inHome(h, ["show", "1"]);
    expect(show.code).toBe(0);
    expect(show.out).toMatch(/^key\s+k$/m);
    // without --home: HOOKSPOOL_HOME
    const env = await inHome(h, ["list"], { env: { HOOKSPOOL_HOME: h.home } });
    expect(env.code).toBe(0);
  });

  test("with no spool behind it, the warning comes first and then the database's own error", async () => {
    const h = await brokenHome("[intake\n");
    renameSync(h.db, join(h.home, "elsewhere.db"));
    const r = await inHome(h, ["list"]);
    expect(r.code).toBe(2);
    const lines = r.err.trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toStartWith(`hookspool: warning: ${h.config}: cannot use the config`);
    expect(lines[1]).toBe(`hookspool: no spool database at ${h.db} (run hookspool init or hookspool migrate first)`);
  });
});
