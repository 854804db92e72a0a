// hookspool sweep for stripe.events, against a stand-in for Stripe's API on loopback and a real
// intake on the same home: of 200 events Stripe lists as undelivered, the 197 the intake took are
// left alone and exactly the 3 missing ones are enqueued, each as the intake would have made it
// (source, key, event type, dedup id, route and payload), its trace saying the sweep brought it;
// the same holds while the intake receives those 3 events at the same time. Paging follows
// starting_after and has_more back to --since; a 429 stops the run with exit 1; --dry-run
// enqueues nothing; the key goes only into the Authorization header; and the same on PostgreSQL.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { FakeClock } from "../../src/clock.ts";
import { cli } from "../helpers/cli.ts";
import { startIntakeIn, type TestIntake } from "../helpers/intake.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { PG_BIN, type PgServer, startPostgres } from "../helpers/pg.ts";
import { type ProviderApi, startStripeApi, stripeEvent, stripeSignature } from "../helpers/provider-apis.ts";
import { tempDir } from "../helpers/tmp.ts";

const KEY = `rk_test_${SECRET_SENTINEL}_stripe_sweep`;
const WHSEC = "whsec_kit-test-secret-stripe-sweep";
// The CLI runs on the real clock, so the events are dated from it (and so is the intake's clock).
const NOW = Math.floor(Date.now() / 1000);
const TYPES = ["invoice.paid", "payment_intent.succeeded", "customer.updated", "charge.succeeded"];
const id = (i: number) => `evt_1Sweep${String(i).padStart(4, "0")}`;
// Newest first, a minute apart: 200 events over the last 3.3 hours.
const EVENTS = Array.from({ length: 200 }, (_, i) =>
  stripeEvent(id(i), NOW, { ago: 60 * (i + 1), type: TYPES[i % TYPES.length], customer: `cus_${i % 9}` }),
);
// One on the first page, two on the second: an invoice.paid, a payment_intent.succeeded, a charge.succeeded.
const MISSING = [id(8), id(105), id(199)];
const bodyOf = (i: number) => JSON.stringify(EVENTS[i], null, 2);

let api: ProviderApi;
beforeAll(() => {
  api = startStripeApi(KEY, EVENTS, { we_invoices: ["invoice.paid", "charge.succeeded"], we_all: ["*"] });
});
afterAll(() => api.stop());

interface Home {
  home: string;
  intake: TestIntake;
  /** POST event i to the intake as Stripe signs it; resolves to the answer's status. */
  deliver(i: number): Promise<number>;
  rows(): { dedup_id: string; event_type: string; route: string; key: string; destination: string; trace: string }[];
}

const homes: Home[] = [];
afterAll(async () => {
  for (const h of homes) await h.intake.stop();
});

/** A home with a stripe.events instance (a route for invoices), its intake, and `landed` delivered. */
async function stripeHome(landed: number[]): Promise<Home> {
  const home = join(tempDir(), "home");
  expect((await cli(["--home", home, "init"])).code).toBe(0);
  writeFileSync(join(home, "stripe-secret"), WHSEC, { mode: 0o600 });
  writeFileSync(join(home, "stripe-key"), KEY, { mode: 0o600 });
  appendFileSync(
    join(home, "config.toml"),
    `\n[intake]\nlisten = "127.0.0.1:0"\n\n[bobbins.stripe]\nbobbin = "stripe.events"\n` +
      `secrets.secret = { file = "${join(home, "stripe-secret")}" }\n` +
      `secrets.api_key = { file = "${join(home, "stripe-key")}" }\noutputs = { "*" = "script:demo-log" }\n\n` +
      `[[routes]]\nname = "stripe-invoices"\nsource = "stripe"\nmatch = { event_type = "invoice.paid" }\n` +
      `destination = "script:demo-log"\n`,
  );
  const intake = await startIntakeIn(home, { clock: new FakeClock(NOW) });
  const deliver = async (i: number) => {
    const body = bodyOf(i);
    const r = await intake.post("/hooks/stripe", body, {
      "content-type": "application/json; charset=utf-8",
      "stripe-signature": stripeSignature(WHSEC, body, NOW),
    });
    return r.status;
  };
  for (let i = 0; i < landed.length; i += 25)
    expect(new Set(await Promise.all(landed.slice(i, i + 25).map(deliver)))).toEqual(new Set([202]));
  const h: Home = {
    home,
    intake,
    deliver,
    rows: () =>
      intake.db.db
        .query(
          `SELECT e.dedup_id, e.event_type, e.route, b.key, b.destination, e.trace FROM events e
           JOIN batches b ON b.id = e.batch_id WHERE e.source = 'stripe' ORDER BY e.dedup_id`,
        )
        .all() as ReturnType<Home["rows"]>,
  };
  homes.push(h);
  return h;
}

const allBut = (missing: string[]) => EVENTS.map((_, i) => i).filter((i) => !missing.includes(id(i)));

const sweep = (h: Home, ...more: string[]) => cli(["--home", h.home, "sweep", "stripe", "--api-url", api.url, ...more]);

describe("hookspool sweep (stripe.events)", () => {
  test("of 200 undelivered events, enqueues exactly the 3 the spool does not hold, once", async () => {
    const h = await stripeHome(allBut(MISSING));
    expect(h.rows()).toHaveLength(197);
    api.seen.length = 0;
    const r = await sweep(h);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    for (const m of MISSING) expect(r.out).toMatch(new RegExp(`^enqueued ${m} \\(\\S+, batch \\d+\\)$`, "m"));
    expect(r.out).toMatch(
      /^stripe \(stripe-events\): 200 undelivered events listed since \S+, 197 spooled already, 3 enqueued\n$/m,
    );
    const rows = h.rows();
    expect(rows).toHaveLength(200);
    expect(new Set(rows.map((x) => x.dedup_id)).size).toBe(200);
    const swept = rows.filter((x) => JSON.parse(x.trace).stage === "sweep").map((x) => x.dedup_id);
    expect(swept.sort()).toEqual([...MISSING].sort());

    // Stripe's paging: 100 a page, the first page's last id as starting_after, back to --since.
    expect(api.seen.map((s) => s.path)).toEqual(["/v1/events", "/v1/events"]);
    expect(api.seen.every((s) => s.authorized)).toBe(true);
    const [p1, p2] = api.seen.map((s) => s.query);
    expect(p1.get("delivery_success")).toBe("false");
    expect(p1.get("limit")).toBe("100");
    expect(p1.get("starting_after")).toBeNull();
    expect(p2.get("starting_after")).toBe(id(99));
    // The default window is the source's dedup window (stripe.events: three days).
    expect(Number(p1.get("created[gte]"))).toBeGreaterThanOrEqual(NOW - 3 * 86400);
    expect(Number(p1.get("created[gte]"))).toBeLessThan(NOW - 3 * 86400 + 120);
    // The key went only where Stripe's page says: the user name of HTTP Basic.
    expect(r.out).not.toContain(KEY);
    expect(api.seen[0].authorization).toBe(`Basic ${Buffer.from(`${KEY}:`).toString("base64")}`);

    // Run again: nothing is missing now.
    const again = await sweep(h);
    expect(again.code).toBe(0);
    expect(again.out).toMatch(/200 undelivered events listed since \S+, 200 spooled already, 0 enqueued\n$/);
    expect(h.rows()).toHaveLength(200);
  });

  test("each swept event is the event the intake makes of its webhook: key, type, routes, payload", async () => {
    const swept = await stripeHome(allBut(MISSING));
    expect((await sweep(swept)).code).toBe(0);
    // The same three events, delivered by Stripe to a home of their own.
    const delivered = await stripeHome(MISSING.map((m) => EVENTS.findIndex((e) => e.id === m)));
    const facts = (h: Home) =>
      h
        .rows()
        .filter((x) => MISSING.includes(x.dedup_id))
        .map(({ trace, ...x }) => ({ ...x, routedAs: JSON.parse(trace).routed_as ?? JSON.parse(trace).stage }));
    expect(facts(swept)).toEqual(facts(delivered));
    expect(facts(swept).map((x) => x.route)).toContain("stripe-invoices");
    const payloads = (h: Home) =>
      (
        h.intake.db.db
          .query(`SELECT dedup_id, payload FROM events WHERE dedup_id IN (?, ?, ?) ORDER BY dedup_id`)
          .all(...MISSING) as { dedup_id: string; payload: string }[]
      ).map((x) => ({ id: x.dedup_id, payload: JSON.parse(x.payload) }));
    expect(payloads(swept)).toEqual(payloads(delivered));
    const trace = JSON.parse(swept.rows().find((x) => x.dedup_id === MISSING[0])?.trace ?? "{}");
    expect(trace).toMatchObject({ stage: "sweep", sweep: "stripe-events", destination: "script:demo-log" });
  });

  test("while the intake receives the same 3 events, each is still spooled exactly once", async () => {
    const outcomes = new Map<string, Set<string>>(MISSING.map((m) => [m, new Set()]));
    for (let round = 0; round < 3; round++) {
      const h = await stripeHome(allBut(MISSING));
      const [a, b, c] = MISSING.map((m) => EVENTS.findIndex((e) => e.id === m));
      // Stripe's retries keep arriving until the sweep ends: A's from the start (before the sweep
      // looks anything up), C's from the moment the sweep asks for the last page (a race with its
      // lookup and enqueue), B's once the sweep has enqueued B.
      let done = false;
      const retry = async (i: number) => {
        const answers: number[] = [];
        do {
          answers.push(await h.deliver(i));
          await Bun.sleep(5);
        } while (!done);
        return answers;
      };
      let lastPage: () => void = () => {};
      const asked = new Promise<void>((resolve) => {
        lastPage = resolve;
      });
      api.seen.length = 0;
      api.onRequest = (n) => n === 1 && lastPage();
      const retries = Promise.all([
        retry(a),
        (async () => {
          while (!done && !h.rows().some((x) => x.dedup_id === MISSING[1])) await Bun.sleep(2);
          return retry(b);
        })(),
        asked.then(() => retry(c)),
      ]);
      const r = await sweep(h, "--json").finally(() => {
        done = true;
        api.onRequest = null;
      });
      const answers = await retries;
      expect(r.code).toBe(0);
      const report = JSON.parse(r.out) as { spooled: string[]; enqueued: { id: string }[]; duplicates: string[] };
      const rows = h.rows();
      expect(rows).toHaveLength(200);
      MISSING.forEach((m, k) => {
        expect(rows.filter((x) => x.dedup_id === m)).toHaveLength(1);
        // Exactly one of them queued it: the intake (one 202, then 200 duplicate) or the sweep.
        expect(answers[k].every((s) => s === 202 || s === 200)).toBe(true);
        const byIntake = answers[k].filter((s) => s === 202).length;
        const bySweep = report.enqueued.filter((x) => x.id === m).length;
        expect(byIntake + bySweep).toBe(1);
        outcomes.get(m)?.add(bySweep ? "sweep" : report.duplicates.includes(m) ? "raced" : "intake");
      });
    }
    expect(outcomes.get(MISSING[0])).toEqual(new Set(["intake"]));
    expect(outcomes.get(MISSING[1])).toEqual(new Set(["sweep"]));
  });

  test("--dry-run enqueues nothing and says what it would; --json says the same as lists", async () => {
    const h = await stripeHome(allBut(MISSING));
    const r = await sweep(h, "--dry-run");
    expect(r.code).toBe(0);
    for (const m of MISSING) expect(r.out).toMatch(new RegExp(`^would enqueue ${m} \\(\\S+\\)$`, "m"));
    expect(r.out).toMatch(/197 spooled already, 3 would be enqueued\n$/);
    expect(h.rows()).toHaveLength(197);
    const j = JSON.parse((await sweep(h, "--dry-run", "--json")).out);
    expect(j).toMatchObject({ dry_run: true, kind: "stripe-events", listed: 200, pages: 2, stopped: null });
    expect(j.enqueued.map((x: { id: string }) => x.id).sort()).toEqual([...MISSING].sort());
    expect(h.rows()).toHaveLength(197);
  });

  test("a 429 stops the run with exit 1; what the pages before it listed is enqueued", async () => {
    const h = await stripeHome(allBut(MISSING));
    api.seen.length = 0;
    api.limitFrom = 1;
    try {
      const r = await sweep(h);
      expect(r.code).toBe(1);
      expect(r.err).toBe("hookspool: stopped early: Stripe's rate limit (http 429); run it again later\n");
      expect(r.out).toContain(`enqueued ${id(8)}`);
      expect(r.out).toMatch(/100 undelivered events listed since \S+, 99 spooled already, 1 enqueued\n$/);
    } finally {
      api.limitFrom = null;
    }
    // The next run finds the rest.
    const next = await sweep(h);
    expect(next.code).toBe(0);
    expect(next.out).toMatch(/198 spooled already, 2 enqueued\n$/);
  });

  test("--endpoint keeps the types the endpoint is subscribed to; --since is bounded by Stripe's 30 days", async () => {
    const h = await stripeHome(allBut(MISSING));
    // The endpoint takes invoice.paid and charge.succeeded: not id(105), a payment_intent.succeeded.
    const r = await sweep(h, "--endpoint", "we_invoices", "--json");
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out);
    expect(j.enqueued.map((x: { id: string }) => x.id).sort()).toEqual([id(8), id(199)]);
    expect(j.not_for_endpoint).toHaveLength(100);
    expect(j.not_for_endpoint).toContain(id(105));
    expect((await sweep(h, "--endpoint", "we_all", "--dry-run")).out).toMatch(
      /199 spooled already, 1 would be enqueued\n$/,
    );
    const unknown = await sweep(h, "--endpoint", "we_nope");
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(/^hookspool: Stripe knows no webhook endpoint we_nope \(http 404\)/);
    const far = await sweep(h, "--since", "31d");
    expect(far.code).toBe(2);
    expect(far.err).toMatch(/^hookspool: --since 31d: Stripe keeps events for 30d/);
    // Past the dedup window it warns: an event older than that is unknown to the spool.
    const wide = await sweep(h, "--since", "10d", "--dry-run");
    expect(wide.code).toBe(0);
    expect(wide.err).toMatch(/^hookspool: note: --since reaches past source stripe's dedup window \(3d\)/);
  });

  test("a wrong key is one line that names no key; flags of other sweeps are refused", async () => {
    const h = await stripeHome([]);
    writeFileSync(join(h.home, "stripe-key"), "rk_test_wrong", { mode: 0o600 });
    const r = await sweep(h);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^hookspool: Stripe refused the sweep's key \(http 401\)/);
    expect(r.err).not.toContain("rk_test_wrong");
    expect((await sweep(h, "--repo", "a/b")).err).toMatch(
      /^hookspool: --repo is not for stripe\.events's stripe-events/,
    );
    expect((await sweep(h, "--param", "a=b")).err).toMatch(/^hookspool: --param is not for/);
  });
});

describe.skipIf(!PG_BIN)("hookspool sweep (stripe.events) on PostgreSQL", () => {
  let pg: PgServer;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 60_000);
  afterAll(async () => {
    await pg?.stop();
  });

  test("what the database holds is left alone; exactly the missing events are enqueued", async () => {
    await pg.createDatabase("sweep_stripe");
    const env = {
      HOOKSPOOL_BACKEND: "postgres",
      HOOKSPOOL_PG_URL: `postgres://${pg.user}@localhost/sweep_stripe?host=${pg.socketDir}`,
    };
    const home = join(tempDir(), "home");
    expect((await cli(["--home", home, "init"])).code).toBe(0);
    writeFileSync(join(home, "stripe-secret"), WHSEC, { mode: 0o600 });
    writeFileSync(join(home, "stripe-key"), KEY, { mode: 0o600 });
    const file = join(home, "config.toml");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(/^\[spool\]$/m, '[spool]\nurl = { env = "HOOKSPOOL_PG_URL" }'),
    );
    appendFileSync(
      file,
      `\n[bobbins.stripe]\nbobbin = "stripe.events"\nsecrets.secret = { file = "${join(home, "stripe-secret")}" }\n` +
        `secrets.api_key = { file = "${join(home, "stripe-key")}" }\noutputs = { "*" = "script:demo-log" }\n`,
    );
    expect((await cli(["--home", home, "migrate"], { env })).code).toBe(0);
    // 197 of the events reach the database first (a listing without the missing three).
    const partial = startStripeApi(
      KEY,
      EVENTS.filter((e) => !MISSING.includes(String(e.id))),
    );
    try {
      const first = await cli(["--home", home, "sweep", "stripe", "--api-url", partial.url], { env });
      expect({ code: first.code, err: first.err }).toEqual({ code: 0, err: "" });
      expect(first.out).toMatch(/197 undelivered events listed since \S+, 0 spooled already, 197 enqueued\n$/);
    } finally {
      partial.stop();
    }
    const r = await cli(["--home", home, "sweep", "stripe", "--api-url", api.url, "--json"], { env });
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out) as { spooled: string[]; enqueued: { id: string }[] };
    expect(report.spooled).toHaveLength(197);
    expect(report.enqueued.map((x) => x.id).sort()).toEqual([...MISSING].sort());
    const again = await cli(["--home", home, "sweep", "stripe", "--api-url", api.url], { env });
    expect(again.out).toMatch(/200 spooled already, 0 enqueued\n$/);
  }, 60_000);
});
