// The dashboard's handlers over real HTTP on loopback: nothing without the token, the token kept
// in an HttpOnly SameSite=Strict cookie, Host and Origin checked, CSRF on every state change,
// actions off by default and recorded when on, every stored string inert in the page.
import { afterEach, describe, expect, test } from "bun:test";
import { appendFileSync, chmodSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { Dashboard } from "../../src/dashboard/server.ts";
import { csrfOf, sessionOf } from "../../src/dashboard/auth.ts";
import { ackReadings, ackSeries, parseIntakeMetrics } from "../../src/dashboard/intake-view.ts";
import { IntakeMetrics } from "../../src/intake/metrics.ts";
import { createLogger } from "../../src/log.ts";
import { sqliteStores } from "../../src/store/open.ts";
import { claimBatch } from "../../src/store/sqlite/claim.ts";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import { raiseIssueTx } from "../../src/store/sqlite/issues.ts";
import { markDead } from "../../src/store/sqlite/marks.ts";
import { quarantine } from "../../src/store/sqlite/enqueue.ts";
import { stepPoll } from "../../src/store/sqlite/polls.ts";
import { enqueueJson, type Home, initHome } from "../cli/home.ts";

const NASTY_KEY = `<script>alert("k")</script>\u0007'&`;
const NASTY_TYPE = `<img src=x onerror=alert(1)>`;

interface Running {
  h: Home;
  spool: SqliteSpool;
  dash: Dashboard;
  base: string;
  token: string;
}

const open: Running[] = [];
afterEach(async () => {
  for (const r of open.splice(0)) {
    await r.dash.stop();
    r.spool.close();
  }
});

async function start(o: { actions?: boolean; seed?: (h: Home) => Promise<void> } = {}): Promise<Running> {
  const h = await initHome();
  if (o.actions) appendFileSync(h.config, "\n[dashboard]\nactions = true\n");
  await o.seed?.(h);
  const loaded = loadConfig({ home: h.home, env: {} });
  const spool = openSpool(h.db);
  const dash = new Dashboard({
    listen: "127.0.0.1:0",
    store: sqliteStores(spool).dashboard(),
    config: () => loaded.config,
    home: h.home,
    dbPath: h.db,
    now: () => Date.now() / 1000,
    log: createLogger("dashboard"),
  });
  await dash.start();
  const token = readFileSync(join(h.home, "dashboard.token"), "utf8").trim();
  const r = { h, spool, dash, base: `http://127.0.0.1:${dash.port}`, token };
  open.push(r);
  return r;
}

const cookie = (r: Running) => ({ Cookie: `hookspool_dashboard_${r.dash.port}=${sessionOf(r.token)}` });
const get = (r: Running, path: string, headers: Record<string, string> = cookie(r)) =>
  fetch(r.base + path, { headers, redirect: "manual" });
function post(
  r: Running,
  path: string,
  fields: Record<string, string>,
  headers: Record<string, string> = { ...cookie(r), Origin: r.base },
) {
  return fetch(r.base + path, { method: "POST", body: new URLSearchParams(fields), headers, redirect: "manual" });
}

/** A batch made dead by a receiver's refusal, through the store's own marks. */
function deadBatch(spool: SqliteSpool, id: number): void {
  const now = Date.now() / 1000;
  const c = claimBatch(spool, {
    batchId: id,
    destination: "script:demo-log",
    now,
    leaseUntil: now + 60,
    host: "t",
    pid: 1,
  });
  if (!c) throw new Error("not claimable");
  markDead(spool, {
    batchId: id,
    attemptId: c.attemptId,
    owner: c.owner,
    now,
    attempt: { klass: "permanent", status: 422, error: "refused", durationMs: 3, counted: true },
  });
}

describe("dashboard access", () => {
  test("the token is made once, 0600, and printed once as a URL", async () => {
    const r = await start();
    expect(statSync(join(r.h.home, "dashboard.token")).mode & 0o777).toBe(0o600);
    expect(r.token.length).toBeGreaterThanOrEqual(32);
    expect(r.dash.firstUrl).toBe(`http://127.0.0.1:${r.dash.port}/?token=${r.token}`);
    // A second start finds the token and prints no URL with it.
    const again = new Dashboard({
      listen: "127.0.0.1:0",
      store: sqliteStores(r.spool).dashboard(),
      config: () => loadConfig({ home: r.h.home, env: {} }).config,
      home: r.h.home,
      dbPath: r.h.db,
      now: () => 0,
      log: createLogger("dashboard"),
    });
    chmodSync(join(r.h.home, "dashboard.token"), 0o644);
    await again.start();
    try {
      expect(again.firstUrl).toBeNull();
      expect(statSync(join(r.h.home, "dashboard.token")).mode & 0o777).toBe(0o600);
      expect(readFileSync(join(r.h.home, "dashboard.token"), "utf8").trim()).toBe(r.token);
    } finally {
      await again.stop();
    }
  });

  test("every page and asset without the token is 401, and says nothing of the spool", async () => {
    const r = await start({ seed: async (h) => void (await enqueueJson(h, "demo", "secret-key", { n: 1 })) });
    for (const path of [
      "/",
      "/batches",
      "/batches/1",
      "/batches/1/payloads",
      "/sources",
      "/issues",
      "/live",
      "/live/events",
      "/assets/client.js",
    ]) {
      const res = await get(r, path, {});
      expect(res.status).toBe(401);
      expect(await res.text()).not.toContain("secret-key");
    }
    const wrong = await get(r, "/", { Cookie: `hookspool_dashboard_${r.dash.port}=${"x".repeat(64)}` });
    expect(wrong.status).toBe(401);
    // The file's token itself is not a session: only the value the printed URL's visit set is.
    expect((await get(r, "/", { Cookie: `hookspool_dashboard_${r.dash.port}=${r.token}` })).status).toBe(401);
    // Another port's cookie (another dashboard on this host) is not this one's.
    expect((await get(r, "/", { Cookie: `hookspool_dashboard_1=${sessionOf(r.token)}` })).status).toBe(401);
    expect((await get(r, "/?token=nope", {})).status).toBe(401);
  });

  test("the printed URL sets an HttpOnly SameSite=Strict cookie and drops the token from the address", async () => {
    const r = await start();
    const res = await get(r, `/batches?state=dead&token=${r.token}`, {});
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/batches?state=dead");
    const set = res.headers.get("set-cookie") ?? "";
    expect(set).toStartWith(`hookspool_dashboard_${r.dash.port}=${sessionOf(r.token)};`);
    expect(set).not.toContain(r.token);
    expect(set).toContain("HttpOnly");
    expect(set).toContain("SameSite=Strict");
    const page = await get(r, "/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
  });

  test("a foreign Host (DNS rebinding) is 403 even with the token; a POST needs its own Origin", async () => {
    const r = await start({ actions: true });
    expect((await get(r, "/", { ...cookie(r), Host: "evil.example" })).status).toBe(403);
    expect((await get(r, "/", { ...cookie(r), Host: `evil.example:${r.dash.port}` })).status).toBe(403);
    expect((await get(r, "/", { ...cookie(r), Host: `localhost:${r.dash.port}` })).status).toBe(200);
    const csrf = csrfOf(r.token);
    expect((await post(r, "/actions/pause", { destination: "script:demo-log", csrf }, { ...cookie(r) })).status).toBe(
      403,
    );
    expect(
      (
        await post(
          r,
          "/actions/pause",
          { destination: "script:demo-log", csrf },
          { ...cookie(r), Origin: "http://evil.example" },
        )
      ).status,
    ).toBe(403);
    expect(
      (
        await post(
          r,
          "/actions/pause",
          { destination: "script:demo-log", csrf },
          { ...cookie(r), Origin: `http://evil.example:${r.dash.port}` },
        )
      ).status,
    ).toBe(403);
    // Nothing was paused by any of them.
    expect(await (await get(r, "/")).text()).not.toContain(">paused<");
  });

  test("a missing or malformed Host is 400, never a 500, on every page", async () => {
    const r = await start();
    const { connect } = await import("node:net");
    const raw = (text: string) =>
      new Promise<string>((resolve) => {
        let out = "";
        const c = connect(r.dash.port, "127.0.0.1", () => c.write(text));
        c.on("data", (d) => {
          out += d.toString();
        });
        c.on("close", () => resolve(out));
        setTimeout(() => {
          c.destroy();
          resolve(out);
        }, 1500);
      });
    for (const host of [null, "a b", "[", "a/b", "%", "x:y:z"]) {
      for (const path of ["/", "/batches", "/assets/client.js"]) {
        const answer = await raw(
          `GET ${path} HTTP/1.1\r\n${host === null ? "" : `Host: ${host}\r\n`}Connection: close\r\n\r\n`,
        );
        expect({ host, path, status: answer.split(" ")[1] }).toEqual({ host, path, status: "400" });
      }
    }
  });

  test("refuses to bind a non-loopback address or the intake's, with one clear message", async () => {
    const h = await initHome();
    const loaded = loadConfig({ home: h.home, env: {} });
    const spool = openSpool(h.db);
    try {
      const make = (listen: string) =>
        new Dashboard({
          listen,
          store: sqliteStores(spool).dashboard(),
          config: () => loaded.config,
          home: h.home,
          dbPath: h.db,
          now: () => 0,
          log: createLogger("dashboard"),
        });
      await expect(make("0.0.0.0:0").start()).rejects.toThrow(
        /not a loopback address; the dashboard refuses to bind it/,
      );
      await expect(make(loaded.config.intake.listen).start()).rejects.toThrow(/must not be the intake's address/);
      await expect(make("unix:/tmp/x.sock").start()).rejects.toThrow(/must be host:port/);
      await expect(make("nonsense").start()).rejects.toThrow(/^dashboard\.listen: /);
    } finally {
      spool.close();
    }
  });
});

describe("dashboard actions", () => {
  test("read-only by default: no buttons, and a POST is refused with the spool untouched", async () => {
    let id = 0;
    const r = await start({ seed: async (h) => void (id = await enqueueJson(h, "once", "k", { n: 1 })) });
    deadBatch(r.spool, id);
    const page = await (await get(r, `/batches/${id}`)).text();
    expect(page).toContain("dead");
    expect(page).not.toContain('<form class="inline" method="post"');
    const res = await post(r, "/actions/replay", { batch: String(id), csrf: csrfOf(r.token) });
    expect(res.status).toBe(403);
    expect(await res.text()).toContain("actions are off");
    expect(r.spool.db.query("SELECT state FROM batches WHERE id = ?").get(id)).toEqual({ state: "dead" });
  });

  test("a state change without the right CSRF token is 403 and changes nothing", async () => {
    let id = 0;
    const r = await start({
      actions: true,
      seed: async (h) => void (id = await enqueueJson(h, "once", "k", { n: 1 })),
    });
    deadBatch(r.spool, id);
    expect((await post(r, "/actions/replay", { batch: String(id) })).status).toBe(403);
    expect((await post(r, "/actions/replay", { batch: String(id), csrf: "0".repeat(40) })).status).toBe(403);
    expect((await post(r, "/actions/replay", { batch: String(id), csrf: r.token })).status).toBe(403);
    expect(r.spool.db.query("SELECT state FROM batches WHERE id = ?").get(id)).toEqual({ state: "dead" });
    expect(r.spool.db.query("SELECT COUNT(*) AS n FROM actions").get()).toEqual({ n: 0 });
  });

  test("replay, pause, resume and an issue's ack go through the store and are recorded", async () => {
    let id = 0;
    const r = await start({
      actions: true,
      seed: async (h) => void (id = await enqueueJson(h, "once", "k", { n: 1 })),
    });
    deadBatch(r.spool, id);
    const csrf = csrfOf(r.token);
    const page = await (await get(r, `/batches/${id}`)).text();
    expect(page).toContain(`name="csrf" value="${csrf}"`);
    const replayed = await post(r, "/actions/replay", { batch: String(id), csrf });
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get("location")).toBe(`/batches/${id}`);
    expect(r.spool.db.query("SELECT state FROM batches WHERE id = ?").get(id)).toEqual({ state: "retry" });
    // Twice: the batch is no longer dead, so the store refuses and nothing more is recorded.
    const again = await post(r, "/actions/replay", { batch: String(id), csrf });
    expect(again.status).toBe(409);
    expect((await post(r, "/actions/pause", { destination: "script:demo-log", csrf })).status).toBe(303);
    expect(r.spool.db.query("SELECT state, paused_by FROM destinations WHERE name = 'script:demo-log'").get()).toEqual({
      state: "paused",
      paused_by: "the dashboard",
    });
    expect((await post(r, "/actions/resume", { destination: "script:demo-log", csrf })).status).toBe(303);
    expect((await post(r, "/actions/pause", { destination: "nowhere", csrf })).status).toBe(404);
    const issue = r.spool.db.transaction(() =>
      raiseIssueTx(r.spool.db, {
        fingerprint: "delivery:script:demo-log:k",
        kind: "delivery",
        destination: "script:demo-log",
        batchId: id,
        error: "HTTP 422",
        now: Date.now() / 1000,
      }),
    )();
    expect((await post(r, "/actions/issue", { id: String(issue.id), verb: "ack", csrf })).status).toBe(303);
    expect(r.spool.db.query("SELECT state FROM issues WHERE id = ?").get(issue.id)).toEqual({ state: "acked" });
    expect((await post(r, "/actions/issue", { id: "1", verb: "drop-table", csrf })).status).toBe(400);
    // An action that changes nothing is refused and not recorded.
    expect((await post(r, "/actions/issue", { id: "999999", verb: "ack", csrf })).status).toBe(404);
    expect((await post(r, "/actions/issue", { id: String(issue.id), verb: "ack", csrf })).status).toBe(409);
    expect((await post(r, "/actions/resume", { destination: "script:demo-log", csrf })).status).toBe(409);
    expect((await post(r, "/actions/replay", { batch: "1 OR 1=1", csrf })).status).toBe(400);
    const recorded = r.spool.db.query("SELECT via, verb, target FROM actions ORDER BY id").all();
    expect(recorded).toEqual([
      { via: "dashboard", verb: "replay", target: `batch ${id}` },
      { via: "dashboard", verb: "pause", target: "destination script:demo-log" },
      { via: "dashboard", verb: "resume", target: "destination script:demo-log" },
      { via: "dashboard", verb: "ack", target: `issue ${issue.id}` },
    ]);
    expect(await (await get(r, "/")).text()).toContain("Recent actions");
  });
});

describe("dashboard pages", () => {
  test("keys and event types with markup and control characters are inert on every page", async () => {
    let id = 0;
    const r = await start({
      seed: async (h) => void (id = await enqueueJson(h, "once", NASTY_KEY, { n: 1 }, ["--event-type", NASTY_TYPE])),
    });
    deadBatch(r.spool, id);
    for (const path of [
      "/",
      "/batches",
      `/batches/${id}`,
      `/batches/${id}/payloads`,
      "/sources",
      "/issues",
      "/live",
      `/batches?key=${encodeURIComponent(NASTY_KEY)}`,
    ]) {
      const res = await get(r, path);
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).not.toContain("<script>alert");
      expect(html).not.toContain("<img src=x");
      expect(html).not.toContain("\u0007");
      // The only scripts are the dashboard's own and its JSON data block.
      for (const m of html.matchAll(/<script([^>]*)>/g))
        expect(m[1]).toMatch(/^ (src="\/assets\/(uplot|client)\.js"|type="application\/json" id="chart-data")$/);
    }
    const batch = await (await get(r, `/batches/${id}`)).text();
    expect(batch).toContain("&lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;\\x07&#39;&amp;");
    expect(batch).toContain("&lt;img src=x onerror=alert(1)&gt;");
    const list = await (await get(r, `/batches?key=${encodeURIComponent(NASTY_KEY)}`)).text();
    expect(list).toContain(`href="/batches/${id}"`);
  });

  test("the batches list filters like list, pages by id, and says what is wrong with a bad filter", async () => {
    const ids: number[] = [];
    const r = await start({
      seed: async (h) => {
        for (let i = 0; i < 3; i++) ids.push(await enqueueJson(h, "once", `key-${i}`, { n: i }));
      },
    });
    deadBatch(r.spool, ids[1]);
    const dead = await (await get(r, "/batches?state=dead")).text();
    expect(dead).toContain(`href="/batches/${ids[1]}"`);
    expect(dead).not.toContain(`href="/batches/${ids[0]}"`);
    const byKey = await (await get(r, "/batches?key=key-2")).text();
    expect(byKey).toContain(`href="/batches/${ids[2]}"`);
    expect(byKey).not.toContain(`href="/batches/${ids[1]}"`);
    const byStatus = await (await get(r, "/batches?status=422")).text();
    expect(byStatus).toContain(`href="/batches/${ids[1]}"`);
    expect(byStatus).not.toContain(`href="/batches/${ids[2]}"`);
    const older = await (await get(r, `/batches?before=${ids[1]}`)).text();
    expect(older).toContain(`href="/batches/${ids[0]}"`);
    expect(older).not.toContain(`href="/batches/${ids[2]}"`);
    const bad = await get(r, "/batches?since=yesterday");
    expect(bad.status).toBe(200);
    expect(await bad.text()).toContain(
      "since yesterday: expected Unix seconds, an ISO date, or an age like 30m, 24h, 7d",
    );
    expect((await get(r, "/batches/999999")).status).toBe(404);
    expect((await get(r, "/nowhere")).status).toBe(404);
  });

  test("the batches list filters by payload conditions, keeps them in its form, and says what is wrong", async () => {
    const ids: number[] = [];
    const r = await start({
      seed: async (h) => {
        ids.push(await enqueueJson(h, "once", "k0", { action: "opened", who: NASTY_KEY }));
        ids.push(await enqueueJson(h, "once", "k1", { action: "closed" }));
        ids.push(await enqueueJson(h, "once", "k2", { action: "opened" }));
      },
    });
    const page = async (...wheres: string[]) =>
      (await get(r, `/batches?${wheres.map((w) => `where=${encodeURIComponent(w)}`).join("&")}&where=`)).text();
    const opened = await page("action = opened");
    for (const id of [ids[0], ids[2]]) expect(opened).toContain(`href="/batches/${id}"`);
    expect(opened).not.toContain(`href="/batches/${ids[1]}"`);
    // Each condition given stays in a field of its own, escaped, and one more field is empty.
    const nasty = await page("action = opened", `who = ${NASTY_KEY}`);
    expect(nasty).toContain(`href="/batches/${ids[0]}"`);
    expect(nasty).not.toContain(`href="/batches/${ids[2]}"`);
    expect(nasty).not.toContain("<script>alert");
    expect(nasty).not.toContain("\u0007");
    expect(nasty).toContain('value="who = &lt;script&gt;alert(&quot;k&quot;)&lt;/script&gt;\\x07&#39;&amp;"');
    expect(nasty.match(/<input name="where"/g)).toHaveLength(3);
    const bad = await page("action == opened");
    expect(bad).toContain('<p class="bad" role="alert">where (action): equality is a single =</p>');
    expect(bad).not.toContain('href="/batches/');
  });

  test(
    "a batch page shows its events with the routing trace and its attempts; payloads only behind " + "the warning",
    async () => {
      let id = 0;
      const r = await start({
        seed: async (h) => void (id = await enqueueJson(h, "once", "k", { marker: "PAYLOAD-ONLY-ON-CLICK" })),
      });
      deadBatch(r.spool, id);
      const page = await (await get(r, `/batches/${id}`)).text();
      expect(page).not.toContain("PAYLOAD-ONLY-ON-CLICK");
      expect(page).toContain(`href="/batches/${id}/payloads"`);
      expect(page).toMatch(
        /<li data-outcome="dead"><span class="bad">dead<\/span> attempt 1 · \S+Z · status 422 · permanent · 3 ms/,
      );
      expect(page).toContain("<td>implicit · once · window from default</td>");
      const payloads = await (await get(r, `/batches/${id}/payloads`)).text();
      expect(payloads.indexOf("warning: payloads may hold secrets or personal data")).toBeGreaterThan(0);
      expect(payloads.indexOf("warning:")).toBeLessThan(payloads.indexOf("PAYLOAD-ONLY-ON-CLICK"));
    },
  );

  test("the overview carries the health verdict, the gates, the chart data; assets are embedded", async () => {
    const r = await start({ seed: async (h) => void (await enqueueJson(h, "demo", "a", { n: 1 })) });
    const html = await (await get(r, "/")).text();
    expect(html).toContain('id="health"');
    expect(html).toContain('data-gate="script:demo-log"');
    const data = JSON.parse(
      /<script type="application\/json" id="chart-data">(.*?)<\/script>/s.exec(html)?.[1] ?? "{}",
    );
    expect(data["events-hour"].names).toEqual(["demo"]);
    expect(data["events-hour"].values[0].reduce((a: number, b: number) => a + b, 0)).toBe(1);
    expect(data["events-day"].x).toHaveLength(96);
    const js = await get(r, "/assets/uplot.js");
    expect(js.status).toBe(200);
    expect(js.headers.get("content-type")).toStartWith("text/javascript");
    expect(await js.text()).toContain("uPlot");
  });

  test(
    "the live tail streams journal rows as server-sent events with their cursors, resuming after " + "Last-Event-ID",
    async () => {
      const r = await start({ seed: async (h) => void (await enqueueJson(h, "demo", "first", { n: 1 })) });
      const read = async (headers: Record<string, string>) => {
        const ctl = new AbortController();
        const res = await fetch(`${r.base}/live/events?since=0`, {
          headers: { ...cookie(r), ...headers },
          signal: ctl.signal,
        });
        expect(res.headers.get("content-type")).toStartWith("text/event-stream");
        const reader = res.body!.getReader();
        let text = "";
        // The stream opens with a comment; read on to the first frame with an id.
        while (!/^id: /m.test(text)) text += new TextDecoder().decode((await reader.read()).value);
        ctl.abort();
        return text.slice(text.search(/^id: /m));
      };
      const first = await read({});
      expect(first).toMatch(/^id: 1\ndata: 1 \S+Z event batch \d+ demo -> script:demo-log key=first/);
      await enqueueJson(r.h, "demo", "second", { n: 2 });
      const rest = await read({ "Last-Event-ID": "1" });
      expect(rest).not.toContain("key=first");
      expect(rest).toContain("key=second");
    },
  );

  test(
    "sources: scheme, URL, refusals read from the intake's /metrics, quarantine reasons of the " + "last day",
    async () => {
      const metrics = new IntakeMetrics();
      metrics.rejected1("demo", "unverified");
      metrics.rejected1("demo", "too_large");
      const intake = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(metrics.render()) });
      const h = await initHome();
      appendFileSync(
        h.config,
        '\n[sources.signed]\ntemplate = { scheme = "hmac-sha256-hex", header = "X-Sig" }\n' +
          'secrets.secret = { env = "NOT_SET_HERE" }\naction = "script:demo-log"\n',
      );
      appendFileSync(
        h.config,
        `\n[sources.asana]\ntemplate = { scheme = "hmac-sha256-hex", header = "X-Hook-Signature", learn ` +
          `= "header:X-Hook-Secret", key = "resource.gid", split = "events", dedup = "none" }\n` +
          `secrets.secret = { file = "${join(h.home, "asana.secret")}" }\naction = "script:demo-log"\n`,
      );
      const loaded = loadConfig({ home: h.home, env: {} });
      const spool = openSpool(h.db);
      quarantine(
        spool,
        {
          source: "demo",
          raw: new TextEncoder().encode("not json"),
          headers: {},
          authHeaders: [],
          url: "/hooks/demo",
          reason: "not_json",
        },
        Date.now() / 1000,
      );
      // A poll instance's clock, as the dispatcher keeps it.
      const t = Date.now() / 1000;
      stepPoll(spool, { instance: "feed", everyS: 300, jitterS: 0 }, t, { next: () => 0 }, () => {
        throw new Error("not due yet");
      });
      const dash = new Dashboard({
        listen: "127.0.0.1:0",
        store: sqliteStores(spool).dashboard(),
        config: () => loaded.config,
        home: h.home,
        dbPath: h.db,
        now: () => Date.now() / 1000,
        log: createLogger("dashboard"),
        intakeAddress: () => `127.0.0.1:${intake.port}`,
      });
      await dash.start();
      try {
        const token = readFileSync(join(h.home, "dashboard.token"), "utf8").trim();
        const html = await (
          await fetch(`http://127.0.0.1:${dash.port}/sources`, {
            headers: { Cookie: `hookspool_dashboard_${dash.port}=${sessionOf(token)}` },
          })
        ).text();
        const row = (name: string) =>
          /<tr>(.*?)<\/tr>/gs.exec(html.slice(html.indexOf(`<td>${name}</td>`) - 4))?.[1] ?? "";
        expect(row("demo")).toContain("<td>1 too_large, 1 unverified</td>");
        expect(row("demo")).toContain("<td>1 not_json</td>");
        expect(row("signed")).toContain("<td>hmac-sha256-hex</td>");
        expect(row("signed")).toContain(`<code>http://${loaded.config.intake.listen}/hooks/signed</code>`);
        expect(row("signed")).toContain("<td>none</td>");
        expect(row("asana")).toContain("<td>hmac-sha256-hex (no secret yet: hookspool source arm)</td>");
        const polls = html.slice(html.indexOf("<h2>Polls</h2>"));
        expect(polls).toMatch(
          // long-line: one table row as a regular expression; split, it would no longer read as the row
          /<td>feed<\/td><td>-<\/td><td>\S+Z <span class="muted">\(in -?\d+(\.\d)? s\)<\/span><\/td><td>-<\/td><td>-<\/td><td>-<\/td><td>0<\/td>/,
        );
      } finally {
        await dash.stop();
        spool.close();
        intake.stop(true);
      }
    },
  );
});

describe("the intake's own figures", () => {
  test("the ack histogram and refusals parse back from the intake's /metrics text", () => {
    const m = new IntakeMetrics();
    for (let i = 0; i < 98; i++) m.acked(0.0008);
    m.acked(0.02);
    m.acked(0.3);
    m.rejected1('we"ird', "unverified");
    m.rejected1('we"ird', "unverified");
    m.received1("github");
    const v = parseIntakeMetrics(m.render());
    expect(v.ack).toEqual({ count: 100, p50: 0.001, p99: 0.025 });
    expect(v.refused).toEqual({ 'we"ird': { unverified: 2 } });
    expect(v.received).toEqual({ github: 1 });
  });

  test("ack latency per bucket from the dashboard's samples: differences, and nothing across an intake restart", () => {
    const h = (fast: number, slow: number) => [
      { le: 0.001, n: fast },
      { le: 0.5, n: fast + slow },
      { le: Number.POSITIVE_INFINITY, n: fast + slow },
    ];
    const samples = [
      { at: 0, buckets: h(0, 0) },
      { at: 50, buckets: h(100, 0) },
      { at: 110, buckets: h(100, 10) },
      // The intake restarted: its counts began again.
      { at: 170, buckets: h(3, 0) },
    ];
    expect(ackSeries(samples, 0, 60, 3)).toEqual({ p50: [0.001, 0.5, null], p99: [0.001, 0.5, null] });
  });

  test(
    "the charts read the health line's histogram: answers before the first sample count from the " + "intake's start",
    () => {
      const m = new IntakeMetrics(100);
      for (let i = 0; i < 5; i++) m.acked(0.0008);
      const view = parseIntakeMetrics(m.render());
      expect(view.startedAt).toBe(100);
      // No sample of the dashboard's yet: the intake started at 100, the page is made at 130.
      expect(ackSeries(ackReadings([], view, 130), 0, 60, 3)).toEqual({
        p50: [null, null, 0.001],
        p99: [null, null, 0.001],
      });
      // A sample from before a restart (counts higher than now) is not taken for a difference.
      const old = [{ at: 50, buckets: view.ackBuckets.map((b) => ({ le: b.le, n: b.n + 40 })) }];
      expect(ackSeries(ackReadings(old, view, 130), 0, 60, 3)).toEqual({
        p50: [null, null, 0.001],
        p99: [null, null, 0.001],
      });
      expect(ackReadings([], null, 130)).toEqual([]);
    },
  );

  test(
    "on the overview, an intake that has answered shows figures in the health line and the charts " + "alike",
    async () => {
      const metrics = new IntakeMetrics(Date.now() / 1000 - 5);
      for (let i = 0; i < 3; i++) metrics.acked(0.003);
      const intake = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(metrics.render()) });
      const h = await initHome();
      const loaded = loadConfig({ home: h.home, env: {} });
      const spool = openSpool(h.db);
      // The minute's sampler never runs in this test: the page alone must agree with itself.
      const dash = new Dashboard({
        listen: "127.0.0.1:0",
        store: sqliteStores(spool).dashboard(),
        config: () => loaded.config,
        home: h.home,
        dbPath: h.db,
        now: () => Date.now() / 1000,
        log: createLogger("dashboard"),
        intakeAddress: () => `127.0.0.1:${intake.port}`,
        sampleEveryMs: 3_600_000,
      });
      await dash.start();
      try {
        const token = readFileSync(join(h.home, "dashboard.token"), "utf8").trim();
        const html = await (
          await fetch(`http://127.0.0.1:${dash.port}/`, {
            headers: { Cookie: `hookspool_dashboard_${dash.port}=${sessionOf(token)}` },
          })
        ).text();
        expect(html).toContain("p50 ≤ 5 ms, p99 ≤ 5 ms over 3 answer(s)");
        const ack = [
          ...html.matchAll(
            /<figcaption>ack latency \(upper bound\), [^<]+<\/figcaption>.*?<p class="muted">([^<]*)<\/p>/gs,
          ),
        ].map((m) => m[1]);
        expect(ack).toEqual(["p50 up to 5 ms, p99 up to 5 ms", "p50 up to 5 ms, p99 up to 5 ms"]);
      } finally {
        await dash.stop();
        spool.close();
        intake.stop(true);
      }
    },
  );
});
