// The health probes, on both backends, against stand-ins for GitHub's, Stripe's and Shopify's APIs
// on loopback: a disabled Stripe endpoint, a deleted Shopify subscription and an inactive GitHub
// hook each open source:<instance>:disabled_at_provider once, with what the provider says and the
// console link, while later probes find it still so; a healthy answer resolves it; status and
// its degraded list show the provider's word; a probe that cannot tell (a refused key, a rate
// limit) opens nothing; each instance is asked once per probe_every_s by the spool's record; and
// the key goes only into the header its provider's page names.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock } from "../../src/clock.ts";
import { sessionOf } from "../../src/dashboard/auth.ts";
import { Dashboard } from "../../src/dashboard/server.ts";
import { disabledFingerprint } from "../../src/dispatch/probes.ts";
import { Maintenance } from "../../src/dispatch/maintenance.ts";
import { createLogger } from "../../src/log.ts";
import { storeStatus } from "../../src/obs/store-status.ts";
import type { DashboardStore, MaintenanceStore } from "../../src/store/api.ts";
import { configHome, onBothBackends } from "../helpers/backends.ts";
import { cli } from "../helpers/cli.ts";
import { type HealthApi, startHealthApi } from "../helpers/health-apis.ts";
import { SECRET_SENTINEL } from "../helpers/logs.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

const KEY = `key_${SECRET_SENTINEL}_probe`;
const SUB = "gid://shopify/WebhookSubscription/8123";

let api: HealthApi;
beforeAll(() => {
  api = startHealthApi(KEY);
});
afterAll(() => api.stop());

function home() {
  const dir = tempDir();
  for (const f of ["gh", "stripe", "shop"]) writeFileSync(join(dir, `${f}-secret`), `whsec_${f}`, { mode: 0o600 });
  writeFileSync(join(dir, "key"), KEY, { mode: 0o600 });
  const secret = (f: string) => `secrets.secret = { file = "${join(dir, `${f}-secret`)}" }\n`;
  const key = (name: string) => `secrets.${name} = { file = "${join(dir, "key")}" }\n`;
  return configHome(
    `[destinations.a]\ntype = "http"\nurl = "http://127.0.0.1:9/in"\nallow_insecure = true\nunsigned = true\n\n` +
      `[bobbins.gh]\nbobbin = "github.repo"\n${secret("gh")}${key("sweep_token")}outputs = { "*" = "a" }\n` +
      `health = { repo = "octo-org/hello", hook = "42", api_url = "${api.url}" }\n\n` +
      `[bobbins.stripe]\nbobbin = "stripe.events"\n${secret("stripe")}${key("api_key")}outputs = { "*" = "a" }\n` +
      `health = { endpoint = "we_probe1", api_url = "${api.url}" }\nprobe_every_s = 600\n\n` +
      `[bobbins.shop]\nbobbin = "shopify.shop"\n${secret("shop")}${key("admin_token")}outputs = { "*" = "a" }\n` +
      `health = { shop = "acme.myshopify.com", subscription = "${SUB}", api_url = "${api.url}" }\n\n` +
      // An instance with its key but no health table: never probed.
      `[bobbins.quiet]\nbobbin = "stripe.events"\n${secret("stripe")}${key("api_key")}outputs = { "*" = "a" }\n`,
  );
}

/** Make every instance's next probe due now, as an interval having passed does (the spool's record). */
async function due(store: MaintenanceStore, now: number): Promise<void> {
  for (const r of await store.probeRecords()) await store.noteProbe({ ...r, next_at: now - 1 });
}

function healthyProviders(): void {
  api.state.limited = false;
  api.state.github = {
    "octo-org/hello#42": { active: true, last_response: { code: 200, status: "active", message: "OK" } },
  };
  api.state.stripe = { we_probe1: { status: "enabled", url: "https://hooks.example.com/hooks/stripe" } };
  api.state.shopify = { [SUB]: { topic: "ORDERS_CREATE", uri: "https://hooks.example.com/hooks/shop" } };
}

/** The dashboard's overview over `store`, signed in. */
async function overviewOf(h: ReturnType<typeof home>, store: DashboardStore, now: number): Promise<string> {
  const dash = new Dashboard({
    listen: "127.0.0.1:0",
    store,
    config: () => h.config,
    home: h.home,
    dbPath: join(h.home, "spool.db"),
    now: () => now,
    log: createLogger("dashboard"),
  });
  await dash.start();
  try {
    const token = readFileSync(join(h.home, "dashboard.token"), "utf8").trim();
    const r = await fetch(`http://127.0.0.1:${dash.port}/`, {
      headers: { Cookie: `hookspool_dashboard_${dash.port}=${sessionOf(token)}` },
    });
    expect(r.status).toBe(200);
    return await r.text();
  } finally {
    await dash.stop();
  }
}

onBothBackends((open, backend) => {
  test("each provider's own word: an issue once per onset, resolved when healthy, shown in status", async () => {
    healthyProviders();
    api.seen.length = 0;
    const h = home();
    // SQLite's spool in the home, so that the CLI's status reads it too.
    const b = await open({ dir: h.home });
    const leader = await b.dispatch();
    const m = new Maintenance({
      store: b.maintenance,
      leader,
      config: () => h.config,
      clock: systemClock,
      log: createLogger("maintenance"),
      env: { HOOKSPOOL_ALERT_DRY: "1" },
    });
    try {
      const issue = (i: string) => b.maintenance.issueByFingerprint(disabledFingerprint(i));
      const status = async () =>
        (
          await storeStatus(b.status, h.config, b.spool?.path ?? join(h.home, "spool.db"), {
            now: await leader.effectiveNow(),
            env: {},
          })
        ).doc;

      // All healthy: one request per probed instance, none for the instance without a health table.
      await m.tick();
      expect(api.seen.map((s) => s.path).sort()).toEqual([
        "/admin/api/2026-10/graphql.json",
        "/repos/octo-org/hello/hooks/42",
        "/v1/webhook_endpoints/we_probe1",
      ]);
      expect(api.seen.every((s) => s.authorized)).toBe(true);
      const records = await b.maintenance.probeRecords();
      expect(records.map((r) => [r.instance, r.healthy])).toEqual([
        ["gh", true],
        ["shop", true],
        ["stripe", true],
      ]);
      const stripeRecord = records.find((r) => r.instance === "stripe");
      expect((stripeRecord?.next_at ?? 0) - (stripeRecord?.at ?? 0)).toBe(600);
      const gh = records.find((r) => r.instance === "gh");
      expect((gh?.next_at ?? 0) - (gh?.at ?? 0)).toBe(3600);
      let doc = await status();
      expect(doc.sources.stripe.probe?.healthy).toBe(true);
      expect(doc.sources.quiet.probe).toBeUndefined();
      expect(doc.degraded.filter((d) => d.includes("provider"))).toEqual([]);

      // Within the interval nobody is asked again.
      await m.tick();
      expect(api.seen.length).toBe(3);

      // The providers turn: Stripe disabled the endpoint, Shopify deleted the subscription, the
      // GitHub hook was deactivated.
      api.state.stripe.we_probe1.status = "disabled";
      // What a provider says is someone's text: shown escaped everywhere.
      api.state.stripe.we_probe1.url = "https://hooks.example.com/<b>x</b>\u001b[31m";
      api.state.shopify = {};
      api.state.github["octo-org/hello#42"].active = false;
      await due(b.maintenance, await leader.effectiveNow());
      await m.tick();
      expect(api.seen.length).toBe(6);
      const stripeIssue = await issue("stripe");
      expect(stripeIssue?.state).toBe("open");
      expect(stripeIssue?.kind).toBe("source_silent");
      expect(stripeIssue?.last_error).toStartWith("Stripe no longer sends to this instance: status=disabled");
      expect(stripeIssue?.last_error).toContain("https://dashboard.stripe.com/webhooks/we_probe1");
      expect((await issue("shop"))?.last_error).toContain("data.webhookSubscription.topic=null");
      expect((await issue("gh"))?.last_error).toContain("active=false");
      expect((await issue("gh"))?.last_error).toContain("https://github.com/octo-org/hello/settings/hooks/42");
      doc = await status();
      expect(doc.ok).toBe(false);
      for (const i of ["gh", "shop", "stripe"]) {
        expect(doc.sources[i].probe?.healthy).toBe(false);
        expect(doc.degraded.some((d) => d.startsWith(`source ${i}: disabled at the provider`))).toBe(true);
      }
      const overview = await overviewOf(h, b.dashboard, await leader.effectiveNow());
      expect(overview).toContain("source stripe: disabled at the provider (status=disabled");
      expect(overview).toContain("&lt;b&gt;x&lt;/b&gt;");
      expect(overview).not.toContain("<b>x</b>");
      expect(overview).not.toContain("\u001b");
      if (backend === "sqlite") {
        const human = await cli(["--home", h.home, "status"]);
        expect(human.code).toBe(1);
        const said = String.raw`disabled: status=disabled, url=https://hooks.example.com/<b>x</b>\x1b[31m`;
        const row = human.out.split("\n").find((l) => l.startsWith("stripe "));
        expect(row).toMatch(/\(asked \d+s ago\)$/);
        expect(row).toContain(said);
        expect(human.out).toMatch(/^gh\s.*disabled: active=false/m);
        expect(human.out).not.toContain("\u001b");
      }

      // Asked again while still disabled: the same issues, each opened once.
      await due(b.maintenance, await leader.effectiveNow());
      await m.tick();
      expect(api.seen.length).toBe(9);
      for (const i of ["gh", "shop", "stripe"]) {
        const row = await issue(i);
        expect(row?.state).toBe("open");
        expect(row?.count).toBe(1);
      }
      expect((await issue("stripe"))?.id).toBe(stripeIssue?.id as number);

      // Healthy again: each issue resolves.
      healthyProviders();
      await due(b.maintenance, await leader.effectiveNow());
      await m.tick();
      for (const i of ["gh", "shop", "stripe"]) expect((await issue(i))?.state).toBe("resolved");
      expect((await status()).degraded.filter((d) => d.includes("provider"))).toEqual([]);

      // The key went only into each provider's auth header, never into a record or an issue.
      for (const s of api.seen) {
        expect(s.path).not.toContain(SECRET_SENTINEL);
        expect(s.body).not.toContain(SECRET_SENTINEL);
        const basic = `Basic ${Buffer.from(`${KEY}:`).toString("base64")}`;
        expect(s.headers.filter((v) => v.includes(KEY) || v === basic).length).toBe(1);
      }
      const kept = JSON.stringify([await b.maintenance.probeRecords(), await b.operator.listIssues({})]);
      expect(kept).not.toContain(SECRET_SENTINEL);
    } finally {
      await leader.release("host", 1);
      await b.close();
    }
  });

  test("a hook that is gone, a failed last delivery, a refused key and a rate limit", async () => {
    healthyProviders();
    const h = home();
    const b = await open();
    const leader = await b.dispatch();
    const m = new Maintenance({
      store: b.maintenance,
      leader,
      config: () => h.config,
      clock: systemClock,
      log: createLogger("maintenance"),
      env: { HOOKSPOOL_ALERT_DRY: "1" },
    });
    try {
      const issue = (i: string) => b.maintenance.issueByFingerprint(disabledFingerprint(i));
      const record = async (i: string) => (await b.maintenance.probeRecords()).find((r) => r.instance === i);
      const again = async () => {
        await due(b.maintenance, await leader.effectiveNow());
        await m.tick();
      };

      // GitHub's last delivery to us failed: the provider's word is that it is not reaching us.
      api.state.github["octo-org/hello#42"].last_response = { code: 502, status: "failed", message: "Bad Gateway" };
      await m.tick();
      expect((await issue("gh"))?.last_error).toContain("last_response.code=502");
      // No delivery in 30 days: GitHub answers a null code, which is healthy.
      api.state.github["octo-org/hello#42"].last_response = { code: null, status: "unused", message: null };
      await again();
      expect((await issue("gh"))?.state).toBe("resolved");
      // The hook deleted: 404.
      api.state.github = {};
      await again();
      expect((await record("gh"))?.healthy).toBe(false);
      expect((await issue("gh"))?.last_error).toContain("http 404");
      expect((await issue("gh"))?.state).toBe("open");

      // A rate limit and then a refused key: the probe cannot tell, and changes no issue.
      healthyProviders();
      api.state.stripe.we_probe1.status = "disabled";
      await again();
      expect((await issue("stripe"))?.state).toBe("open");
      api.state.limited = true;
      await again();
      const limited = await record("stripe");
      expect(limited?.healthy).toBeNull();
      expect(limited?.error).toContain("rate limit");
      expect((await issue("stripe"))?.state).toBe("open");
      api.state.limited = false;
      const wrong = startHealthApi("another-key");
      try {
        const { config } = configHomeWithUrl(h.home, wrong.url);
        const m2 = new Maintenance({
          store: b.maintenance,
          leader,
          config: () => config,
          clock: systemClock,
          log: createLogger("maintenance"),
          env: { HOOKSPOOL_ALERT_DRY: "1" },
        });
        await due(b.maintenance, await leader.effectiveNow());
        await m2.tick();
        const refused = await record("stripe");
        expect(refused?.healthy).toBeNull();
        expect(refused?.error).toContain("refused the probe's token (http 401)");
        expect(refused?.error).not.toContain(SECRET_SENTINEL);
        expect((await issue("stripe"))?.state).toBe("open");
        const doc = (
          await storeStatus(b.status, config, b.spool?.path ?? join(h.home, "spool.db"), {
            now: await leader.effectiveNow(),
            env: {},
          })
        ).doc;
        expect(doc.sources.stripe.probe?.healthy).toBeNull();
        expect(doc.sources.stripe.probe?.error).toContain("http 401");
      } finally {
        wrong.stop();
      }
    } finally {
      await leader.release("host", 1);
      await b.close();
    }
  });
});

/** The home's config with every probe pointed at another stand-in. */
function configHomeWithUrl(dir: string, url: string) {
  return configHome(readFileSync(join(dir, "config.toml"), "utf8").replaceAll(api.url, url));
}
