// Each paced destination's window where an operator looks: status (its document and its table),
// /metrics and the dashboard's overview say used of allowed and when a full window has room again;
// a 429 gate says how long it has left.
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { outcome } from "../../src/delivery.ts";
import { Dashboard } from "../../src/dashboard/server.ts";
import { sessionOf } from "../../src/dashboard/auth.ts";
import { createLogger } from "../../src/log.ts";
import { sqliteStores } from "../../src/store/open.ts";
import { renderStoreMetrics } from "../../src/obs/metrics.ts";
import { sqliteStatusStore } from "../../src/store/sqlite/store.ts";
import { storeStatus } from "../../src/obs/store-status.ts";
import { rateMarginS } from "../../src/pacing.ts";
import { cli } from "../helpers/cli.ts";
import { fakeDestination, rig } from "../helpers/dispatch.ts";

/** The CLI's clock set to the rig's (a process offset, as the CLI takes it). */
const atRigTime = (r: ReturnType<typeof rig>) => ({
  HOOKSPOOL_TEST_CLOCK_OFFSET_S: String(r.clock.now() - Date.now() / 1000),
});

const CONFIG = `[sources.s]\naction = "hermes:a"\n\n[destinations."hermes:a"]\nrate = "2/min"\n`;
const dashboards: Dashboard[] = [];
afterEach(async () => {
  for (const d of dashboards.splice(0)) await d.stop();
});

describe("a destination's window, shown", () => {
  test("status, its table, /metrics and the dashboard: used of allowed, and the next free slot", async () => {
    const rate = { limit: 2, windowS: 60 };
    const a = fakeDestination("hermes:a", { maxInflight: 4, rate });
    const r = rig(CONFIG, [a]);
    for (const k of ["x", "y", "z"]) r.put(k, "hermes:a");
    await r.step();
    const now = r.clock.now();
    const dbPath = join(r.home, "spool.db");
    const { doc } = await storeStatus(sqliteStatusStore(r.spool), r.config, dbPath, { now });
    expect(doc.destinations["hermes:a"].rate).toEqual({
      limit: 2,
      window_s: 60,
      used: 2,
      next_free_at: now + 60 + rateMarginS(rate),
      next_free_in_s: 61,
      from: "its rate",
    });

    const metrics = await renderStoreMetrics(sqliteStatusStore(r.spool), r.config, dbPath, { now });
    expect(metrics).toContain('hookspool_destination_rate_limit{destination="hermes:a"} 2');
    expect(metrics).toContain('hookspool_destination_rate_used{destination="hermes:a"} 2');
    expect(metrics).toContain('hookspool_destination_rate_next_free_seconds{destination="hermes:a"} 61');

    const text = await cli(["--home", r.home, "status"], { env: atRigTime(r) });
    expect(text.out).toMatch(/^DESTINATION\s+STATE\s+INFLIGHT\s+WINDOW\s+OLDEST/m);
    expect(text.out).toMatch(/^hermes:a\s+closed\s+0\s+2\/2 per 60s, next in 61s/m);

    const dash = new Dashboard({
      listen: "127.0.0.1:0",
      store: sqliteStores(r.spool).dashboard(),
      config: () => r.config,
      home: r.home,
      dbPath,
      now: () => r.clock.now(),
      log: createLogger("dashboard"),
    });
    dashboards.push(dash);
    await dash.start();
    const token = readFileSync(join(r.home, "dashboard.token"), "utf8").trim();
    const page = await (
      await fetch(`http://127.0.0.1:${dash.port}/`, {
        headers: { Cookie: `hookspool_dashboard_${dash.port}=${sessionOf(token)}` },
      })
    ).text();
    expect(page).toContain(
      `<span data-window="hermes:a" title="its rate">2 / 2 per 60 s</span> <span class="muted">next in 61 s</span>`,
    );
  });

  test("a 429 gate: how long it has left, and that a probe goes first", async () => {
    const a = fakeDestination("hermes:a", { maxInflight: 4 });
    a.answer = () => outcome({ kind: "retry", klass: "throttle", reason: "http 429", status: 429 });
    const r = rig(`[sources.s]\naction = "hermes:a"\n\n[destinations."hermes:a"]\nrate = "none"\n`, [a]);
    r.put("x", "hermes:a");
    await r.step();
    r.clock.advance(11);
    const { doc } = await storeStatus(sqliteStatusStore(r.spool), r.config, join(r.home, "spool.db"), {
      now: r.clock.now(),
    });
    expect(doc.destinations["hermes:a"]).toMatchObject({ gated_for_s: 50, throttled: true });
    expect(doc.destinations["hermes:a"].rate).toBeUndefined();
    const text = await cli(["--home", r.home, "status"], { env: atRigTime(r) });
    expect(text.out).toMatch(/^hermes:a\s+closed, 429 gate 50s left\s+0\s+-/m);
    const metrics = await renderStoreMetrics(sqliteStatusStore(r.spool), r.config, join(r.home, "spool.db"), {
      now: r.clock.now(),
    });
    expect(metrics).toContain('hookspool_destination_gated_seconds{destination="hermes:a"} 50');
  });
});
