// What only the intake process knows (requests refused before anything was stored, and how long
// its 2xx answers took), read from its own /metrics over loopback or its unix socket. Counters
// since the intake started; null when no intake answers (the page says so).
import { readListen } from "../config/listen.ts";
import { ACK_BUCKETS_S } from "../intake/metrics.ts";

export interface IntakeView {
  /** Per source, per reason (unverified, too_large, chunked, spool_full, busy, ignored, verify_error). */
  refused: Record<string, Record<string, number>>;
  received: Record<string, number>;
  /** Ack latency upper bounds from the histogram, in seconds (null: no 2xx yet). */
  ack: { count: number; p50: number | null; p99: number | null };
  /** The histogram itself: cumulative counts per upper bound (the last is +Inf), ascending. */
  ackBuckets: { le: number; n: number }[];
  /** When the intake began counting (Unix seconds), or null when it does not say. */
  startedAt: number | null;
}

/** The p-quantile's upper bound of a cumulative histogram (the largest finite bound for +Inf). */
export function quantileOf(buckets: readonly { le: number; n: number }[], q: number): number | null {
  const total = buckets.length ? buckets[buckets.length - 1].n : 0;
  if (total <= 0) return null;
  const b = buckets.find((x) => x.n >= q * total);
  return b === undefined ? null : Number.isFinite(b.le) ? b.le : ACK_BUCKETS_S[ACK_BUCKETS_S.length - 1];
}

const SAMPLE = /^([a-z_]+)(?:\{(.*)\})? ([0-9.eE+-]+|NaN|\+Inf)$/;
const LABEL = /([a-z_]+)="((?:[^"\\]|\\.)*)"/g;

/**
 * A label value as the exposition format escapes it, read back: backslash-n is a line feed, and a
 * backslash before any other character (a backslash, a double quote) stands for that character.
 * Named apart from the global `unescape` (a URL-era decoder of %XX, wrong for this text); it reads
 * whole code points (the `u` flag), so text beyond ASCII comes back as it was written.
 */
export function unescapeLabelValue(v: string): string {
  return v.replace(/\\(.)/gsu, (_, c: string) => (c === "n" ? "\n" : c));
}

/** Parse the Prometheus text the intake serves into the figures the dashboard shows. */
export function parseIntakeMetrics(text: string): IntakeView {
  const view: IntakeView = {
    refused: {},
    received: {},
    ack: { count: 0, p50: null, p99: null },
    ackBuckets: [],
    startedAt: null,
  };
  const buckets: { le: number; n: number }[] = [];
  for (const line of text.split("\n")) {
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]] = unescapeLabelValue(l[2]);
    const value = Number(m[3]);
    if (m[1] === "hookspool_requests_rejected_total" && labels.source && labels.reason)
      (view.refused[labels.source] ??= {})[labels.reason] = value;
    else if (m[1] === "hookspool_events_received_total" && labels.source) view.received[labels.source] = value;
    else if (m[1] === "process_start_time_seconds" && Number.isFinite(value)) view.startedAt = value;
    else if (m[1] === "hookspool_ack_seconds_bucket" && labels.le)
      buckets.push({ le: labels.le === "+Inf" ? Number.POSITIVE_INFINITY : Number(labels.le), n: value });
  }
  buckets.sort((a, b) => a.le - b.le);
  const total = buckets.length ? buckets[buckets.length - 1].n : 0;
  view.ack = { count: total, p50: quantileOf(buckets, 0.5), p99: quantileOf(buckets, 0.99) };
  view.ackBuckets = buckets;
  return view;
}

/** The intake's figures, or null when it does not answer within a second. */
export async function readIntakeView(listen: string): Promise<IntakeView | null> {
  try {
    const l = readListen(listen);
    const res =
      "unix" in l
        ? await fetch("http://intake/metrics", { unix: l.unix, signal: AbortSignal.timeout(1000) })
        : await fetch(`http://${l.hostname.includes(":") ? `[${l.hostname}]` : l.hostname}:${l.port}/metrics`, {
            signal: AbortSignal.timeout(1000),
          });
    if (!res.ok) return null;
    return parseIntakeMetrics(await res.text());
  } catch {
    return null;
  }
}

/** One reading of the intake's ack histogram, as the dashboard samples it once a minute. */
export interface AckSample {
  at: number;
  buckets: { le: number; n: number }[];
}

/**
 * The readings the charts are drawn from: the dashboard's samples, a reading of zero at the
 * intake's start, and the reading the page was made with. So the charts and the health line read
 * one histogram: every answer the health line counts since the intake started is in a bucket of
 * the charts (when the start is inside them), the ones before the first minute's sample too.
 */
export function ackReadings(samples: readonly AckSample[], intake: IntakeView | null, now: number): AckSample[] {
  const out = [...samples];
  if (!intake || intake.ackBuckets.length === 0) return out;
  if (intake.startedAt !== null && intake.startedAt <= now) {
    const zero = { at: intake.startedAt, buckets: intake.ackBuckets.map((b) => ({ le: b.le, n: 0 })) };
    const at = out.findIndex((s) => s.at > zero.at);
    out.splice(at < 0 ? out.length : at, 0, zero);
  }
  if (out.length === 0 || out[out.length - 1].at <= now) out.push({ at: now, buckets: intake.ackBuckets });
  return out;
}

/**
 * Ack latency p50 and p99 per time bucket, from the dashboard's own samples of the intake's histogram: each bucket's
 * answers are the difference between the last reading in it and the last one before it, or its own first reading at the
 * chart's start (an intake restart, whose counts start again, leaves that bucket empty).
 */
export function ackSeries(
  samples: readonly AckSample[],
  since: number,
  bucketS: number,
  count: number,
): { p50: (number | null)[]; p99: (number | null)[] } {
  const p50: (number | null)[] = new Array(count).fill(null);
  const p99: (number | null)[] = new Array(count).fill(null);
  let before: AckSample | null = null;
  let j = 0;
  while (j < samples.length && samples[j].at < since) before = samples[j++];
  for (let i = 0; i < count; i++) {
    const end = since + (i + 1) * bucketS;
    let last: AckSample | null = null;
    // With no reading before the chart begins, the bucket's first reading is where it starts.
    if (!before && j < samples.length && samples[j].at < end) before = samples[j++];
    while (j < samples.length && samples[j].at < end) last = samples[j++];
    if (last && before && last.buckets.length === before.buckets.length) {
      const prev = before.buckets;
      const delta = last.buckets.map((b, k) => ({ le: b.le, n: b.n - prev[k].n }));
      if (delta.every((d) => d.n >= 0)) {
        p50[i] = quantileOf(delta, 0.5);
        p99[i] = quantileOf(delta, 0.99);
      }
    }
    if (last) before = last;
  }
  return { p50, p99 };
}
