// The crash and power-loss suites' shared parts: a home whose config.toml has every source and
// destination the cases need, a receiver that records (and verifies) every delivery, signed
// requests, and real `hookspool` processes that are always killed when a case ends.
import type { Database } from "bun:sqlite";
import { createHmac } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openSpool, type SqliteSpool } from "../../src/store/sqlite/db.ts";
import type { CRASH_POINTS } from "../../src/testhook.ts";
import {
  type Hookspool,
  type Runtime,
  type StartOptions as ProcessOptions,
  startHookspool,
  waitFor,
  within,
} from "../helpers/proc.ts";
import { type Delivery as ReceiverDelivery, Receiver } from "../helpers/receiver.ts";
import { writeTallyBobbin } from "../helpers/bobbins.ts";
import { tempDir } from "../helpers/tmp.ts";

export type CrashPoint = (typeof CRASH_POINTS)[number];
export { waitFor, within };

const IN_SECRET = "crash-inbound-secret";
const OUT_SECRET = `whsec_${Buffer.from("crash-outbound-secret-bytes").toString("base64")}`;

/** A batch document as the receiver (or the script) got it. */
export interface Doc {
  source: string;
  route: string;
  key: string;
  batch_id: number;
  delivery_id: string;
  attempt: number;
  count: number;
  content_hash: string;
  events: Record<string, unknown>[];
  event_meta: { id: number; event_type: string; received_at: number; dedup_id: string | null }[];
}

/** A delivery of a batch document, as the receiver got it. */
export type Delivery = ReceiverDelivery<Doc>;

/** The stub http destinations of every case: /deadend answers 422 (permanent), every other path 200. */
function receiver(): Receiver<Doc> {
  return new Receiver<Doc>({ secret: OUT_SECRET, answer: ({ path }) => (path === "/deadend" ? 422 : 200) });
}

/**
 * The source the quarantine case needs: a module whose key() throws while <home>/broken exists
 * (a plugin bug), so the same request quarantines before the fix and queues after it.
 */
function flakyModule(flag: string): string {
  return `import { createHmac, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
export default {
  secrets: ["secret"],
  authHeaders: ["x-sig"],
  verify(req, secrets) {
    const got = Buffer.from(req.header("x-sig") ?? "");
    const want = Buffer.from("sha256=" + createHmac("sha256", secrets.get("secret")).update(req.body).digest("hex"));
    return got.length === want.length && timingSafeEqual(got, want);
  },
  key(payload) {
    if (existsSync(${JSON.stringify(flag)})) throw new TypeError("a plugin bug");
    return String(payload.topic);
  },
  eventType: (payload) => String(payload.type ?? ""),
};
`;
}

/** A script destination: keeps each document it is given with its delivery id, then emits one event. */
const WORKER =
  `#!/bin/sh
out="$RUNS/$(date +%s%N)-$$.json"
printf '{"env_delivery_id":"%s","doc":' "$HOOKSPOOL_DELIVERY_ID" > "$out"
cat >> "$out"
printf '}' >> "$out"
printf '{"enqueue": {"source": "emitted", "key": "followup-%s", "event_type": "followup", "payload": ` +
  `{"from_batch": %s}}}\\n' "$HOOKSPOOL_BATCH_ID" "$HOOKSPOOL_BATCH_ID"
`;

/**
 * One home for every case. Sources:
 * - demo: dedup id from X-Id, a tee to mirror (two copies per request), "reject" events to deadend;
 * - nodedup: no dedup id, like a Pub/Sub push;
 * - slow / jobs: a 0.3 s quiet window, so the 2xx is long flushed when the dispatcher claims;
 *   jobs goes to script:worker, whose emits land in source emitted;
 * - flaky: the module above.
 */
function writeHome(home: string, port: number): void {
  const secretFile = join(home, "in-secret");
  writeFileSync(secretFile, IN_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "out-secret"), OUT_SECRET, { mode: 0o600 });
  writeFileSync(join(home, "flaky.ts"), flakyModule(join(home, "broken")));
  writeFileSync(join(home, "worker.sh"), WORKER, { mode: 0o755 });
  mkdirSync(join(home, "runs"));
  // A bobbin with a processor (state = true): its outputs go to the receiver at /tally.
  const bobbins = join(home, "bobbins-private");
  writeTallyBobbin(bobbins);
  const template = (dedup: boolean) =>
    `template = { scheme = "hmac-sha256-hex", header = "X-Sig", prefix = "sha256=", key = "topic", ` +
    `event_type = "type"${dedup ? `, dedup = "header:X-Id"` : ""} }
secrets.secret = { file = "${secretFile}" }`;
  const http = (name: string, path: string) => `[destinations.${name}]
type = "http"
url = "http://127.0.0.1:${port}${path}"
allow_insecure = true
secret = { file = "${join(home, "out-secret")}" }
timeout_s = 2
max_body_bytes = 4000000
`;
  writeFileSync(
    join(home, "config.toml"),
    `[spool]
bobbin_path = ["${bobbins}"]
# The power-loss body (about 2.4 MB) stays in its row, to fill the WAL; a larger one goes to a file.
inline_max_bytes = 2500000

[intake]
listen = "127.0.0.1:0"
# The power-loss case sends a body of about 2.4 MB (bigger than the page cache).
max_body_bytes = 3000000

[coalesce]
max_bytes = 3000000

[dispatch]
poll_s = 0.05
heartbeat_s = 1
backoff_base_s = 0.1
backoff_cap_s = 0.4
lease_grace_s = 5
breaker = { trip_after = 3, cooldown_initial_s = 0.3, cooldown_max_s = 1 }

[sources.demo]
${template(true)}
action = "receiver"

[sources.nodedup]
${template(false)}
action = "receiver"

[sources.slow]
${template(true)}
quiet_s = 0.3
max_s = 1
action = "receiver"

[sources.jobs]
${template(true)}
quiet_s = 0.3
max_s = 1
action = "script:worker"

[sources.flaky]
module = "${join(home, "flaky.ts")}"
secrets.secret = { file = "${secretFile}" }
action = "receiver"

[sources.emitted]
action = "receiver"

[bobbins.tally]
bobbin = "acme.tally"
secrets.secret = { file = "${secretFile}" }
outputs = { tally = "tallied" }
span = "immediate"

[[routes]]
name = "demo-reject"
source = "demo"
match = { event_type = "reject" }
destination = "deadend"

[[routes]]
name = "demo-mirror"
source = "demo"
destination = "mirror"
tee = true

${http("receiver", "/hook")}
${http("mirror", "/mirror")}
${http("deadend", "/deadend")}
${http("tallied", "/tally")}
[destinations."script:worker"]
argv = ["/bin/sh", "${join(home, "worker.sh")}"]
timeout_s = 5
env = { RUNS = "${join(home, "runs")}" }
`,
  );
}

/** One webhook as a sender makes it: the same bytes and headers on every retry. */
export interface Hook {
  source: string;
  body: string;
  dedupId?: string;
}

export function hook(source: string, payload: Record<string, unknown>, dedupId?: string): Hook {
  return { source, body: JSON.stringify(payload), dedupId };
}

/** What the sender saw: a status and body, or a dropped connection (no response at all). */
export type Answer = { status: number; body: string } | { dropped: string };

export function statusOf(a: Answer): string {
  return "dropped" in a ? `dropped (${a.dropped})` : `${a.status} ${a.body}`;
}

/** How a case starts a process: the shared options, with the crash point named from the list. */
export type StartOptions = Omit<ProcessOptions, "runtime" | "hook"> & { hook?: CrashPoint };

/** One crash case: a home, a receiver, and every process it starts, all torn down by close(). */
export class Scene {
  readonly home = tempDir("hookspool-crash-");
  readonly receiver = receiver();
  readonly dbPath: string;
  private readonly procs: Hookspool[] = [];
  private spool: SqliteSpool | null = null;

  constructor(readonly runtime: Runtime = "bun") {
    writeHome(this.home, this.receiver.port);
    this.dbPath = join(this.home, "spool.db");
  }

  /** Start `hookspool <argv>`; for run and intake, wait until it listens. */
  async start(argv: string[] = ["run"], o: StartOptions = {}): Promise<{ hs: Hookspool; port: number }> {
    const hs = await startHookspool(this.home, argv, { ...o, runtime: this.runtime });
    this.procs.push(hs);
    const port = argv[0] === "run" || argv[0] === "intake" ? await hs.port() : 0;
    return { hs, port };
  }

  /** Run a short command (migrate, enqueue, prune) to its end; returns its exit code (null: killed). */
  async command(
    argv: string[],
    o: StartOptions = {},
  ): Promise<{ code: number | null; signal: string | null; stderr: string }> {
    const { hs } = await this.start(argv, o);
    const code = await within(hs.exited, 15_000, `hookspool ${argv[0]} to exit`);
    const signal = hs.proc.signalCode;
    return { code, signal: signal === null ? null : String(signal), stderr: hs.stderr() };
  }

  /** Send a signed webhook; a killed intake shows as a dropped connection. */
  async send(port: number, h: Hook): Promise<Answer> {
    const headers: Record<string, string> = {
      "Content-Type": "application/json",
      "X-Sig": `sha256=${createHmac("sha256", IN_SECRET).update(h.body).digest("hex")}`,
    };
    if (h.dedupId) headers["X-Id"] = h.dedupId;
    try {
      const res = await fetch(`http://127.0.0.1:${port}/hooks/${h.source}`, { method: "POST", body: h.body, headers });
      return { status: res.status, body: await res.text() };
    } catch (e) {
      return { dropped: (e as Error).message || String(e) };
    }
  }

  /** Wait for the process to kill itself at `point` (the armed hook is the only SIGKILL). */
  async killedAt(hs: Hookspool, point: CrashPoint): Promise<void> {
    await within(hs.exited, 15_000, `hookspool to be killed at ${point}`);
    if (hs.proc.signalCode !== "SIGKILL") {
      throw new Error(
        `hookspool should have died of SIGKILL at ${point}; it exited ` +
          `with ${hs.proc.exitCode ?? hs.proc.signalCode}: ${hs.stderr().slice(-400)}`,
      );
    }
  }

  /** The spool, read from this (test) process; one connection per scene. */
  get db(): Database {
    if (!this.spool) this.spool = openSpool(this.dbPath);
    return this.spool.db;
  }

  /** The spool, for store operations that take one. */
  get store(): SqliteSpool {
    if (!this.spool) this.spool = openSpool(this.dbPath);
    return this.spool;
  }

  /** Close our connection (before copying files or handing the database to a new writer). */
  closeDb(): void {
    this.spool?.close();
    this.spool = null;
  }

  count(sql: string, ...params: (string | number)[]): number {
    return (this.db.query(`SELECT COUNT(*) AS n FROM ${sql}`).get(...params) as { n: number }).n;
  }

  /** Wait until every batch (quarantine aside) is finished, naming the ones that are not. */
  async settled(ms = 10_000): Promise<void> {
    try {
      await waitFor(
        "every batch delivered or dead",
        () => this.count("batches WHERE state NOT IN ('delivered', 'dead', 'dropped')") === 0,
        ms,
      );
    } catch {
      const left = this.db
        .query(
          "SELECT id, state, destination, last_error FROM batches WHERE state NOT IN ('delivered', 'dead', 'dropped')",
        )
        .all();
      throw new Error(`batches never finished: ${JSON.stringify(left)}`);
    }
  }

  /** Documents the script destination was given, oldest first. */
  scriptRuns(): { env_delivery_id: string; doc: Doc }[] {
    const dir = join(this.home, "runs");
    return readdirSync(dir)
      .sort()
      .map((f) => JSON.parse(readFileSync(join(dir, f), "utf8")));
  }

  /** Kill whatever is still running and free the port; safe after any failure. */
  async close(): Promise<void> {
    this.closeDb();
    for (const hs of this.procs) hs.kill("SIGKILL");
    await Promise.allSettled(this.procs.map((hs) => hs.exited));
    this.receiver.stop();
    if (this.receiver.unverified.length)
      throw new Error(`deliveries failed the signature check: ${this.receiver.unverified.join("; ")}`);
    for (const hs of this.procs) {
      if (hs.stderr().includes(IN_SECRET) || hs.stderr().includes("crash-outbound-secret"))
        throw new Error("a hookspool log line carries a secret");
    }
  }
}

/** Run `body` with a fresh scene, torn down whatever happens. */
export async function scene(runtime: Runtime, body: (s: Scene) => Promise<void>): Promise<void> {
  const s = new Scene(runtime);
  try {
    await body(s);
  } finally {
    await s.close();
  }
}

/** One crash test: what it shows, and the case itself on a fresh scene. */
export interface CrashCase {
  name: string;
  run(s: Scene): Promise<void>;
}
