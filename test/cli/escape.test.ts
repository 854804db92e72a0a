// Text from senders and the spool reaches a terminal escaped: a coalesce key, event type, route,
// destination, dedup id, error or fingerprint cannot recolour, retitle or rewrite the screen.
// --json output stays exact.
import { describe, expect, test } from "bun:test";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { table, visible } from "../../src/cli/format.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { raiseIssue } from "../../src/store/sqlite/issues.ts";
import { cli } from "../helpers/cli.ts";
import { tempDir } from "../helpers/tmp.ts";
import { EXTRA_CONFIG, type Home, initHome, inHome, withSpool } from "./home.ts";

const KEY = "\u001b[31mRED\u0007";
const SHOWN = "\\x1b[31mRED\\x07";
/** Any C0 control but newline (a line break between lines is ours), DEL, or a C1 control. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

/** Nothing a terminal would act on, in stdout or stderr. */
function clean(r: { out: string; err: string }): void {
  expect({ out: RAW_CONTROL.test(r.out), err: RAW_CONTROL.test(r.err) }).toEqual({ out: false, err: false });
}

describe("visible()", () => {
  test("every control character as an escape, a backslash doubled, the rest as it is", () => {
    expect(visible(KEY)).toBe(SHOWN);
    expect(visible("a\nb\rc\td")).toBe("a\\nb\\rc\\td");
    expect(visible("\u0000\u001f\u007f\u0080\u009b\u009f")).toBe("\\x00\\x1f\\x7f\\x80\\x9b\\x9f");
    expect(visible("C:\\x1b")).toBe("C:\\\\x1b");
    expect(visible("é ü 中 — ok")).toBe("é ü 中 — ok");
  });

  test("table() applies it to every cell, and aligns on what is shown", () => {
    expect(
      table(
        ["A", "B"],
        [
          [KEY, "x\ny"],
          ["z", 1],
        ],
      ),
    ).toBe(`A${" ".repeat(SHOWN.length + 1)}B\n${SHOWN}  x\\ny\nz${" ".repeat(SHOWN.length + 1)}1`);
  });
});

const ERROR = "said \u001b[5mno\u001b[0m";
const ROUTE = "evil\u001b]0;owned\u0007";
const DEST = "web\u001b[2J";
const EXTRA = `${EXTRA_CONFIG}
[limits]
min_free_bytes = 1

[destinations."${DEST.replace("\u001b", "\\u001b")}"]
type = "http"
url = "https://receiver.example/hook"
unsigned = true

[[routes]]
name = "${ROUTE.replace("\u001b", "\\u001b").replace("\u0007", "\\u0007")}"
source = "once"
destination = "${DEST.replace("\u001b", "\\u001b")}"
`;

/**
 * One dead batch routed through ROUTE to DEST, keyed KEY, with an event type and dedup id that
 * carry C1 and CR, a payload with DEL and C1 in it, a last error with ESC, and an issue.
 */
async function hostileHome(): Promise<{ h: Home; id: number }> {
  const h = await initHome({ extra: EXTRA });
  const payload = '{"s":"\u007f\u009b2J"}';
  const r = await inHome(
    h,
    ["--json", "enqueue", "--source", "once", "--key", KEY, "--event-type", "push\u009b31m", "--dedup-id", "d\r1"],
    { stdin: payload },
  );
  expect(r).toMatchObject({ code: 0, err: "" });
  const id = JSON.parse(r.out).placed[0].batchId as number;
  withSpool(h.db, (spool) => {
    const now = spool.clock.now();
    const c = claimBatch(spool, { batchId: id, destination: DEST, now, leaseUntil: now + 60, host: "t", pid: 1 });
    if (!c) throw new Error("not claimable");
    markDead(spool, {
      batchId: id,
      attemptId: c.attemptId,
      owner: c.owner,
      now,
      attempt: { klass: "permanent", status: 422, error: "said no", durationMs: 1, counted: true },
    });
    // The store already blanks controls in the errors it writes; a spool from elsewhere may not.
    spool.db.query("UPDATE batches SET last_error = ? WHERE id = ?").run(ERROR, id);
    spool.db.query("UPDATE attempts SET error = ? WHERE batch_id = ?").run(ERROR, id);
    raiseIssue(spool, {
      fingerprint: `delivery:${DEST}:x\u0085`,
      kind: "delivery",
      destination: DEST,
      error: "boom\u001b[1m",
      now,
    });
  });
  return { h, id };
}

describe("human output prints them escaped", () => {
  test("enqueue's confirmation line", async () => {
    const h = await initHome({ extra: EXTRA });
    const r = await inHome(h, ["enqueue", "--source", "once", "--key", "k"], { stdin: "{}" });
    expect(r.code).toBe(0);
    expect(r.out).toContain(`(route ${visible(ROUTE)} -> ${visible(DEST)}, sealed)`);
    expect(r.out).not.toContain("\u001b");
  });

  test("list", async () => {
    const { h } = await hostileHome();
    const r = await inHome(h, ["list"]);
    expect(r.code).toBe(0);
    clean(r);
    expect(r.out).toContain(`  ${visible(ROUTE)}  ${SHOWN}  ${visible(DEST)}  `);
    expect(r.out).toContain("\\x1b]0;owned\\x07");
  });

  test("show, --events, --attempts and --payload", async () => {
    const { h, id } = await hostileHome();
    const r = await inHome(h, ["show", String(id), "--events", "--attempts", "--payload"]);
    expect(r.code).toBe(0);
    clean(r);
    expect(r.out).toMatch(new RegExp(`^key\\s+${SHOWN.replaceAll("\\", "\\\\").replace("[", "\\[")}$`, "m"));
    expect(r.out).toContain(`route         ${visible(ROUTE)}\n`);
    expect(r.out).toContain(`destination   ${visible(DEST)}\n`);
    expect(r.out).toContain("last error    permanent: said \\x1b[5mno\\x1b[0m\n");
    expect(r.out).toMatch(/ {2}yes {6}said \\x1b\[5mno\\x1b\[0m\n/);
    expect(r.out).toContain("push\\x9b31m");
    expect(r.out).toContain("d\\r1");
    expect(r.out).toContain('--- event 1\n{"s":"\\x7f\\x9b2J"}\n');
  });

  test("show --payload of a quarantined request: the raw body and its headers", async () => {
    const h = await initHome();
    const id = withSpool(
      h.db,
      (spool) =>
        quarantine(spool, {
          source: "demo",
          raw: new TextEncoder().encode("{\u001b[2J\n\u0085"),
          headers: { "x-note": "a\u001bb" },
          authHeaders: [],
          url: null,
          reason: "plugin_error:SyntaxError",
        }).batchId,
    );
    const r = await inHome(h, ["show", String(id), "--payload"]);
    expect(r.code).toBe(0);
    clean(r);
    expect(r.out).toContain('headers {"x-note":"a\\\\u001bb"})\n{\\x1b[2J\\n\\x85\n');
  });

  test("status: destinations, their errors and the problem lines", async () => {
    const { h } = await hostileHome();
    withSpool(h.db, (spool) =>
      spool.db.query("UPDATE destinations SET last_error = ? WHERE name = ?").run("refused\u001b[8m", DEST),
    );
    const r = await inHome(h, ["status"]);
    expect(r.code).toBe(1);
    clean(r);
    expect(r.out).toMatch(/^web\\x1b\[2J\s+closed\s/m);
  });

  test("issues", async () => {
    const { h } = await hostileHome();
    const r = await inHome(h, ["issues"]);
    expect(r.code).toBe(0);
    clean(r);
    expect(r.out).toContain(`delivery:${visible(DEST)}:x\\x85`);
    expect(r.out).toContain("boom\\x1b[1m");
  });

  test("check's problem lines", async () => {
    const h = await initHome();
    appendFileSync(h.config, '\n[[routes]]\nname = "r"\nsource = "a\\u001b[31mb"\ndestination = "script:demo-log"\n');
    const r = await inHome(h, ["check"]);
    expect(r.code).toBe(2);
    clean(r);
    expect(r.out).toContain('error: routes[0].source: no source "a\\x1b[31mb"');
    // and the same config error when a command loads it
    const replay = await inHome(h, ["replay", "1"]);
    expect(replay.code).toBe(2);
    clean(replay);
    expect(replay.err).toContain('no source "a\\x1b[31mb"');
  });

  test("source test", async () => {
    const home = tempDir();
    writeFileSync(join(home, "token"), "t0ken\n", { mode: 0o600 });
    writeFileSync(
      join(home, "config.toml"),
      `[sources.m]\ntemplate = { scheme = "static-token", header = "X-Token", key = "k", event_type = ` +
        `"t" }\nsecrets.secret = { file = "${join(home, "token")}" }\naction = "hermes:m"\n`,
    );
    const capture = join(home, "req.http");
    writeFileSync(
      capture,
      `POST /hooks/m HTTP/1.1\nContent-Type: application/json\nX-Token: ` +
        `t0ken\n\n${JSON.stringify({ k: KEY, t: "a\u009bb" })}\n`,
    );
    const r = await cli(["--home", home, "source", "test", "m", "--request", capture]);
    expect(r).toMatchObject({ code: 0, err: "" });
    clean(r);
    expect(r.out).toMatch(new RegExp(`^key\\s+${SHOWN.replaceAll("\\", "\\\\").replace("[", "\\[")}$`, "m"));
    expect(r.out).toContain("a\\x9bb");
    const j = await cli(["--home", home, "--json", "source", "test", "m", "--request", capture]);
    expect(JSON.parse(j.out)).toMatchObject({ key: KEY, event_type: "a\u009bb" });
  });
});

describe("--json stays exact", () => {
  test("list, show and export carry the stored text as it is", async () => {
    const { h, id } = await hostileHome();
    const list = JSON.parse((await inHome(h, ["--json", "list"])).out);
    expect(list[0]).toMatchObject({ key: KEY, route: ROUTE, destination: DEST });
    const show = JSON.parse((await inHome(h, ["--json", "show", String(id), "--events", "--payload"])).out);
    expect(show.batch).toMatchObject({ key: KEY, last_error: ERROR });
    expect(show.events[0]).toMatchObject({ event_type: "push\u009b31m", dedup_id: "d\r1" });
    expect(show.payloads[0].payload).toBe('{"s":"\u007f\u009b2J"}');
    const exported = await inHome(h, ["export"]);
    expect(exported.code).toBe(0);
    clean({ out: "", err: exported.err });
    expect(JSON.parse(exported.out).batch.key).toBe(KEY);
  });
});
