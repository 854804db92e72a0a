// The intake service: Bun.serve on loopback, /hooks/<instance>, /healthz, /metrics, config reload.
import { dirname } from "node:path";
import type { Server } from "bun";
import type { Clock } from "../clock.ts";
import type { Env, LoadOptions } from "../config/load.ts";
import { ConfigWatcher } from "../config/watch.ts";
import type { Config, LoadedConfig } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { caughtFault, WriteFailures } from "../obs/faults.ts";
import { renderSpoolMetrics } from "../obs/metrics.ts";
import { openSpool, requireCurrentSchema, type Spool } from "../store/db.ts";
import { Backpressure } from "./backpressure.ts";
import { Health } from "./health.ts";
import { IntakeMetrics } from "./metrics.ts";
import { type Reply, handleHook } from "./pipeline.ts";
import { isLoopback } from "../plugin/hook-request.ts";
import { type IntakeSource, loadSources } from "../config/sources.ts";

/** The intake checks config.toml's mtime this often (spec 15). */
export const RELOAD_EVERY_S = 5;

export type Listen = { unix: string } | { hostname: string; port: number };

/** Parse intake.listen: "127.0.0.1:8650", "[::1]:8650", "localhost:0" or "unix:/path". */
export function parseListen(listen: string, allowNonLoopback: boolean): Listen {
  if (listen.startsWith("unix:")) {
    const path = listen.slice(5);
    if (!path.startsWith("/")) throw new HookspoolError("E_CONFIG", `"${listen}": a unix socket needs an absolute path`, { key: "intake.listen" });
    return { unix: path };
  }
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(listen);
  if (!m) throw new HookspoolError("E_CONFIG", `"${listen}" is not host:port or unix:/path`, { key: "intake.listen" });
  const hostname = m[1] ?? m[2];
  const port = Number(m[3]);
  if (port > 65535) throw new HookspoolError("E_CONFIG", `port ${port} is out of range`, { key: "intake.listen" });
  if (!(hostname === "localhost" || isLoopback(hostname)) && !allowNonLoopback) {
    throw new HookspoolError("E_CONFIG", `${hostname} is not a loopback address`, {
      key: "intake.listen",
      hint: "the reverse proxy owns the network; set intake.allow_non_loopback = true only if you mean it",
    });
  }
  return { hostname, port };
}

export interface IntakeOptions {
  loaded: LoadedConfig;
  /** How the config was found, so a reload reads the same file with the same precedence. */
  loadOptions: LoadOptions;
  clock: Clock;
  log: Logger;
  env?: Env;
  /** `run` shares its one connection; otherwise the intake opens its own (busy_timeout 10 s). */
  spool?: Spool;
  /** Free bytes on the spool's filesystem (tests inject a full disk). */
  diskFree?: (path: string) => number | null;
}

async function readCapped(req: globalThis.Request, cap: number): Promise<Uint8Array | "too_large"> {
  if (!req.body) return new Uint8Array();
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    // The hard read cap: Content-Length can lie, the bytes cannot (spec 9).
    if (total > cap) {
      await reader.cancel().catch(() => {});
      return "too_large";
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Why the listener could not start, as one line for the operator (a port in use is theirs to fix). */
function listenError(listen: string, e: unknown): HookspoolError {
  const code = (e as { code?: string } | null)?.code;
  const hint = "stop whatever holds it (another hookspool?) or change intake.listen";
  if (code === "EADDRINUSE") return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: the address is in use`, { key: "intake.listen", hint });
  if (code === "EACCES" || code === "EPERM") return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: permission denied`, { key: "intake.listen", hint: "use a port above 1023, or a unix socket in a directory hookspool may write" });
  if (code === "ENOENT") return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: the socket's directory does not exist`, { key: "intake.listen" });
  return new HookspoolError("E_CONFIG", `cannot listen on ${listen} (${code ?? (e instanceof Error ? e.name : "error")})`, { key: "intake.listen", hint });
}

function toResponse(a: Reply): globalThis.Response {
  return new Response(a.body, { status: a.status, headers: a.headers });
}

/** The intake: start() and stop(), both safe to call twice (STYLE.md rule 8). */
export class Intake {
  private server: Server<undefined> | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  private spool: Spool | null = null;
  private ownSpool = false;
  private config: Config;
  private sources = new Map<string, IntakeSource>();
  private watcher: ConfigWatcher | null = null;
  private readonly metrics = new IntakeMetrics();
  private backpressure: Backpressure | null = null;
  private health: Health | null = null;
  private writeFailures: WriteFailures | null = null;

  constructor(private readonly opts: IntakeOptions) {
    this.config = opts.loaded.config;
  }

  /** The address it listens on, for tests and logs. */
  get url(): string {
    if (!this.server) throw new Error("the intake is not started");
    return this.server.url.toString().replace(/\/$/, "");
  }

  async start(): Promise<void> {
    if (this.server) return;
    const { loaded, clock, log } = this.opts;
    const listen = parseListen(this.config.intake.listen, this.config.intake.allow_non_loopback);
    if (this.opts.spool) {
      this.spool = this.opts.spool;
    } else {
      this.spool = openSpool(loaded.paths.db, { create: false, busyTimeoutS: this.config.intake.busy_timeout_s, clock });
      this.ownSpool = true;
    }
    // The intake never migrates (spec 17): an older schema is exit 2, "run hookspool migrate".
    requireCurrentSchema(this.spool);
    this.sources = await loadSources(this.config, { configDir: dirname(loaded.paths.config ?? loaded.paths.home), env: this.opts.env, file: loaded.paths.config ?? "config.toml" });
    this.backpressure = new Backpressure(loaded.paths.db, this.config.limits.min_free_bytes, clock, this.opts.diskFree);
    const writeFailures = new WriteFailures(this.spool, "intake", log, () => clock.now());
    this.writeFailures = writeFailures;
    this.health = new Health(this.spool, loaded.paths.db, clock, this.backpressure, () => writeFailures.flush());
    const deps = {
      spool: this.spool,
      config: () => this.config,
      sources: () => this.sources,
      log,
      metrics: this.metrics,
      clock,
      backpressure: this.backpressure,
      writeFailures,
    };
    const common = {
      // Bun's own cap would answer 413 itself, unlogged and uncounted, and could not follow a
      // reload that raises max_body_bytes. The pipeline refuses an oversized body from its
      // Content-Length before reading it, and stops reading at the source's cap: that is the cap.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      fetch: async (req: globalThis.Request, server: Server<undefined>) => {
        const url = new URL(req.url);
        // A read the spool cannot answer (a stuck lock, an I/O error) is our outage, not a 500.
        if (url.pathname === "/healthz" && req.method === "GET") {
          try {
            const { code, doc } = (this.health as Health).check(this.config, this.sources);
            return Response.json(doc, { status: code });
          } catch (e) {
            return Response.json({ ok: false, degraded: [`spool: unreadable (${caughtFault(log, "intake", "health check", e)})`] }, { status: 503 });
          }
        }
        if (url.pathname === "/metrics" && req.method === "GET") {
          try {
            const tables = renderSpoolMetrics(this.spool as Spool, this.config, loaded.paths.db, { now: clock.now(), diskFree: this.backpressure?.freeReading() });
            return new Response(this.metrics.render() + tables, { headers: { "Content-Type": "text/plain; version=0.0.4" } });
          } catch (e) {
            caughtFault(log, "intake", "metrics", e);
            return new Response("", { status: 503, headers: { "Retry-After": "10" } });
          }
        }
        let instance: string | null = null;
        const m = /^\/hooks\/([^/]+)\/?$/.exec(url.pathname);
        if (m) {
          try {
            instance = decodeURIComponent(m[1]);
          } catch {
            // A malformed escape names no source: 404, never a 5xx (spec 9).
            return new Response("", { status: 404 });
          }
        } else instance = req.headers.get("x-hookspool-route");
        if (!instance) return new Response("", { status: 404 });
        const peer = server.requestIP(req)?.address ?? "unix";
        const answer = await handleHook(deps, {
          instance,
          method: req.method,
          url: url.pathname + url.search,
          headers: req.headers.entries(),
          peer,
          readBody: (cap) => readCapped(req, cap),
        });
        return toResponse(answer);
      },
      error: (e: Error) => {
        log.error("request failed", { reason: e.name });
        return new Response("", { status: 500 });
      },
    };
    // idleTimeout: a slowloris body cannot hold a TCP connection for ever.
    try {
      this.server = "unix" in listen ? Bun.serve({ ...common, unix: listen.unix }) : Bun.serve({ ...common, hostname: listen.hostname, port: listen.port, idleTimeout: 30 });
    } catch (e) {
      throw listenError(this.config.intake.listen, e);
    }
    this.watcher = new ConfigWatcher({ file: loaded.paths.config, mtimeMs: loaded.mtimeMs, loadOptions: this.opts.loadOptions, spool: this.spool, log, now: () => clock.now() });
    this.timer = setInterval(() => {
      // A refused write's issue is retried here too, so it is reported without waiting for traffic.
      this.writeFailures?.flush();
      // A reload that throws (a module that no longer imports) must not end the process.
      this.reloadIfChanged().catch((e) => caughtFault(log, "intake", "config reload", e));
    }, RELOAD_EVERY_S * 1000);
    const where = "unix" in listen ? `unix:${listen.unix}` : `${listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname}:${this.server.port}`;
    log.info("listening", { listen: where });
    // Once per source: the URL to give the sender (behind the proxy, the public host replaces ours).
    const base = "unix" in listen ? "" : `http://${where}`;
    for (const name of this.sources.keys()) log.info("source ready", { source: name, url: `${base}/hooks/${encodeURIComponent(name)}` });
  }

  /** Reload config.toml when its mtime moved; a bad file keeps the previous config (spec 15). */
  reloadIfChanged(): Promise<boolean> {
    if (!this.watcher) return Promise.resolve(false);
    const file = this.opts.loaded.paths.config as string;
    return this.watcher.poll(async (loaded) => {
      // Sources load first: a plugin that no longer imports refuses the whole reload.
      const sources = await loadSources(loaded.config, { configDir: dirname(file), env: this.opts.env, file });
      this.config = loaded.config;
      this.sources = sources;
      this.backpressure?.setMinFree(loaded.config.limits.min_free_bytes);
      this.opts.log.info("config reloaded");
    });
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (this.server) await this.server.stop();
    this.server = null;
    if (this.ownSpool && this.spool) this.spool.close();
    this.spool = null;
  }
}
