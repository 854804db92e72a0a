// The intake service: Bun.serve on loopback, /hooks/<instance>, /healthz, /metrics, config reload.
import { badRequest, requestTarget } from "./target.ts";
import { hostname } from "node:os";
import { dirname } from "node:path";
import type { Server } from "bun";
import { type Clock, systemRng } from "../clock.ts";
import type { Env, LoadOptions } from "../config/load.ts";
import { ConfigWatcher } from "../config/watch.ts";
import type { Config, LoadedConfig } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import type { Logger } from "../log.ts";
import { Faults } from "../obs/faults.ts";
import { renderStoreMetrics } from "../obs/metrics.ts";
import type { IntakeStore, PullStore } from "../store/api.ts";
import { openStores, type Stores } from "../store/open.ts";
import { Backpressure } from "./backpressure.ts";
import { Health } from "./health.ts";
import { IntakeMetrics } from "./metrics.ts";
import { handleOutcome, outcomePath } from "./outcomes.ts";
import { handleHook } from "./pipeline.ts";
import { bodiesDir } from "../bodies.ts";
import { Gate, LARGE_AT_ONCE, serveBody } from "./large.ts";
import { remoteAddress } from "../plugin/hook-request.ts";
import { PullApi } from "./pull.ts";
import { RotationWatch } from "./rotation.ts";
import { PullSources } from "./pull-source.ts";
import { pullPath } from "./pull-wire.ts";
import type { Reply } from "./replies.ts";
import { parseListen } from "../config/listen.ts";
import { Periodic, type Service, startAll, stopAll } from "../service.ts";
import { type IntakeSource, loadSources } from "../config/sources.ts";

/** The intake checks config.toml's mtime this often. */
export const RELOAD_EVERY_S = 5;

export interface IntakeOptions {
  loaded: LoadedConfig;
  /** How the config was found, so a reload reads the same file with the same precedence. */
  loadOptions: LoadOptions;
  clock: Clock;
  log: Logger;
  env?: Env;
  /**
   * `run` shares its stores (one connection, or one pool); otherwise the intake opens its own (SQLite's busy_timeout 10
   * s).
   */
  stores?: Stores;
  /** Free bytes on the spool's filesystem (tests inject a full disk). */
  diskFree?: (path: string) => number | null;
  /** Under `run`: tells the dispatcher in the same process when a batch it queued into may be ready. */
  wake?: (at: number) => void;
}

async function readCapped(req: globalThis.Request, cap: number): Promise<Uint8Array | "too_large"> {
  if (!req.body) return new Uint8Array();
  // The pipeline has held the Content-Length to the cap (and refused a body without one), and
  // HTTP framing delivers exactly that many bytes: read them in one piece, not chunk by chunk.
  const declared = Number(req.headers.get("content-length") ?? Number.NaN);
  if (Number.isSafeInteger(declared) && declared <= cap) {
    const bytes = await req.bytes();
    return bytes.length > cap ? "too_large" : bytes;
  }
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.length;
    // The hard read cap: Content-Length can lie, the bytes cannot.
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

/**
 * Stream the body into `sink` chunk by chunk (nothing held beyond a chunk), at most `cap` bytes;
 * "too_large" when there is more.
 */
async function streamCapped(
  req: globalThis.Request,
  cap: number,
  sink: (chunk: Uint8Array) => Promise<void>,
): Promise<number | "too_large"> {
  if (!req.body) return 0;
  const reader = req.body.getReader();
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return total;
    total += value.length;
    if (total > cap) {
      await reader.cancel().catch(() => {});
      return "too_large";
    }
    await sink(value);
  }
}

/** Why the listener could not start, as one line for the operator (a port in use is theirs to fix). */
function listenError(listen: string, e: unknown): HookspoolError {
  const code = (e as { code?: string } | null)?.code;
  const hint = "stop whatever holds it (another hookspool?) or change intake.listen";
  if (code === "EADDRINUSE")
    return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: the address is in use`, {
      key: "intake.listen",
      hint,
    });
  if (code === "EACCES" || code === "EPERM")
    return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: permission denied`, {
      key: "intake.listen",
      hint: "use a port above 1023, or a unix socket in a directory hookspool may write",
    });
  if (code === "ENOENT")
    return new HookspoolError("E_CONFIG", `cannot listen on ${listen}: the socket's directory does not exist`, {
      key: "intake.listen",
    });
  return new HookspoolError(
    "E_CONFIG",
    `cannot listen on ${listen} (${code ?? (e instanceof Error ? e.name : "error")})`,
    { key: "intake.listen", hint },
  );
}

function toResponse(a: Reply): globalThis.Response {
  return new Response(a.body, { status: a.status, headers: a.headers });
}

/** The intake service: it listens from start() until stop(). */
export class Intake implements Service {
  readonly name = "intake";
  private server: Server<undefined> | null = null;
  /** What runs beside the listener: the config watcher and the refused-write reporter. */
  private companions: Service[] = [];
  /** The stores the intake opened itself (closed at its stop); null when `run` shares its own. */
  private ownStores: Stores | null = null;
  private config: Config;
  private sources = new Map<string, IntakeSource>();
  private watcher: ConfigWatcher | null = null;
  private readonly metrics: IntakeMetrics;
  private backpressure: Backpressure | null = null;
  private health: Health | null = null;
  private pulls: PullSources | null = null;
  private pullApi: PullApi | null = null;

  constructor(private readonly opts: IntakeOptions) {
    this.config = opts.loaded.config;
    this.metrics = new IntakeMetrics(opts.clock.now());
  }

  /** The address it listens on, for tests and logs. */
  get url(): string {
    if (!this.server) throw new Error("the intake is not started");
    return this.server.url.toString().replace(/\/$/, "");
  }

  async start(): Promise<void> {
    if (this.server) return;
    try {
      await this.listen();
    } catch (e) {
      await this.stop();
      throw e;
    }
  }

  private async listen(): Promise<void> {
    const { loaded, clock, log } = this.opts;
    const listen = parseListen(this.config.intake.listen, this.config.intake.allow_non_loopback);
    // The intake never migrates: another schema version is exit 2, "run hookspool migrate".
    let stores = this.opts.stores;
    if (!stores) {
      stores = await openStores(this.config, {
        mode: "intake",
        paths: loaded.paths,
        env: this.opts.env ?? process.env,
        clock,
        busyTimeoutS: this.config.intake.busy_timeout_s,
      });
      this.ownStores = stores;
    }
    const store: IntakeStore = stores.intake();
    this.sources = await loadSources(this.config, {
      configDir: dirname(loaded.paths.config ?? loaded.paths.home),
      env: this.opts.env,
      file: loaded.paths.config ?? "config.toml",
    });
    // On PostgreSQL the spool is on the server's disk, not this host's: the server refuses a
    // write it cannot keep (a 503 then), and this host's free space says nothing about it.
    const diskFree = store.spoolFile === null ? () => null : this.opts.diskFree;
    this.backpressure = new Backpressure(loaded.paths.spoolFile, this.config.limits.min_free_bytes, clock, diskFree);
    const faults = new Faults(store, "intake", log, () => clock.now());
    this.health = new Health(store, loaded.paths.spoolFile, clock, this.backpressure, () => void faults.flush());
    const deps = {
      store,
      config: () => this.config,
      sources: () => this.sources,
      log,
      metrics: this.metrics,
      clock,
      backpressure: this.backpressure,
      faults,
      wake: this.opts.wake,
      rotation: new RotationWatch({ store, metrics: this.metrics, log }),
      bodies: bodiesDir(loaded.paths.home),
      largeGate: new Gate(LARGE_AT_ONCE),
    };
    let pullStore: Promise<PullStore> | null = null;
    const opened = stores;
    const pullApi = (this.pullApi = new PullApi({
      store: () => {
        pullStore ??= opened.pull();
        return pullStore;
      },
      config: () => this.config,
      clock,
      rng: systemRng,
      log,
      env: this.opts.env,
      caught: (what, e) => void faults.caught(what, e),
    }));
    const common = {
      // Bun's own cap would answer 413 itself, unlogged and uncounted, and could not follow a
      // reload that raises max_body_bytes. The pipeline refuses an oversized body from its
      // Content-Length before reading it, and stops reading at the source's cap: that is the cap.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      fetch: async (req: globalThis.Request, server: Server<undefined>) => {
        // Never from Host: a client's malformed Host or target is its 400, not our 500.
        const url = requestTarget(req.url, req.headers.get("host"));
        if (!url.ok) return badRequest(url.why);
        // A read the spool cannot answer (a stuck lock, an I/O error) is our outage, not a 500.
        if (url.path === "/healthz" && req.method === "GET") {
          try {
            const { code, doc } = await (this.health as Health).check(this.config, this.sources);
            return Response.json(doc, { status: code });
          } catch (e) {
            return Response.json(
              { ok: false, degraded: [`spool: unreadable (${faults.caught("health check", e)})`] },
              { status: 503 },
            );
          }
        }
        if (url.path === "/metrics" && req.method === "GET") {
          try {
            const tables = await renderStoreMetrics(store, this.config, loaded.paths.spoolFile, {
              now: clock.now(),
              diskFree: this.backpressure?.freeReading(),
            });
            return new Response(this.metrics.render() + tables, {
              headers: { "Content-Type": "text/plain; version=0.0.4" },
            });
          } catch (e) {
            faults.caught("metrics", e);
            return new Response("", { status: 503, headers: { "Retry-After": "10" } });
          }
        }
        // A destination fetching a body it was sent by reference (body_url).
        if (url.path.startsWith("/bodies/") && req.method === "GET") {
          const answer = serveBody(
            bodiesDir(loaded.paths.home),
            url.path,
            new URLSearchParams(url.search),
            clock.now(),
          );
          if (answer) return answer;
        }
        // A receiver reporting the outcome of a run one of our deliveries started.
        const outcomeId = outcomePath(url.path);
        if (outcomeId === "malformed") return new Response("", { status: 404 });
        if (outcomeId !== null) {
          const answer = await handleOutcome(
            { store, config: () => this.config, clock, rng: systemRng, log, env: this.opts.env },
            {
              deliveryId: outcomeId,
              method: req.method,
              headers: req.headers,
              readBody: (cap) => readCapped(req, cap),
            },
          );
          return toResponse(answer);
        }
        // A pull destination's consumers lease and ack its batches.
        const pull = pullPath(url.path);
        if (pull === "malformed") return new Response("", { status: 404 });
        if (pull !== null) {
          const answer = await pullApi.handle({
            ...pull,
            method: req.method,
            headers: req.headers,
            search: new URLSearchParams(url.search),
            signal: req.signal,
            remote: remoteAddress(server.requestIP(req)?.address ?? "unix", req.headers.get("x-forwarded-for")),
            readBody: (cap) => readCapped(req, cap),
          });
          return toResponse(answer);
        }
        let instance: string | null = null;
        const m = /^\/hooks\/([^/]+)\/?$/.exec(url.path);
        if (m) {
          try {
            instance = decodeURIComponent(m[1]);
          } catch {
            // A malformed escape names no source: 404, never a 5xx.
            return new Response("", { status: 404 });
          }
        } else instance = req.headers.get("x-hookspool-route");
        if (!instance) return new Response("", { status: 404 });
        const peer = server.requestIP(req)?.address ?? "unix";
        const arrived = performance.now();
        const answer = await handleHook(deps, {
          instance,
          method: req.method,
          url: url.path + url.search,
          headers: req.headers.entries(),
          peer,
          readBody: (cap) => readCapped(req, cap),
          streamBody: (cap, sink) => streamCapped(req, cap, sink),
        });
        if (answer.status >= 200 && answer.status < 300) this.metrics.acked((performance.now() - arrived) / 1000);
        return toResponse(answer);
      },
      error: (e: Error) => {
        // Only a bug gets here (the pipeline answers every failure it knows): say where it was.
        faults.caught("request", e);
        return new Response("", { status: 500 });
      },
    };
    // idleTimeout: a slowloris body cannot hold a TCP connection for ever.
    try {
      this.server =
        "unix" in listen
          ? Bun.serve({ ...common, unix: listen.unix })
          : Bun.serve({ ...common, hostname: listen.hostname, port: listen.port, idleTimeout: 30 });
    } catch (e) {
      throw listenError(this.config.intake.listen, e);
    }
    this.watcher = new ConfigWatcher({
      file: loaded.paths.config,
      mtimeMs: loaded.mtimeMs,
      loadOptions: this.opts.loadOptions,
      issues: store,
      log,
      now: () => clock.now(),
      everyS: RELOAD_EVERY_S,
      apply: (next) => this.apply(next),
      // A reload that throws (a module that no longer imports) must not end the process.
      onError: (e) => faults.caught("config reload", e),
    });
    // A refused write's issue is retried on a timer too, so it is reported without waiting for traffic.
    const reporter = new Periodic("refused-write report", {
      everyMs: () => RELOAD_EVERY_S * 1000,
      run: async () => faults.flush(),
      onError: (e) => faults.caught("issue write", e),
    });
    this.companions = [this.watcher, reporter];
    await startAll(this.companions);
    // Sources whose events come from another hookspool's pull destination.
    this.pulls = new PullSources({
      config: () => this.config,
      store,
      plugins: () => this.sources,
      clock,
      rng: systemRng,
      log,
      env: this.opts.env,
      host: hostname(),
      wake: this.opts.wake,
    });
    await this.pulls.sync();
    const where =
      "unix" in listen
        ? `unix:${listen.unix}`
        : `${listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname}:${this.server.port}`;
    this.address = where;
    log.info("listening", { listen: where });
    // Once per source: the URL to give the sender (behind the proxy, the public host replaces ours).
    const base = "unix" in listen ? "" : `http://${where}`;
    for (const name of this.sources.keys())
      log.info("source ready", { source: name, url: `${base}/hooks/${encodeURIComponent(name)}` });
  }

  /** Where it listens once started ("127.0.0.1:8650", "unix:/path"): the port is the bound one. */
  address: string | null = null;

  /** Reload config.toml when its mtime moved; a bad file keeps the previous config. */
  reloadIfChanged(): Promise<boolean> {
    return this.watcher?.poll() ?? Promise.resolve(false);
  }

  private async apply(loaded: LoadedConfig): Promise<void> {
    const file = this.opts.loaded.paths.config as string;
    // Sources load first: a plugin that no longer imports refuses the whole reload.
    const sources = await loadSources(loaded.config, { configDir: dirname(file), env: this.opts.env, file });
    this.config = loaded.config;
    this.sources = sources;
    this.backpressure?.setMinFree(loaded.config.limits.min_free_bytes);
    await this.pulls?.sync();
    this.opts.log.info("config reloaded");
  }

  /** Stop listening (requests in flight finish), then the companions; close an own connection. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    this.pullApi?.close();
    if (server) await server.stop();
    await this.pulls?.stop();
    this.pulls = null;
    await stopAll(this.companions);
    this.companions = [];
    this.watcher = null;
    const own = this.ownStores;
    this.ownStores = null;
    await own?.close();
  }
}
