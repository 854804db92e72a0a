// The maintenance tick (spec 8, 11.4, 14.4): every 60 s liveness (source_silent), stale polls,
// the spool limit and alerts; the retention pass once an hour. start() and stop() are safe twice.
import type { Clock } from "../clock.ts";
import type { Env } from "../config/load.ts";
import { expectEvery, type IntakeSource } from "../config/sources.ts";
import type { Config } from "../config/types.ts";
import { diskFreeBytes } from "../obs/disk.ts";
import { silentFor } from "../obs/status.ts";
import { caughtFault, isSpoolWriteError, WRITE_FAILED_ISSUE, WriteFailures } from "../obs/faults.ts";
import type { Logger } from "../log.ts";
import type { Spool } from "../store/db.ts";
import { getIssueByFingerprint, raiseIssue, resolveIssue } from "../store/issues.ts";
import { expectationSince, getMetaNumber, noteRetentionPass } from "../store/meta.ts";
import { pollRows } from "../store/stats.ts";
import { policyFromConfig, runRetention } from "../store/retention.ts";
import { runAlerts } from "./alerts.ts";

export const MAINTENANCE_EVERY_S = 60;
export const RETENTION_EVERY_S = 3600;

export interface MaintenanceOptions {
  spool: Spool;
  dbPath: string;
  /** The current config (the dispatcher reloads it). */
  config(): Config;
  /** now_eff, so a backwards clock step makes maintenance's time stand still too. */
  now(): number;
  clock: Clock;
  log: Logger;
  env: Env;
  diskFree?: (path: string) => number | null;
  /** The source plugins the dispatcher loaded (their liveness expectations). */
  plugins?: () => ReadonlyMap<string, IntakeSource> | undefined;
}

export class Maintenance {
  private timer: ReturnType<typeof setInterval> | null = null;
  private first: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  private readonly writeFailures: WriteFailures;

  constructor(private readonly o: MaintenanceOptions) {
    this.writeFailures = new WriteFailures(o.spool, "maintenance", o.log, () => o.clock.now());
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.tickOnce(), MAINTENANCE_EVERY_S * 1000);
    this.first = setTimeout(() => void this.tickOnce(), 1000);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    if (this.first) clearTimeout(this.first);
    this.timer = null;
    this.first = null;
    await this.running;
  }

  private async tickOnce(): Promise<void> {
    if (this.running) return;
    this.running = this.tick()
      .catch((e) => this.survive("maintenance", e))
      .finally(() => {
        this.running = null;
      });
    await this.running;
  }

  /** Open an issue on a condition's onset; a persisting condition does not count again every minute. */
  private raiseOnce(fingerprint: string, kind: "source_silent" | "spool", error: string, now: number): void {
    const row = getIssueByFingerprint(this.o.spool, fingerprint);
    if (row && (row.state === "open" || row.state === "acked" || row.state === "ignored")) return;
    raiseIssue(this.o.spool, { fingerprint, kind, error, now });
    this.o.log.warn("issue opened", { reason: fingerprint });
  }

  /** A chore failed: count and log it by class; a refused write also opens the spool issue. */
  private survive(what: string, e: unknown): void {
    if (isSpoolWriteError(e)) this.writeFailures.record(what, e);
    else caughtFault(this.o.log, "maintenance", what, e);
  }

  /** Run one chore; its failure never stops the others (retention still runs when alerts fail). */
  private async chore(what: string, fn: () => void | Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      this.survive(what, e);
    }
  }

  /** One maintenance pass: liveness, polls, spool limits, alerts, and retention when due. */
  async tick(): Promise<void> {
    const { spool } = this.o;
    const config = this.o.config();
    const now = this.o.now();
    this.writeFailures.flush();
    await this.chore("liveness", () => this.liveness(config, now));
    await this.chore("polls", () => this.polls(config, now));
    await this.chore("spool limits", () => this.spoolLimits(config, now));
    await this.chore("alerts", async () => {
      await runAlerts({ spool, config, env: this.o.env, log: this.o.log, now });
    });
    await this.chore("retention", async () => {
      const last = getMetaNumber(spool, "last_retention_at");
      if (last !== null && now - last < RETENTION_EVERY_S && now >= last) return;
      const counts = await runRetention(spool, policyFromConfig(config), now);
      noteRetentionPass(spool, now);
      this.o.log.info("retention pass", { reason: Object.entries(counts).map(([k, v]) => `${k}=${v}`).join(" ") });
    });
  }

  /**
   * Free space below limits.min_free_bytes opens spool:min_free_bytes until it clears. A refused
   * write (any process) opened spool:write_failed; it resolves once a whole maintenance interval
   * has passed without another refusal and the spool takes this pass's writes.
   */
  private spoolLimits(config: Config, now: number): void {
    const { spool } = this.o;
    const free = (this.o.diskFree ?? diskFreeBytes)(this.o.dbPath);
    if (free !== null && free < config.limits.min_free_bytes) this.raiseOnce("spool:min_free_bytes", "spool", `${free} bytes free, below limits.min_free_bytes (${config.limits.min_free_bytes})`, now);
    else resolveIssue(spool, "spool:min_free_bytes", now);
    const failed = getIssueByFingerprint(spool, WRITE_FAILED_ISSUE);
    if (failed && (failed.state === "open" || failed.state === "acked") && now - failed.last_at >= MAINTENANCE_EVERY_S && !this.writeFailures.hasPending) {
      resolveIssue(spool, WRITE_FAILED_ISSUE, now);
    }
  }

  /**
   * No event for longer than the source's expectation (config's expect_every_s, else the
   * plugin's) opens source_silent:<source>; the next event resolves it. Before the first event
   * the clock starts when the expectation was first seen, and status reads the same fact.
   */
  private liveness(config: Config, now: number): void {
    const { spool } = this.o;
    const plugins = this.o.plugins?.();
    for (const name of Object.keys(config.sources)) {
      const fp = `source_silent:${name}`;
      const every = expectEvery(config, name, plugins);
      if (every === 0) {
        resolveIssue(spool, fp, now);
        continue;
      }
      const expectedSince = expectationSince(spool, name, now);
      const silent = silentFor(now, getMetaNumber(spool, `source:${name}:last_event_at`), expectedSince, every);
      if (silent !== null) this.raiseOnce(fp, "source_silent", `no event for ${Math.round(silent)}s (expected every ${every}s)`, now);
      else resolveIssue(spool, fp, now);
    }
  }

  /** spec 14.4: no delivered tick for more than 3 x every_s opens poll:<i>:stale. */
  private polls(config: Config, now: number): void {
    for (const p of pollRows(this.o.spool)) {
      const every = config.sources[p.instance]?.every_s;
      if (!every) continue;
      const fp = `poll:${p.instance}:stale`;
      const ref = p.delivered_at ?? p.created_at;
      if (now - ref > 3 * every) this.raiseOnce(fp, "source_silent", `no delivered tick for ${Math.round(now - ref)}s (every_s = ${every})`, now);
      else resolveIssue(this.o.spool, fp, now);
    }
  }
}
