// The dashboard in a real browser (Debian's Chromium driven by playwright-core) against a real
// `hookspool run` with [dashboard] listen set: opened through the URL it prints, a breaker seen
// opening and closing, batches filtered, a batch's timeline, a dead batch replayed with its
// button and seen delivered, the live tail picking up a new event, and nothing without the
// token. The suite runs twice: on a SQLite spool, and on a throwaway PostgreSQL server (skipped,
// saying so, without one). Each step saves a screenshot under test-results/ (ignored by git;
// PostgreSQL's with a pg- prefix); `make screenshots` copies the overview's into docs/img/ for
// the README.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHmac } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { PG_BIN, PG_SKIP_MESSAGE, type PgServer, startPostgres } from "../helpers/pg.ts";
import { type Hookspool, startHookspool, waitFor } from "../helpers/proc.ts";
import { Receiver } from "../helpers/receiver.ts";
import { tempDir } from "../helpers/tmp.ts";

const CHROMIUM = process.env.HOOKSPOOL_CHROMIUM ?? "/usr/bin/chromium";
const HAVE_CHROMIUM = existsSync(CHROMIUM);
if (!HAVE_CHROMIUM)
  console.log(`browser tests skipped: no Chromium at ${CHROMIUM} (apt-get install chromium; .ci/run installs it)`);

// A browser, a real run and a breaker's cooldowns: longer than a unit test's default.
setDefaultTimeout(30_000);

const RESULTS = join(import.meta.dir, "..", "..", "test-results");
const IN_SECRET = "browser-inbound-secret";

if (HAVE_CHROMIUM && !PG_BIN) console.log(`browser tests on PostgreSQL: ${PG_SKIP_MESSAGE}`);

browserSuite("sqlite");
browserSuite("postgres");

function browserSuite(backend: "sqlite" | "postgres"): void {
  describe.skipIf(!HAVE_CHROMIUM || (backend === "postgres" && !PG_BIN))(
    `the dashboard in Chromium, on ${backend === "sqlite" ? "SQLite" : "PostgreSQL"}`,
    () => {
      // What the receiver answers: down (503) trips the breaker; a poison key is refused (422).
      const mode = { down: false, refusePoison: true };
      const receiver = new Receiver({
        answer: (d) =>
          mode.down ? 503 : mode.refusePoison && (d.doc as { key?: string }).key === "poison" ? 422 : 200,
      });
      let hs: Hookspool;
      let browser: Browser;
      let page: Page;
      let intake = "";
      let printed = "";
      let pg: PgServer | undefined;

      const send = async (key: string, n = 1) => {
        const body = JSON.stringify({ topic: key, type: "tick", n });
        const res = await fetch(`${intake}/hooks/demo`, {
          method: "POST",
          body,
          headers: {
            "Content-Type": "application/json",
            "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(body).digest("hex")}`,
          },
        });
        expect(res.status).toBe(202);
      };
      const prefix = backend === "sqlite" ? "dashboard" : "dashboard-pg";
      const shot = (name: string) => page.screenshot({ path: join(RESULTS, `${prefix}-${name}.png`), fullPage: true });
      /** Reload `path` until `selector`'s text is `text` (the pages are server-rendered). */
      const until = async (path: string, selector: string, text: string) =>
        waitFor(`${selector} to read ${text} on ${path}`, async () => {
          await page.goto(new URL(path, printed).toString());
          return ((await page.locator(selector).first().textContent()) ?? "").trim() === text;
        });

      beforeAll(async () => {
        mkdirSync(RESULTS, { recursive: true });
        const home = tempDir();
        writeFileSync(join(home, "in-secret"), IN_SECRET, { mode: 0o600 });
        let env: Record<string, string> = {};
        let spool = "";
        if (backend === "postgres") {
          pg = await startPostgres();
          await pg.createDatabase("dashboard");
          env = { HOOKSPOOL_PG_URL: `postgres://${pg.user}@localhost/dashboard?host=${pg.socketDir}` };
          spool = `[spool]\nbackend = "postgres"\nurl = { env = "HOOKSPOOL_PG_URL" }\n\n`;
        }
        writeFileSync(
          join(home, "config.toml"),
          `${spool}[intake]
  listen = "127.0.0.1:0"

  [dashboard]
  listen = "127.0.0.1:0"
  actions = true

  [dispatch]
  poll_s = 0.05
  heartbeat_s = 1
  backoff_base_s = 0.1
  backoff_cap_s = 0.3
  breaker = { trip_after = 2, cooldown_initial_s = 0.5, cooldown_max_s = 1 }

  [sources.demo]
  template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", event_type = "type" }
  secrets.secret = { file = "${join(home, "in-secret")}" }
  quiet_s = 0
  max_s = 0
  action = "receiver"

  [destinations.receiver]
  type = "http"
  url = "http://127.0.0.1:${receiver.port}/hook"
  allow_insecure = true
  unsigned = true
  timeout_s = 2
  `,
        );
        hs = await startHookspool(home, ["run"], { env });
        intake = `http://127.0.0.1:${await hs.port()}`;
        printed = await waitFor(
          "the dashboard's URL on stdout",
          () => /dashboard: (http:\/\/127\.0\.0\.1:\d+\/\?token=\S+)/.exec(hs.stdout())?.[1],
        );
        const { chromium } = await import("playwright-core");
        browser = await chromium.launch({
          executablePath: CHROMIUM,
          args: ["--no-sandbox", "--disable-dev-shm-usage"],
        });
        page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      }, 60_000);

      afterAll(async () => {
        await browser?.close();
        hs?.kill();
        await hs?.exited;
        receiver.stop();
        await pg?.stop();
      });

      test("nothing is reachable without the token", async () => {
        const origin = new URL(printed).origin;
        const stranger = await browser.newPage();
        try {
          for (const path of ["/", "/batches", "/live", "/assets/client.js"]) {
            const res = await stranger.goto(origin + path);
            expect(res?.status()).toBe(401);
          }
          expect(await stranger.locator("h1").textContent()).toContain("the dashboard needs its token");
        } finally {
          await stranger.close();
        }
      });

      test(
        "the printed URL opens the overview: health, the gate, charts drawn, the token gone from " + "the address",
        async () => {
          await send("warm-up");
          const res = await page.goto(printed);
          expect(res?.status()).toBe(200);
          expect(new URL(page.url()).search).toBe("");
          expect(await page.locator("h1").textContent()).toBe("Overview");
          await until("/", '[data-gate="receiver"]', "closed");
          // uPlot ran under the page's CSP (scripts only from /assets): the charts are drawn.
          await waitFor(
            "the charts to be drawn",
            async () => (await page.locator('figure[data-drawn="true"]').count()) === 8,
          );
          await waitFor("the warm-up delivery", () => receiver.accepted().length >= 1);
          await until("/", '[data-gate="receiver"]', "closed");
          await shot("overview");
        },
      );

      test("a breaker opens while the receiver fails and closes after it recovers", async () => {
        mode.down = true;
        await send("outage-a");
        await send("outage-b");
        await until("/", '[data-gate="receiver"]', "open");
        await shot("breaker-open");
        mode.down = false;
        await until("/", '[data-gate="receiver"]', "closed");
        await waitFor("both outage batches delivered", () =>
          ["outage-a", "outage-b"].every((k) => receiver.accepted().some((d) => (d.doc as { key?: string }).key === k)),
        );
        await shot("breaker-closed");
      });

      test(
        "filter the batches, open a dead one and its timeline, replay it with the button, see it " + "delivered",
        async () => {
          await send("poison");
          await page.goto(new URL("/batches", printed).toString());
          await waitFor("the poison batch to die", async () => {
            await page.goto(new URL("/batches", printed).toString());
            await page.selectOption('select[name="state"]', "dead");
            await page.fill('input[name="key"]', "poison");
            await page.click('button[type="submit"]');
            return (await page.locator("tbody tr").count()) === 1;
          });
          expect(new URL(page.url()).searchParams.get("state")).toBe("dead");
          expect(await page.locator("tbody tr td").nth(3).textContent()).toBe("poison");
          await page.locator("tbody tr td a").first().click();
          expect(await page.locator("#batch-state").textContent()).toBe("dead");
          expect(await page.locator('ol.timeline li[data-outcome="dead"]').textContent()).toContain("status 422");
          await shot("batch-dead");
          mode.refusePoison = false;
          await page.click('button:has-text("replay")');
          await page.waitForLoadState();
          expect({ path: new URL(page.url()).pathname, h1: await page.locator("h1").textContent() }).toMatchObject({
            path: expect.stringMatching(/^\/batches\/\d+$/),
          });
          const path = new URL(page.url()).pathname;
          await until(path, "#batch-state", "delivered");
          expect(await page.locator('ol.timeline li[data-outcome="ok"]').count()).toBe(1);
          await shot("batch-replayed");
          await page.goto(new URL("/", printed).toString());
          expect(await page.locator("text=Recent actions").count()).toBe(1);
        },
      );

      test("the live tail picks up a new event as it commits", async () => {
        await page.goto(new URL("/live", printed).toString());
        await waitFor(
          "the tail to follow",
          async () => (await page.locator("#tail-status").textContent()) === "following",
        );
        await send("live-new");
        await waitFor(
          "the new event in the tail",
          async () => (await page.locator("#tail li", { hasText: "key=live-new" }).count()) >= 1,
        );
        await shot("live");
        // The overview after all of the above: the one the README shows (make screenshots).
        await page.goto(new URL("/", printed).toString());
        await waitFor(
          "the charts to be drawn",
          async () => (await page.locator('figure[data-drawn="true"]').count()) === 8,
        );
        await shot("overview-after");
      });

      test("a narrow window: no page is wider than the screen; wide tables scroll in their own box", async () => {
        const narrow = await browser.newPage({ viewport: { width: 360, height: 740 } });
        try {
          await narrow.goto(printed);
          for (const path of ["/", "/batches", "/sources", "/issues", "/live"]) {
            await narrow.goto(new URL(path, printed).toString());
            const widths = (await narrow.evaluate(
              "[document.documentElement.scrollWidth, window.innerWidth]",
            )) as number[];
            expect({ path, overflow: widths[0] - widths[1] }).toEqual({ path, overflow: 0 });
          }
          await narrow.goto(new URL("/", printed).toString());
          await narrow.screenshot({ path: join(RESULTS, `${prefix}-narrow.png`), fullPage: true });
        } finally {
          await narrow.close();
        }
      });

      test("keyboard: the first Tab reaches the skip link, and it leads to the page", async () => {
        await page.goto(new URL("/", printed).toString());
        await page.keyboard.press("Tab");
        expect(await page.evaluate("document.activeElement && document.activeElement.textContent")).toBe(
          "skip to the page",
        );
        await page.keyboard.press("Enter");
        // Following the link changes the URL a moment after the key: wait for it, then assert.
        await page.waitForURL((u) => u.hash === "#main", { timeout: 5_000 }).catch(() => {});
        expect(new URL(page.url()).hash).toBe("#main");
      });
    },
  );
}
