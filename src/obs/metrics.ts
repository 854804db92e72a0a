// GET /metrics and `hookspool metrics`: Prometheus text, no dependency, nothing
// persisted for it. Dispatcher figures are computed from the tables at scrape time and exposed as
// gauges over the retention window, since a counter computed from a pruned table would not be
// monotonic; the intake's own counters are added by the intake.
import type { Config } from "../config/types.ts";
import type { AttemptCountRow, StatusStore } from "../store/api.ts";
import type { StatusDoc } from "./status.ts";
import { storeStatus } from "./store-status.ts";

const STATE_VALUE: Record<string, number> = { closed: 0, half_open: 1, open: 2, paused: 3 };
const DAY = 86400;

function esc(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

class Text {
  readonly lines: string[] = [];
  family(name: string, help: string, samples: [Record<string, string>, number | null][]): void {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [labels, value] of samples) {
      if (value === null || !Number.isFinite(value)) continue;
      const l = Object.entries(labels)
        .map(([k, v]) => `${k}="${esc(v)}"`)
        .join(",");
      this.lines.push(`${name}${l ? `{${l}}` : ""} ${value}`);
    }
  }
}

export interface MetricsInputs {
  now: number;
  inflight?: ReadonlyMap<string, number>;
  diskFree?: number | null;
}

/** What the table-derived metrics are made of, read from one backend. */
export interface MetricsFacts {
  doc: StatusDoc;
  attempts: AttemptCount[];
  delivered: { destination: string; n: number }[];
  /** The caught-failure counters of dispatchers in other processes (already rendered). */
  caught: string[];
}

export type AttemptCount = AttemptCountRow;

/** Counts summed by the labels `key` picks (rows come finer than a family's labels). */
function sumBy(
  rows: readonly AttemptCount[],
  key: (a: AttemptCount) => Record<string, string> | null,
): [Record<string, string>, number][] {
  const sums = new Map<string, [Record<string, string>, number]>();
  for (const a of rows) {
    const labels = key(a);
    if (labels === null) continue;
    const k = JSON.stringify(labels);
    const cur = sums.get(k);
    if (cur) cur[1] += a.n;
    else sums.set(k, [labels, a.n]);
  }
  return [...sums.values()];
}

/**
 * The table-derived metrics, all gauges (the intake's counters are in intake/metrics.ts), on
 * either backend: the status document's figures, attempts, deliveries, and the caught failures
 * of dispatchers in other processes (this process's own are the caller's to render).
 */
export async function renderStoreMetrics(
  store: StatusStore,
  config: Config,
  dbPath: string,
  inp: MetricsInputs,
): Promise<string> {
  const { now } = inp;
  const { doc } = await storeStatus(store, config, dbPath, {
    now,
    inflight: inp.inflight,
    diskFree: inp.diskFree,
    hard: [],
  });
  const [attempts, delivered, caught] = await Promise.all([
    store.attemptCounts(now - 30 * DAY),
    store.deliveredCounts(now - 7 * DAY),
    store.dispatchersCaught(process.pid),
  ]);
  return renderMetrics({ doc, attempts, delivered, caught: caughtFamilies(caught) });
}

/** The metrics from their facts: the same families on either backend. */
export function renderMetrics(f: MetricsFacts): string {
  const { doc, attempts } = f;
  const t = new Text();
  t.family(
    "hookspool_attempts_30d",
    "Attempts started in the last 30 days, per destination, outcome and class.",
    sumBy(attempts, (a) => ({ destination: a.destination, outcome: a.outcome, klass: a.klass })),
  );
  t.family(
    "hookspool_answers_30d",
    "Delivered attempts in the last 30 days per destination and the receiver's own word (Hermes: " +
      "accepted, coalesced, delivered, duplicate, ignored): a route that ignores everything shows here.",
    // A reported outcome's row (class agent) is not the receiver's answer: attempts_30d counts it by class.
    sumBy(attempts, (a) => (a.answer && a.klass !== "agent" ? { destination: a.destination, answer: a.answer } : null)),
  );
  t.family(
    "hookspool_batches_delivered_7d",
    "Batches delivered in the last 7 days, per destination.",
    f.delivered.map((d) => [{ destination: d.destination }, d.n]),
  );
  const perDest = new Map<string, { s: number; n: number }>();
  for (const a of attempts) {
    if (a.outcome === "running") continue;
    const cur = perDest.get(a.destination) ?? { s: 0, n: 0 };
    cur.s += a.duration_ms / 1000;
    cur.n += a.n;
    perDest.set(a.destination, cur);
  }
  t.family(
    "hookspool_attempt_duration_seconds_sum_30d",
    "Total attempt time in the last 30 days, per destination.",
    [...perDest].map(([d, v]) => [{ destination: d }, Math.round(v.s * 1000) / 1000]),
  );
  t.family(
    "hookspool_attempt_duration_seconds_count_30d",
    "Finished attempts in the last 30 days, per destination.",
    [...perDest].map(([d, v]) => [{ destination: d }, v.n]),
  );
  t.family(
    "hookspool_batches",
    "Batches per state (quarantined apart from dead).",
    Object.entries(doc.batches).map(([s, n]) => [{ state: s }, n]),
  );
  t.family(
    "hookspool_dead_batches",
    "Dead batches per reason: rejected is the receiver's refusal, the others the pipeline's faults.",
    Object.entries(doc.dead_by_reason).map(([r, n]) => [{ reason: r }, n]),
  );
  t.family("hookspool_oldest_pending_age_seconds", "Age of the oldest batch still to deliver.", [
    [{}, doc.oldest_pending_age_s ?? 0],
  ]);
  const dests = Object.entries(doc.destinations);
  t.family(
    "hookspool_destination_state",
    "Breaker state: 0 closed, 1 half_open, 2 open, 3 paused.",
    dests.map(([d, s]) => [{ destination: d }, STATE_VALUE[s.state] ?? 0]),
  );
  const paced = dests.flatMap(([d, s]) => (s.rate ? [{ labels: { destination: d }, rate: s.rate }] : []));
  t.family(
    "hookspool_destination_rate_limit",
    "A paced destination's requests allowed per window.",
    paced.map((p) => [p.labels, p.rate.limit]),
  );
  t.family(
    "hookspool_destination_rate_window_seconds",
    "A paced destination's window.",
    paced.map((p) => [p.labels, p.rate.window_s]),
  );
  t.family(
    "hookspool_destination_rate_used",
    "Requests in a paced destination's window now (in flight included).",
    paced.map((p) => [p.labels, p.rate.used]),
  );
  t.family(
    "hookspool_destination_rate_next_free_seconds",
    "Seconds until a full window has room again (0: room now).",
    paced.map((p) => [p.labels, p.rate.next_free_in_s ?? 0]),
  );
  t.family(
    "hookspool_destination_gated_seconds",
    "Seconds left of a Retry-After or 429 gate (0: none).",
    dests.map(([d, s]) => [{ destination: d }, s.gated_for_s ?? 0]),
  );
  t.family(
    "hookspool_destination_oldest_pending_age_seconds",
    "Age of the oldest batch still to deliver, per destination.",
    dests.map(([d, s]) => [{ destination: d }, s.oldest_pending_age_s ?? 0]),
  );
  t.family("hookspool_issues_open", "Open and acked issues.", [[{}, doc.issues_open]]);
  t.family("hookspool_spool_bytes", "Size of the database with its WAL.", [[{}, doc.spool_bytes]]);
  t.family("hookspool_disk_free_bytes", "Free bytes on the spool's filesystem.", [[{}, doc.disk_free_bytes]]);
  t.family("hookspool_dispatcher_heartbeat_age_seconds", "Seconds since the dispatcher's last heartbeat.", [
    [{}, doc.dispatcher.heartbeat_age_s],
  ]);
  t.family(
    "hookspool_source_last_event_age_seconds",
    "Seconds since each source's last event.",
    Object.entries(doc.sources).map(([s, v]) => [{ source: s }, v.last_event_age_s]),
  );
  t.lines.push(...f.caught);
  return `${t.lines.join("\n")}\n`;
}

/**
 * The failures a dispatcher in another process caught and survived since it started, as its
 * last heartbeat recorded them (a counter: it restarts at 0 with the dispatcher). A dispatcher
 * in this process (run) is counted in hookspool_caught_errors_total instead.
 */
/** The counters of the caught failures some dispatchers recorded (JSON lists), summed. */
export function caughtFamilies(recorded: readonly string[]): string[] {
  let counts: { component: string; klass: string; n: number; bug?: boolean }[] = [];
  let read = false;
  for (const text of recorded) {
    try {
      const list = JSON.parse(text);
      if (Array.isArray(list)) {
        counts = counts.concat(list);
        read = true;
      }
    } catch {
      // unreadable: skipped
    }
  }
  if (!read) return [];
  const valid = counts.filter(
    (c) => typeof c?.n === "number" && typeof c.component === "string" && typeof c.klass === "string",
  );
  const family = (name: string, help: string, list: typeof valid) => {
    const sums = new Map<string, number>();
    for (const c of list) {
      const k = `component="${esc(c.component)}",class="${esc(c.klass)}"`;
      sums.set(k, (sums.get(k) ?? 0) + c.n);
    }
    return [`# HELP ${name} ${help}`, `# TYPE ${name} counter`, ...[...sums].map(([k, n]) => `${name}{${k}} ${n}`)];
  };
  return [
    ...family(
      "hookspool_dispatcher_caught_errors_total",
      "Failures the dispatcher caught and survived since it started, per component and class.",
      valid,
    ),
    ...family(
      "hookspool_dispatcher_bugs_total",
      "Bugs the dispatcher caught and survived since it started, " +
        "per component and class (each opens an internal issue).",
      valid.filter((c) => c.bug === true),
    ),
  ];
}
