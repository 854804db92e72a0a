// --where from the command line: list (the table and --json), export, replay --dead and
// --delivered, route test, each with the other filters; a malformed condition is one line and
// exit 2; a sender's value matched and shown escaped.
import { describe, expect, test } from "bun:test";
import { WHERE_GRAMMAR } from "../../src/store/where.ts";
import { enqueueJson, type Home, initHome, inHome, withDb } from "./home.ts";

/** The ids list --json gives for these arguments. */
async function listed(h: Home, argv: string[]): Promise<number[]> {
  const r = await inHome(h, ["--json", "list", ...argv]);
  expect(r).toMatchObject({ code: 0, err: "" });
  return (JSON.parse(r.out) as { id: number }[]).map((b) => b.id);
}

describe("--where", () => {
  test("list and export: every condition on one event, with the other filters; --where= too", async () => {
    const h = await initHome();
    const a = await enqueueJson(h, "once", "a", { action: "opened", pull_request: { number: 42 } });
    const b = await enqueueJson(h, "once", "b", { action: "synchronize", pull_request: { number: "42" } });
    const c = await enqueueJson(h, "once", "c", { action: "closed", pull_request: { number: 42 } });
    const d = await enqueueJson(h, "demo", "d", { action: "opened", pull_request: { number: 7 } });
    withDb(h.db, (db) => db.run("UPDATE batches SET last_at = last_at - 86400 WHERE id = ?", [a]));
    const both = ["--where", "pull_request.number = 42", "--where", "action in (opened, synchronize)"];
    expect(await listed(h, both)).toEqual([b, a]);
    expect(await listed(h, ["--where=pull_request.number = 42", "--where=action in (opened, synchronize)"])).toEqual([
      b,
      a,
    ]);
    expect(await listed(h, [...both, "--since", "12h"])).toEqual([b]);
    expect(await listed(h, ["--where", "action = opened"])).toEqual([d, a]);
    expect(await listed(h, ["--where", "action = opened", "--source", "demo"])).toEqual([d]);
    expect(await listed(h, ["--where", 'pull_request.number = "42"'])).toEqual([b]);
    expect(await listed(h, ["--where", "action ~ ose"])).toEqual([c]);
    expect(await listed(h, ["--where", "action != opened", "--limit", "1"])).toEqual([c]);
    expect(await listed(h, ["--where", "nothing exists"])).toEqual([]);
    const table = await inHome(h, ["list", "--where", "action = closed"]);
    expect(table.out.split("\n")[1]).toMatch(new RegExp(`^${c} +sealed +once `));
    expect((await inHome(h, ["list", "--where", "action = nope"])).out.trim()).toBe("no batches");
    const exported = await inHome(h, ["export", ...both]);
    expect(
      exported.out
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l).batch.id),
    ).toEqual([a, b]);
    expect(exported.err).toContain("exported 2 batches");
  });

  test("a malformed condition is one line on stderr and exit 2, in every verb that takes one", async () => {
    const h = await initHome();
    await enqueueJson(h, "once", "a", { n: 1 });
    for (const argv of [
      ["list", "--where", "a == 1"],
      ["list", "--where", "a = 1", "--where"],
      ["list", "--where", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g exists"],
      ["export", "--where", 'a = "open'],
      ["replay", "--dead", "--where", "a in b"],
      ["replay", "--where", "a = 1"],
      ["replay", "3", "--delivered", "--where", "a = 1"],
      ["route", "test", "--where", "= 1"],
      ["route", "test", "--where", "a = 1", "--request", "x.http", "--source", "demo"],
    ]) {
      const r = await inHome(h, argv);
      expect({ argv, code: r.code, out: r.out }).toEqual({ argv, code: 2, out: "" });
      expect({ argv, lines: r.err.trim().split("\n").length }).toEqual({ argv, lines: 1 });
      expect(r.err).toMatch(/^hookspool: /);
      expect(r.err).not.toMatch(/\n\s+at /);
    }
    const bad = await inHome(h, ["list", "--where", "a.b = "]);
    expect(bad.err.split("\n")[0]).toBe(`hookspool: --where (a.b): a value after the operator (${WHERE_GRAMMAR})`);
    const deep = await inHome(h, ["list", "--where", `${Array(33).fill("k").join(".")} = 1`]);
    expect(deep.err).toContain("a path is at most 32 keys deep");
  });

  test("replay --dead and --delivered take only the batches whose events match", async () => {
    const h = await initHome();
    const a = await enqueueJson(h, "once", "a", { repository: { full_name: "acme/api" } });
    const b = await enqueueJson(h, "once", "b", { repository: { full_name: "acme/web" } });
    const c = await enqueueJson(h, "once", "c", { repository: { full_name: "acme/api" } });
    withDb(h.db, (db) => {
      db.run("UPDATE batches SET state = 'dead', dead_reason = 'rejected' WHERE id IN (?, ?)", [a, b]);
      db.run("UPDATE batches SET state = 'delivered', delivered_at = last_at, result = 'ok' WHERE id = ?", [c]);
    });
    const plan = await inHome(h, [
      "--json",
      "replay",
      "--dead",
      "--plan",
      "--where",
      "repository.full_name = acme/web",
    ]);
    expect(plan.code).toBe(0);
    expect(JSON.parse(plan.out).plan).toEqual([expect.objectContaining({ key: "b", batches: 1 })]);
    const r = await inHome(h, ["--json", "replay", "--dead", "--where", "repository.full_name = acme/api"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).replayed.map((x: { batchId: number }) => x.batchId)).toEqual([a]);
    const none = await inHome(h, ["replay", "--dead", "--where", "repository.full_name = acme/nope"]);
    expect(none).toMatchObject({ code: 1, out: "no dead batches match\n" });
    const resent = await inHome(h, ["--json", "replay", "--delivered", "--where", "repository.full_name ~ api"]);
    expect(JSON.parse(resent.out)).toEqual({ resent: [c] });
    const states = withDb(h.db, (db) => db.query("SELECT id, state FROM batches ORDER BY id").all());
    expect(states).toEqual([
      { id: a, state: "retry" },
      { id: b, state: "dead" },
      { id: c, state: "retry" },
    ]);
  });

  test("route test reads only the stored requests whose payload matches", async () => {
    const h = await initHome();
    for (let i = 0; i < 3; i++) await enqueueJson(h, "demo", `a${i}`, { topic: `a${i}`, n: i });
    const all = JSON.parse((await inHome(h, ["--json", "route", "test"])).out);
    expect(all.requests).toBe(3);
    const some = JSON.parse((await inHome(h, ["--json", "route", "test", "--where", "n in (0, 2)"])).out);
    expect(some).toMatchObject({ requests: 2, unchanged: 2 });
    const none = JSON.parse((await inHome(h, ["--json", "route", "test", "--where", "topic = b"])).out);
    expect(none.requests).toBe(0);
  });

  test("a value a sender chose is matched exactly and shown escaped", async () => {
    const h = await initHome();
    const nasty = "\u001b[31m<b>x</b>\u0007";
    const id = await enqueueJson(h, "once", nasty, { who: nasty, note: "a, b" });
    await enqueueJson(h, "once", "other", { who: "x" });
    const r = await inHome(h, ["list", "--where", `who = ${nasty}`, "--where", 'note in ("a, b")']);
    expect(r.code).toBe(0);
    expect(r.out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(r.out).toContain("\\x1b[31m<b>x</b>\\x07");
    expect(r.out.split("\n")[1]).toMatch(new RegExp(`^${id} `));
    expect(r.out).not.toContain("other");
    expect((await listed(h, ["--where", "who ~ <b>"])).length).toBe(1);
  });
});
