// A pull source: the intake long-polls another hookspool's pull destination, commits every
// leased batch's events to this spool exactly as a webhook's (routed here, deduplicated here),
// and only then acks them upstream. A crash between the commit and the ack leases the batch
// again after its lease ends, and its events are then duplicates here, never second events.
// While the upstream is unreachable it backs off with jitter, and past expect_every_s (300 s
// unless set) it opens a source_silent issue, resolved by the next answer.
import type { Clock, Rng } from "../clock.ts";
import { pulledEvent } from "../config/events.ts";
import { resolveSecret, type Env } from "../config/secrets.ts";
import type { IntakeSource } from "../config/sources.ts";
import type { Config, PullSourceConfig } from "../config/types.ts";
import type { Logger } from "../log.ts";
import type { Service } from "../service.ts";
import type { IntakeStore } from "../store/api.ts";
import type { NewEvent } from "../store/enqueue.ts";
import { type Ack, CONSUMER_HEADER, type LeasedBatch, PULL_MAX_ACKS, readLeaseAnswer } from "./pull-wire.ts";

/** Unreachable this long (unless the source's expect_every_s says otherwise) opens an issue. */
export const PULL_UNREACHABLE_S = 300;
/** The longest wait between two tries while the upstream is down. */
export const PULL_BACKOFF_MAX_S = 60;
/** Unsent acks kept at most. */
const PENDING_MAX = 10_000;
/** A lease answer may be this large at most (a batch's documents, max of them). */
const ANSWER_MAX_BYTES = 256 * 1024 * 1024;

export interface PullSourceDeps {
  /** The source's name in this config. */
  name: string;
  config(): Config;
  store: IntakeStore;
  plugins(): ReadonlyMap<string, IntakeSource>;
  clock: Clock;
  rng: Rng;
  log: Logger;
  env?: Env;
  /** This host's name: the consumer's name upstream unless the source sets one. */
  host: string;
  /** Under `run`: the local dispatcher, told that batches may be ready. */
  wake?: (at: number) => void;
}

/** Why a round failed, as one line that names no URL, token or body. */
class PullFailure extends Error {}

export class PullSource implements Service {
  readonly name: string;
  private stopping = new AbortController();
  private loop: Promise<void> | null = null;
  /** When the upstream last answered (or this source started). */
  private lastAnswer = 0;
  private failures = 0;
  private issueOpen = false;

  constructor(private readonly d: PullSourceDeps) {
    this.name = `pull source ${d.name}`;
  }

  async start(): Promise<void> {
    if (this.loop) return;
    this.stopping = new AbortController();
    this.lastAnswer = this.d.clock.now();
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    await this.loop;
    this.loop = null;
  }

  private settings(): PullSourceConfig | null {
    return this.d.config().sources[this.d.name]?.pull ?? null;
  }

  private async run(): Promise<void> {
    while (!this.stopping.signal.aborted) {
      const s = this.settings();
      if (!s) return;
      try {
        await this.round(s);
        this.answered();
      } catch (e) {
        if (this.stopping.signal.aborted) return;
        await this.failed(s, e);
      }
    }
  }

  /**
   * Acks of batches committed here that the upstream has not taken yet (its ack failed): sent
   * before the next lease, so a batch is not delivered again only because an ack was lost.
   */
  private pending: Ack[] = [];

  /** One lease request, its batches committed here, then acked. */
  private async round(s: PullSourceConfig): Promise<void> {
    await this.flushAcks(s);
    const answer = await this.post(s, `lease?wait=${s.wait_s}&max=${s.max}`, "", s.wait_s + 30);
    const leases = readLeaseAnswer(answer);
    if (leases.length === 0) return;
    const commits: { lease: string; commit: Promise<unknown> }[] = [];
    for (const { leased, payloads } of leases) {
      let events: NewEvent[];
      try {
        events = this.eventsOf(leased, payloads);
      } catch (e) {
        // No route here for it (a config fault of this side): upstream backs it off and, in
        // the end, keeps it as a dead letter to replay once the config is fixed.
        this.d.log.limited("warn", "pulled batch not routable here; upstream retries it", {
          source: this.d.name,
          reason: (e as Error).message.slice(0, 160),
        });
        this.pending.push({ lease: leased.lease, result: "retry", reason: "no route on the consumer" });
        continue;
      }
      // Every batch's events asked for in the same turn, so the group commit writes them in
      // one transaction (each its own all-or-none part). A lease answer holds one head per key,
      // so their order across keys does not matter.
      commits.push({ lease: leased.lease, commit: this.d.store.enqueueAll(events, this.d.clock.now()) });
    }
    let committed = 0;
    let failure: unknown = null;
    for (const [i, r] of (await Promise.allSettled(commits.map((c) => c.commit))).entries()) {
      // Committed before the ack; what this spool refused is not acked, and its lease ends.
      if (r.status === "rejected") failure ??= r.reason;
      else {
        committed++;
        this.pending.push({ lease: commits[i].lease, result: "ok" });
      }
    }
    if (committed > 0) this.d.wake?.(this.d.clock.now());
    await this.flushAcks(s);
    this.d.log.info("pulled", { source: this.d.name, reason: `${committed} of ${leases.length} batch(es)` });
    if (failure !== null) throw failure;
  }

  private async flushAcks(s: PullSourceConfig): Promise<void> {
    // An upstream that never takes them: the oldest are let go (their batches come again, as duplicates here).
    if (this.pending.length > PENDING_MAX) this.pending.splice(0, this.pending.length - PENDING_MAX);
    while (this.pending.length > 0) {
      const acks = this.pending.slice(0, PULL_MAX_ACKS);
      await this.post(s, "ack", JSON.stringify({ acks }), 30);
      this.pending.splice(0, acks.length);
    }
  }

  private eventsOf(leased: LeasedBatch, payloads: string[]): NewEvent[] {
    const doc = leased.document;
    if (!Array.isArray(doc.event_meta) || doc.event_meta.length !== payloads.length)
      throw new PullFailure("a leased batch's events and event_meta differ in length");
    // The upstream spool's instance, from its webhook id: an event that had no dedup id there
    // gets one that names it, so a batch leased twice is a duplicate here.
    const instance = /^hs_([0-9A-Za-z]+)_/.exec(leased.webhook_id)?.[1] ?? "upstream";
    return doc.event_meta.map((meta, i) =>
      pulledEvent(this.d.config(), this.d.plugins(), {
        via: this.d.name,
        source: doc.source,
        key: doc.key,
        eventType: meta.event_type,
        dedupId: meta.dedup_id ?? `hs_${instance}_e${meta.id}`,
        payload: payloads[i],
        headers: meta.headers ?? {},
        version: typeof meta.version === "number" && Number.isFinite(meta.version) ? meta.version : null,
        now: this.d.clock.now(),
      }),
    );
  }

  /** POST to the upstream's pull API; the answer's text, or a PullFailure saying what went wrong. */
  private async post(s: PullSourceConfig, verb: string, body: string, timeoutS: number): Promise<string> {
    let token: string;
    try {
      token = resolveSecret(s.token, this.d.env);
    } catch (e) {
      throw new PullFailure((e as Error).message);
    }
    const url = `${s.url.replace(/\/+$/, "")}/pull/${encodeURIComponent(s.destination)}/${verb}`;
    const timeout = AbortSignal.timeout(timeoutS * 1000);
    let res: Response;
    try {
      res = await fetch(url, {
        method: "POST",
        body,
        headers: {
          Authorization: `Bearer ${token}`,
          [CONSUMER_HEADER]: s.consumer ?? this.d.host,
          "Content-Type": "application/json",
        },
        redirect: "manual",
        signal: AbortSignal.any([this.stopping.signal, timeout]),
      });
    } catch (e) {
      throw new PullFailure(timeout.aborted ? "timed out" : `unreachable (${(e as Error).name})`);
    }
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      const why = res.status === 401 ? "401: the token is refused" : `answered ${res.status}`;
      throw new PullFailure(why);
    }
    const text = await res.text();
    if (text.length > ANSWER_MAX_BYTES) throw new PullFailure("the answer is too large");
    return text;
  }

  private answered(): void {
    this.lastAnswer = this.d.clock.now();
    this.failures = 0;
    if (!this.issueOpen) return;
    this.issueOpen = false;
    void this.d.store
      .resolveIssue(this.fingerprint(), this.d.clock.now())
      .catch((e) => this.d.log.limited("warn", "pull issue not resolved", { reason: (e as Error).name }));
    this.d.log.info("pull upstream answers again", { source: this.d.name });
  }

  private fingerprint(): string {
    return `pull_unreachable:${this.d.name}`;
  }

  private async failed(s: PullSourceConfig, e: unknown): Promise<void> {
    this.failures++;
    const why = e instanceof PullFailure ? e.message : `failed (${(e as Error).name ?? "error"})`;
    this.d.log.limited("warn", "pull failed; trying again", { source: this.d.name, reason: why });
    const now = this.d.clock.now();
    const limit = this.d.config().sources[this.d.name]?.expect_every_s || PULL_UNREACHABLE_S;
    if (now - this.lastAnswer >= limit) {
      this.issueOpen = true;
      await this.d.store
        .raiseIssue({
          fingerprint: this.fingerprint(),
          kind: "source_silent",
          error:
            `the upstream pull destination ${s.destination} has not answered ` +
            `for ${Math.round(now - this.lastAnswer)} s: ${why}`,
          now,
        })
        .catch((err) => this.d.log.limited("warn", "pull issue not raised", { reason: (err as Error).name }));
    }
    // Exponential with full jitter: many consumers coming back together do not come back at once.
    const capS = Math.min(PULL_BACKOFF_MAX_S, 2 ** Math.min(this.failures, 6));
    await this.sleep((capS / 2 + (this.d.rng.next() * capS) / 2) * 1000);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signal = this.stopping.signal;
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener("abort", done);
    });
  }
}

/** Every pull source of the config in force, one PullSource each, following reloads. */
export class PullSources {
  private readonly running = new Map<string, PullSource>();

  constructor(private readonly deps: Omit<PullSourceDeps, "name">) {}

  /** Start the pull sources the config names and stop those it no longer does. */
  async sync(): Promise<void> {
    const config = this.deps.config();
    const wanted = new Set(Object.keys(config.sources).filter((n) => config.sources[n].pull));
    for (const [name, p] of this.running)
      if (!wanted.has(name)) {
        this.running.delete(name);
        await p.stop();
      }
    for (const name of wanted)
      if (!this.running.has(name)) {
        const p = new PullSource({ ...this.deps, name });
        this.running.set(name, p);
        await p.start();
      }
  }

  async stop(): Promise<void> {
    const all = [...this.running.values()];
    this.running.clear();
    await Promise.all(all.map((p) => p.stop()));
  }
}
