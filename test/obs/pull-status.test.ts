// A pull destination where an operator looks, on both backends: status (its document, its
// table and /healthz), list, show, export and the dashboard say it is a pull destination and
// name its consumers, each one's last lease and how many batches it holds leased now; a
// configured pull destination nobody has leased from yet is there with none. The nonce of a
// lease (the secret half of its id) reaches none of them, nor a log line; a consumer's name
// from a hand-written meta row is shown escaped, in a terminal and on a page.
import { afterEach, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sessionOf } from "../../src/dashboard/auth.ts";
import { Dashboard } from "../../src/dashboard/server.ts";
import { loadConfig } from "../../src/config/load.ts";
import { parseLeaseId } from "../../src/intake/pull-wire.ts";
import { createLogger } from "../../src/log.ts";
import { consumerKey } from "../../src/store/pull.ts";
import { cli } from "../helpers/cli.ts";
import { LOG_LINES } from "../helpers/intake.ts";
import { startIntakeOn, type WorldIntake } from "../helpers/intake-world.ts";
import { copy, ev } from "../helpers/spool.ts";
import { onBothWorlds, type OpenWorld } from "../helpers/world.ts";

setDefaultTimeout(30_000);

const TOKEN = "pull-token-status-0123456789";

const CONFIG = `[sources.gh]
action = "pull:laptop"

[destinations."pull:laptop"]
token = { file = "{{secret:laptop}}" }
timeout_s = 300

[destinations."pull:desk"]
token = { file = "{{secret:laptop}}" }
`;

const dashboards: Dashboard[] = [];
afterEach(async () => {
  for (const d of dashboards.splice(0)) await d.stop();
});

async function start(open: OpenWorld): Promise<WorldIntake> {
  return startIntakeOn(open, CONFIG, { secrets: { laptop: TOKEN } });
}

/** One batch per key for pull:laptop, sealed as the dispatcher's tick would. */
async function queue(t: WorldIntake, keys: string[]): Promise<void> {
  for (const [i, key] of keys.entries())
    await t.world.enqueue(
      ev({
        source: "gh",
        key,
        dedupId: `d-${key}`,
        payload: JSON.stringify({ key, i }),
        copies: [copy("gh", "pull:laptop", { quiet_s: 0, max_s: 0, max_events: 1 })],
      }),
    );
  await synced(t);
}

/** Seal what is ready, and (PostgreSQL) move the spool's now_eff to the test's clock. */
async function synced(t: WorldIntake): Promise<void> {
  const d = await t.world.dispatch();
  await d.sealReady(await d.effectiveNow());
}

/** `consumer` leases up to `max` batches through the pull API: their lease ids. */
async function lease(t: WorldIntake, consumer: string, max: number): Promise<string[]> {
  const r = await t.post(`/pull/laptop/lease?wait=0&max=${max}`, "", {
    Authorization: `Bearer ${TOKEN}`,
    "X-Hookspool-Consumer": consumer,
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { leases: { lease: string }[] }).leases.map((l) => l.lease);
}

async function ack(t: WorldIntake, leaseId: string): Promise<void> {
  const r = await t.post("/pull/laptop/ack", JSON.stringify({ acks: [{ lease: leaseId, result: "ok" }] }), {
    Authorization: `Bearer ${TOKEN}`,
    "X-Hookspool-Consumer": "desk-2",
  });
  expect(r.status).toBe(200);
}

/** The CLI over the intake's home, its clock the test's (a process offset, as the CLI takes it). */
async function verb(t: WorldIntake, argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const env = { ...t.env, HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(t.clock.now() - Date.now() / 1000) };
  return cli(["--home", t.home, ...argv], { env });
}

/** A dashboard over the world's dashboard role; `get(path)` fetches one of its pages signed in. */
async function dashboardOf(t: WorldIntake): Promise<(path: string) => Promise<string>> {
  const config = loadConfig({ home: t.home, env: t.env, cwd: t.home }).config;
  const dash = new Dashboard({
    listen: "127.0.0.1:0",
    store: t.world.dashboard,
    config: () => config,
    home: t.home,
    dbPath: join(t.home, "spool.db"),
    now: () => t.clock.now(),
    log: createLogger("dashboard"),
  });
  dashboards.push(dash);
  await dash.start();
  const token = readFileSync(join(t.home, "dashboard.token"), "utf8").trim();
  return async (path) => {
    const r = await fetch(`http://127.0.0.1:${dash.port}${path}`, {
      headers: { Cookie: `hookspool_dashboard_${dash.port}=${sessionOf(token)}` },
    });
    expect(r.status).toBe(200);
    return r.text();
  };
}

onBothWorlds((open) => {
  describe("a pull destination, shown", () => {
    test("status, /healthz, list, show, export and the dashboard: its consumers, and never a nonce", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a", "b", "c", "d"]);
        const leasedAt = t.clock.now();
        const laptop = await lease(t, "laptop-1", 2);
        expect(laptop.length).toBe(2);
        t.clock.advance(5);
        await synced(t);
        const [desk] = await lease(t, "desk-2", 1);
        await ack(t, desk);
        t.clock.advance(10);
        const nonces = [...laptop, desk].map((l) => parseLeaseId(l)?.nonce as string);
        expect(nonces.every((n) => /^[0-9a-f]{32}$/.test(n))).toBe(true);

        const status = await verb(t, ["--json", "status"]);
        const doc = JSON.parse(status.out);
        const dest = doc.destinations["pull:laptop"];
        expect(dest).toMatchObject({ type: "pull", inflight: 2 });
        expect(dest.consumers.map((c: { last_lease_age_s: number }) => ({ ...c, last_lease_age_s: 0 }))).toEqual([
          { name: "desk-2", last_lease_at: leasedAt + 5, last_lease_age_s: 0, leased: 0 },
          { name: "laptop-1", last_lease_at: leasedAt, last_lease_age_s: 0, leased: 2 },
        ]);
        const ages = dest.consumers.map((c: { last_lease_age_s: number }) => c.last_lease_age_s);
        expect(ages[0]).toBeGreaterThanOrEqual(10);
        expect(ages[0]).toBeLessThan(13);
        expect(ages[1]).toBeGreaterThanOrEqual(15);
        expect(ages[1]).toBeLessThan(18);
        // Configured, never leased from and with no batch yet: listed, with no consumer.
        expect(doc.destinations["pull:desk"]).toMatchObject({ type: "pull", consumers: [], inflight: 0 });
        expect(doc.destinations["pull:desk"].state).toBe("closed");

        const health = (await (await fetch(`${t.url}/healthz`)).json()) as {
          destinations: Record<string, { consumers: { name: string }[] }>;
        };
        expect(health.destinations["pull:laptop"].consumers.map((c: { name: string }) => c.name)).toEqual([
          "desk-2",
          "laptop-1",
        ]);

        const human = await verb(t, ["status"]);
        expect(human.out).toMatch(/^PULL DESTINATION\s+CONSUMER\s+LAST LEASE\s+LEASED$/m);
        expect(human.out).toMatch(/^pull:laptop\s+desk-2\s+1[0-2]s ago\s+0$/m);
        expect(human.out).toMatch(/^pull:laptop\s+laptop-1\s+1[5-7]s ago\s+2$/m);
        expect(human.out).toMatch(/^pull:desk\s+none yet\s+-\s+0$/m);

        const listed = JSON.parse((await verb(t, ["--json", "list"])).out) as Record<string, unknown>[];
        const held = listed.filter((b) => b.state === "leased");
        expect(held.map((b) => b.lease_consumer)).toEqual(["laptop-1", "laptop-1"]);
        for (const b of held) expect(b.lease_owner).toMatch(/^pull:laptop-1\/\*:0:\d+$/);
        expect(listed.filter((b) => b.lease_consumer === undefined).length).toBe(2);
        const table = (await verb(t, ["list"])).out;
        expect(table).toMatch(/^ID\s+STATE\s+HELD BY\s+SOURCE\s/m);
        expect(table).toMatch(/^\d+\s+leased\s+laptop-1\s+gh\s/m);
        const id = parseLeaseId(laptop[0])?.batchId as number;
        const shown = await verb(t, ["show", String(id)]);
        expect(shown.out).toMatch(/^lease\s+consumer laptop-1 \(pull:laptop-1\/\*:0:\d+\) until /m);

        const get = await dashboardOf(t);
        const overview = await get("/");
        expect(overview).toContain("<h3>Pull destinations</h3>");
        expect(overview).toContain(`<span data-consumer="pull:laptop laptop-1">laptop-1</span>`);
        expect(overview).toMatch(/<span data-consumer="pull:laptop desk-2">desk-2<\/span><\/td><td>[^<]+Z <span/);
        expect(overview).toContain("none has leased yet");
        const page = await get(`/batches/${id}`);
        expect(page).toContain("held by <b>laptop-1</b>");

        const outputs = [
          status.out,
          JSON.stringify(health),
          human.out,
          JSON.stringify(listed),
          table,
          shown.out,
          (await verb(t, ["--json", "show", String(id), "--attempts"])).out,
          (await verb(t, ["--json", "export"])).out,
          overview,
          page,
          await get("/batches"),
          await get("/batches?state=leased"),
          LOG_LINES.join("\n"),
        ];
        for (const [i, text] of outputs.entries())
          for (const n of nonces) expect({ output: i, leaks: text.includes(n) }).toEqual({ output: i, leaks: false });
      } finally {
        await t.stop();
      }
    });

    test("a consumer's name from a hand-written meta row is shown escaped in a terminal and on a page", async () => {
      const t = await start(open);
      try {
        await queue(t, ["a"]);
        const evil = "ev<i>l\u001b[31m";
        await t.world.rows.run(
          "INSERT INTO meta (key, value) VALUES (?, ?)",
          consumerKey("pull:laptop", evil),
          String(t.clock.now()),
        );
        const human = await verb(t, ["status"]);
        expect(human.out).not.toContain("\u001b");
        expect(human.out).toMatch(/^pull:laptop\s+ev<i>l\\x1b\[31m\s+0s ago\s+0$/m);
        const doc = JSON.parse((await verb(t, ["--json", "status"])).out);
        expect(doc.destinations["pull:laptop"].consumers.map((c: { name: string }) => c.name)).toEqual([evil]);
        const overview = await (await dashboardOf(t))("/");
        expect(overview).not.toContain("\u001b");
        expect(overview).not.toContain("ev<i>");
        expect(overview).toContain("ev&lt;i&gt;l\\x1b[31m");
      } finally {
        await t.stop();
      }
    });
  });
});
