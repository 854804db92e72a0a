// hookspool sweep for paddle.billing, the events-api kind its manifest describes, against a
// stand-in for Paddle's List notifications on loopback and a real intake on the same home: of
// the destination's undelivered notifications, the events the intake took are left alone and
// the missing ones are enqueued as the intake would have made them; other destinations' and
// delivered notifications are never asked for. Paging follows meta.pagination.next while
// has_more says so; a 429 stops the run with exit 1 and says Paddle's Retry-After; the key goes
// only into the Bearer header.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { cli } from "../helpers/cli.ts";
import { startIntakeIn, type TestIntake } from "../helpers/intake.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { paddleNotification, paddleSignature, type ProviderApi, startPaddleApi } from "../helpers/provider-apis.ts";
import { tempDir } from "../helpers/tmp.ts";

const KEY = `pdl_sdbx_apikey_${SECRET_SENTINEL}_sweep`;
const SECRET = "pdl_ntfset_kit-test-secret-paddle-sweep";
const SETTING = "ntfset_01h000000000000000000000aa";
const NOW = Math.floor(Date.now() / 1000);
// Newest first (by id, as order_by=id[DESC] asks): 240 undelivered notifications of this
// destination over the last 4 hours, and others Paddle must not be asked for.
const MINE = Array.from({ length: 240 }, (_, i) =>
  paddleNotification(1000 - i, NOW, { ago: 60 * (i + 1), status: i % 5 === 0 ? "needs_retry" : "failed" }),
);
const NOTIFICATIONS = [
  ...MINE,
  paddleNotification(500, NOW, { ago: 100, status: "delivered" }),
  paddleNotification(501, NOW, { ago: 100, setting: "ntfset_01h000000000000000000000bb" }),
].sort((a, b) => (String(b.id) < String(a.id) ? -1 : 1));
const eventId = (n: Record<string, unknown>) => String((n.payload as { event_id: string }).event_id);
// One on the first page (200 a page), two on the second.
const MISSING = [MINE[3], MINE[201], MINE[239]].map(eventId);

let api: ProviderApi;
beforeAll(() => {
  api = startPaddleApi(KEY, NOTIFICATIONS);
});
afterAll(() => api.stop());
const intakes: TestIntake[] = [];
afterAll(async () => {
  for (const t of intakes) await t.stop();
});

async function paddleHome(landed: Record<string, unknown>[]) {
  const home = join(tempDir(), "home");
  expect((await cli(["--home", home, "init"])).code).toBe(0);
  writeFileSync(join(home, "paddle-secret"), SECRET, { mode: 0o600 });
  writeFileSync(join(home, "paddle-key"), KEY, { mode: 0o600 });
  appendFileSync(
    join(home, "config.toml"),
    `\n[intake]\nlisten = "127.0.0.1:0"\n\n[bobbins.paddle]\nbobbin = "paddle.billing"\n` +
      `secrets.secret = { file = "${join(home, "paddle-secret")}" }\n` +
      `secrets.api_key = { file = "${join(home, "paddle-key")}" }\noutputs = { "*" = "script:demo-log" }\n`,
  );
  const intake = await startIntakeIn(home, { clock: new FakeClock(NOW) });
  intakes.push(intake);
  const deliver = async (n: Record<string, unknown>) => {
    const body = JSON.stringify(n.payload);
    return (
      await intake.post("/hooks/paddle", body, {
        "content-type": "application/json",
        "paddle-signature": paddleSignature(SECRET, body, NOW),
      })
    ).status;
  };
  for (let i = 0; i < landed.length; i += 25)
    expect(new Set(await Promise.all(landed.slice(i, i + 25).map(deliver)))).toEqual(new Set([202]));
  const rows = () =>
    intake.db.db
      .query(
        `SELECT e.dedup_id, e.event_type, e.route, b.key, e.trace FROM events e JOIN batches b ON b.id = e.batch_id
         WHERE e.source = 'paddle' ORDER BY e.dedup_id`,
      )
      .all() as { dedup_id: string; event_type: string; route: string; key: string; trace: string }[];
  return { home, intake, deliver, rows };
}

const landedBut = (missing: string[]) => MINE.filter((n) => !missing.includes(eventId(n)));
const sweep = (home: string, ...more: string[]) =>
  cli([
    "--home",
    home,
    "sweep",
    "paddle",
    "--api-url",
    api.url,
    "--param",
    `notification_setting_id=${SETTING}`,
    ...more,
  ]);

describe("hookspool sweep (paddle.billing, events-api)", () => {
  test("enqueues exactly the destination's undelivered events the spool does not hold", async () => {
    const h = await paddleHome(landedBut(MISSING));
    api.seen.length = 0;
    const r = await sweep(h.home);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    for (const m of MISSING)
      expect(r.out).toMatch(new RegExp(`^enqueued ${m} \\(transaction.completed, batch \\d+\\)$`, "m"));
    expect(r.out).toMatch(
      /^paddle \(events-api\): 240 undelivered events listed since \S+, 237 spooled already, 3 enqueued\n$/m,
    );
    const rows = h.rows();
    expect(rows).toHaveLength(240);
    expect(new Set(rows.map((x) => x.dedup_id)).size).toBe(240);
    const swept = rows.filter((x) => JSON.parse(x.trace).stage === "sweep");
    expect(swept.map((x) => x.dedup_id).sort()).toEqual([...MISSING].sort());
    // As the intake keys them: the customer, with the event type from event_type.
    for (const x of swept) {
      const n = MINE.find((m) => eventId(m) === x.dedup_id) as { payload: { data: { customer_id: string } } };
      expect(x).toMatchObject({
        key: n.payload.data.customer_id,
        event_type: "transaction.completed",
        route: "paddle",
      });
    }

    // Paddle's paging: the filters on the first request, then the next URL while has_more.
    expect(api.seen).toHaveLength(2);
    expect(api.seen.every((s) => s.authorized && s.authorization === `Bearer ${KEY}`)).toBe(true);
    const [p1, p2] = api.seen.map((s) => s.query);
    expect(Object.fromEntries(p1)).toMatchObject({
      notification_setting_id: SETTING,
      status: "failed,needs_retry",
      order_by: "id[DESC]",
      per_page: "200",
    });
    // The default window is the source's dedup window (paddle.billing: four days).
    expect(Date.parse(p1.get("from") ?? "") / 1000).toBeGreaterThanOrEqual(NOW - 4 * 86400);
    expect(Date.parse(p1.get("from") ?? "") / 1000).toBeLessThan(NOW - 4 * 86400 + 120);
    expect(p2.get("after")).toBe(String(MINE[199].id));
    expect(r.out).not.toContain(KEY);
  });

  test("a 429 stops the run with exit 1 and says Paddle's Retry-After; --dry-run enqueues nothing", async () => {
    const h = await paddleHome(landedBut(MISSING));
    api.seen.length = 0;
    api.limitFrom = 1;
    try {
      const r = await sweep(h.home);
      expect(r.code).toBe(1);
      expect(r.err).toBe(
        "hookspool: stopped early: Paddle's rate limit (http 429): retry after 17 s; run it again later\n",
      );
      expect(r.out).toMatch(/200 undelivered events listed since \S+, 199 spooled already, 1 enqueued\n$/);
    } finally {
      api.limitFrom = null;
    }
    const dry = await sweep(h.home, "--dry-run", "--json");
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.out)).toMatchObject({ dry_run: true, kind: "events-api", listed: 240, pages: 2 });
    expect(h.rows()).toHaveLength(238);
  });

  test("--param is checked against the manifest's args; --since against Paddle's 90 days", async () => {
    const h = await paddleHome([]);
    const run = (...argv: string[]) => cli(["--home", h.home, "sweep", "paddle", "--api-url", api.url, ...argv]);
    expect((await run()).err).toMatch(
      /^hookspool: --param notification_setting_id=<value> is required: the notification/,
    );
    expect((await run("--param", "notification_setting_id=x", "--param", "status=delivered")).err).toMatch(
      /^hookspool: --param status: paddle\.billing's sweep takes no such parameter \(it takes notification_setting_id/,
    );
    expect((await run("--param", "nonsense")).err).toMatch(/^hookspool: --param takes <name>=<value>/);
    const far = await sweep(h.home, "--since", "91d");
    expect(far.code).toBe(2);
    expect(far.err).toMatch(/^hookspool: --since 91d: Paddle keeps events for 90d/);
    writeFileSync(join(h.home, "paddle-key"), "pdl_sdbx_apikey_wrong", { mode: 0o600 });
    const wrong = await sweep(h.home);
    expect(wrong.code).toBe(2);
    expect(wrong.err).toMatch(/^hookspool: Paddle refused the sweep's key \(http 403\)/);
    expect(wrong.err).not.toContain("pdl_sdbx_apikey_wrong");
  });
});
