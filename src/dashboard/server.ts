// The dashboard service: its own listener on loopback (never the intake's port), every page
// behind the token, state changes (when [dashboard] actions is on) behind the CSRF token and the
// same store operations as the CLI, each recorded. Read-only by default.
import { requestTarget } from "../intake/target.ts";
import { join } from "node:path";
import type { Server } from "bun";
import type { Config } from "../config/types.ts";
import { isPublic, readListen } from "../config/listen.ts";
import { HookspoolError } from "../errors.ts";
import type { LogFields, Logger } from "../log.ts";
import type { Service } from "../service.ts";
import type { DashboardChange, DashboardStore } from "../store/api.ts";
import { constantTimeEqual } from "../plugin/verify.ts";
import { ASSETS } from "./assets/index.ts";
import { authorized, csrfOf, dashboardToken, sameOrigin, sessionCookie } from "./auth.ts";
import { batchesPage, batchPage, payloadsPage } from "./batches.ts";
import { h, page, type PageContext } from "./html.ts";
import { type AckSample, readIntakeView } from "./intake-view.ts";
import { livePage, sseFrame } from "./live.ts";
import { overviewPage } from "./overview.ts";
import { issuesPage, sourcesPage } from "./sources.ts";

export interface DashboardOptions {
  /** host:port of its own listener (dashboard.listen, or the verb's default 127.0.0.1:8651). */
  listen: string;
  /** Its reads and actions, on the config's backend (openStores(...).dashboard()). */
  store: DashboardStore;
  config: () => Config;
  /** SQLite's spool file (its size and disk on the overview); on PostgreSQL the database measures itself. */
  home: string;
  dbPath: string;
  now: () => number;
  log: Logger;
  /** Where the intake answers /metrics (inside run: its bound address); default intake.listen. */
  intakeAddress?: () => string | null;
  /** How often the intake's ack histogram is sampled for the latency chart (default a minute). */
  sampleEveryMs?: number;
}

/** The samples kept: a day and one chart bucket more. */
const SAMPLES_KEEP_S = 86_400 + 900;

const SECURITY = {
  "Cache-Control": "no-store",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "same-origin",
  // Scripts and styles only from the dashboard itself (the page's one inline style block aside).
  "Content-Security-Policy":
    "default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};
const HTML = { ...SECURITY, "Content-Type": "text/html; charset=utf-8" };

const refusal = (status: number, text: string) =>
  new Response(page(text, `<p>${h(text)}</p>`), { status, headers: HTML });

/** How often the live tail looks for new journal rows, and how often it sends a keep-alive comment. */
const TAIL_POLL_MS = 100;
const TAIL_PING_MS = 15_000;

export class Dashboard implements Service {
  readonly name = "dashboard";
  private server: ReturnType<typeof Bun.serve> | null = null;
  private token = "";
  private hosts = new Set<string>();
  private tails = new Set<() => void>();
  private samples: AckSample[] = [];
  private sampler: ReturnType<typeof setInterval> | null = null;
  /** The URL with the token, printed once when the token is made. */
  firstUrl: string | null = null;

  constructor(private readonly o: DashboardOptions) {}

  get port(): number {
    return this.server?.port ?? 0;
  }

  get active(): boolean {
    return this.server !== null;
  }

  async start(): Promise<void> {
    const cfg = this.o.config();
    const at = { key: "dashboard.listen" };
    let listen: ReturnType<typeof readListen>;
    try {
      listen = readListen(this.o.listen);
    } catch (e) {
      throw new HookspoolError("E_CONFIG", `dashboard.listen: ${(e as Error).message}`, at);
    }
    if ("unix" in listen)
      throw new HookspoolError("E_CONFIG", "dashboard.listen must be host:port (the browser needs a port)", at);
    if (isPublic(listen) && !cfg.dashboard.allow_non_loopback)
      throw new HookspoolError(
        "E_CONFIG",
        `${listen.hostname} is not a loopback address; the dashboard refuses to bind it`,
        { ...at, hint: "set dashboard.allow_non_loopback = true if you mean it" },
      );
    if (listen.port !== 0 && this.o.listen === cfg.intake.listen)
      throw new HookspoolError("E_CONFIG", "dashboard.listen must not be the intake's address", at);
    const { token, created } = dashboardToken(join(this.o.home, "dashboard.token"));
    this.token = token;
    try {
      this.server = Bun.serve({
        hostname: listen.hostname,
        port: listen.port,
        idleTimeout: 30,
        fetch: (req, server) => this.handle(req, server),
      });
    } catch (e) {
      throw new HookspoolError(
        "E_CONFIG",
        `the dashboard cannot listen on ${this.o.listen}: ${(e as Error).message}`,
        at,
      );
    }
    const port = this.server.port;
    this.hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]);
    if (isPublic(listen))
      this.hosts.add(`${listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname}:${port}`);
    if (created) this.firstUrl = `http://127.0.0.1:${port}/?token=${token}`;
    void this.sample();
    this.sampler = setInterval(() => void this.sample(), this.o.sampleEveryMs ?? 60_000);
    this.sampler.unref?.();
    this.o.log.info(cfg.dashboard.actions ? "dashboard listening, actions on" : "dashboard listening, read-only", {
      listen: `${listen.hostname}:${port}`,
    });
  }

  /** Read the intake's ack histogram once, for the latency chart; keep a day of readings. */
  private async sample(): Promise<void> {
    const view = await readIntakeView(this.intakeAddress());
    const at = this.o.now();
    if (view) this.samples.push({ at, buckets: view.ackBuckets });
    while (this.samples.length && this.samples[0].at < at - SAMPLES_KEEP_S) this.samples.shift();
  }

  private intakeAddress(): string {
    return this.o.intakeAddress?.() ?? this.o.config().intake.listen;
  }

  async stop(): Promise<void> {
    if (this.sampler) clearInterval(this.sampler);
    this.sampler = null;
    for (const end of this.tails) end();
    this.server?.stop(true);
    this.server = null;
  }

  private async handle(req: Request, server: Server<undefined>): Promise<Response> {
    // The target never from Host (sameOrigin checks Host on its own): a malformed one is a 400.
    const target = requestTarget(req.url, req.headers.get("host"));
    if (!target.ok) return refusal(400, target.why);
    const url = new URL(`http://dashboard.invalid${target.path}${target.search}`);
    if (!sameOrigin(req, this.hosts)) return refusal(403, "refused: this page answers only its own address");
    const auth = authorized(req, url, this.token, this.port);
    if (!auth.ok)
      return refusal(
        401,
        "the dashboard needs its token: open the URL hookspool dashboard printed, " +
          "or add ?token= with the token from dashboard.token in the home",
      );
    // The first visit through the printed URL: a session cookie instead, and the token out of the address.
    if (auth.fromQuery) {
      url.searchParams.delete("token");
      return new Response(null, {
        status: 303,
        headers: {
          ...SECURITY,
          Location: url.pathname + url.search,
          "Set-Cookie": sessionCookie(this.token, this.port),
        },
      });
    }
    const asset = ASSETS[url.pathname];
    if (asset && req.method === "GET")
      return new Response(asset.body, {
        headers: { ...SECURITY, "Content-Type": asset.type, "Cache-Control": "private, max-age=3600" },
      });
    const config = this.o.config();
    const ctx: PageContext = {
      store: this.o.store,
      config,
      dbPath: this.o.dbPath,
      now: this.o.now(),
      csrf: config.dashboard.actions ? csrfOf(this.token) : null,
      ackSamples: this.samples,
    };
    if (req.method === "POST") return this.act(req, url, ctx);
    if (req.method !== "GET") return refusal(405, "method not allowed");
    const intake = () => readIntakeView(this.intakeAddress());
    const html = (body: string | null) =>
      body === null ? refusal(404, "no such page") : new Response(body, { headers: HTML });
    if (url.pathname === "/") return html(await overviewPage({ ...ctx, intake: await intake() }));
    if (url.pathname === "/batches") return html(await batchesPage(ctx, url.searchParams));
    const m = /^\/batches\/(\d{1,15})(\/payloads)?$/.exec(url.pathname);
    if (m) return html(await (m[2] ? payloadsPage(ctx, Number(m[1])) : batchPage(ctx, Number(m[1]))));
    if (url.pathname === "/sources") return html(await sourcesPage({ ...ctx, intake: await intake() }));
    if (url.pathname === "/issues") return html(await issuesPage(ctx));
    if (url.pathname === "/live") return html(await livePage(ctx));
    if (url.pathname === "/live/events") {
      // The tail stays open (it pings every 15 s); every other connection idles out after 30 s.
      server.timeout(req, 0);
      return this.events(req, url);
    }
    return html(null);
  }

  /** The journal as server-sent events, from the reconnecting browser's Last-Event-ID or ?since=. */
  private events(req: Request, url: URL): Response {
    // The backend reads its own cursor; one it cannot read starts from the beginning.
    let cursor = req.headers.get("last-event-id") ?? url.searchParams.get("since") ?? "0";
    const store = this.o.store;
    const tails = this.tails;
    let stopped = false;
    const end = () => {
      stopped = true;
    };
    tails.add(end);
    const enc = new TextEncoder();
    let pinged = performance.now();
    const stream = new ReadableStream<Uint8Array>({
      start(ctl) {
        // The headers go out with the first bytes: say at once that the stream is open.
        ctl.enqueue(enc.encode("retry: 2000\n: following\n\n"));
      },
      async pull(ctl) {
        while (!stopped) {
          const rows = await store.journalAfter(cursor, 200);
          if (rows.length) {
            ctl.enqueue(enc.encode(rows.map(sseFrame).join("")));
            cursor = rows[rows.length - 1].cursor;
            return;
          }
          if (performance.now() - pinged > TAIL_PING_MS) {
            pinged = performance.now();
            ctl.enqueue(enc.encode(": ping\n\n"));
            return;
          }
          await Bun.sleep(TAIL_POLL_MS);
        }
        tails.delete(end);
        ctl.close();
      },
      cancel() {
        end();
        tails.delete(end);
      },
    });
    return new Response(stream, { headers: { ...SECURITY, "Content-Type": "text/event-stream; charset=utf-8" } });
  }

  private async act(req: Request, url: URL, ctx: PageContext): Promise<Response> {
    if (!ctx.csrf) return refusal(403, "actions are off: set [dashboard] actions = true");
    const form = await req.formData().catch(() => null);
    const csrf = form?.get("csrf");
    if (typeof csrf !== "string" || !constantTimeEqual(csrf, ctx.csrf))
      return refusal(403, "refused: the form's CSRF token is missing or wrong; reload the page");
    const field = (k: string) => {
      const v = form?.get(k);
      return typeof v === "string" ? v : "";
    };
    const id = (k: string) => {
      const v = field(k);
      if (!/^\d{1,15}$/.test(v)) throw new HookspoolError("E_USAGE", `${k}: expected a number`);
      return Number(v);
    };
    const back = (to: string) => new Response(null, { status: 303, headers: { ...SECURITY, Location: to } });
    const store = this.o.store;
    const record = async (change: DashboardChange, fields: LogFields): Promise<void> => {
      await store.act(ctx.now, change);
      this.o.log.info(`dashboard: ${change.verb}`, fields);
    };
    try {
      switch (url.pathname) {
        case "/actions/replay": {
          const batch = id("batch");
          if ((await store.getBatch(batch))?.destination === "quarantine")
            return refusal(409, "a quarantined request is replayed with hookspool replay (it needs its source plugin)");
          await record({ verb: "replay", batch }, { batch });
          return back(`/batches/${batch}`);
        }
        case "/actions/retry": {
          const batch = id("batch");
          await record({ verb: "retry", batch }, { batch });
          return back(`/batches/${batch}`);
        }
        case "/actions/pause":
        case "/actions/resume": {
          const d = field("destination");
          if (!Object.hasOwn(ctx.config.destinations, d)) return refusal(404, "no such destination in the config");
          if (url.pathname === "/actions/pause")
            await record({ verb: "pause", destination: d, by: "the dashboard" }, { destination: d });
          else await record({ verb: "resume", destination: d }, { destination: d });
          return back("/");
        }
        case "/actions/issue": {
          const verb = field("verb");
          if (verb !== "ack" && verb !== "resolve" && verb !== "ignore") return refusal(400, "unknown issue action");
          const issue = id("id");
          await record({ verb, issue }, { reason: `issue ${issue}` });
          return back("/issues");
        }
        default:
          return refusal(404, "no such action");
      }
    } catch (e) {
      const code =
        e instanceof HookspoolError ? (e.code === "E_USAGE" ? 400 : e.code === "E_NOT_FOUND" ? 404 : 409) : 409;
      return refusal(code, e instanceof HookspoolError ? e.message : "the action failed");
    }
  }
}
