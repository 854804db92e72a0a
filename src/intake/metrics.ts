// The intake's counters: per process, in memory, reset on restart (rate() copes).
import { renderDispatchCounters } from "../obs/counters.ts";
import { faultCounts } from "../obs/faults.ts";

export type RejectReason =
  | "unverified"
  | "too_large"
  | "chunked"
  | "bad_length"
  | "spool_full"
  | "busy"
  | "ignored"
  | "verify_error";

function esc(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

/** The ack latency histogram's upper bounds, in seconds (Prometheus `le`). */
export const ACK_BUCKETS_S = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] as const;

export class IntakeMetrics {
  /** @param startedAt when this process began counting (Unix seconds): every counter is since then. */
  constructor(private readonly startedAt: number | null = null) {}

  /** Per bucket (and one for +Inf), the 2xx answers that took at most that long. Not cumulative here. */
  private ack = new Array<number>(ACK_BUCKETS_S.length + 1).fill(0);
  private ackSum = 0;
  private received = new Map<string, number>();
  private duplicate = new Map<string, number>();
  private quarantined = new Map<string, number>();
  private rejected = new Map<string, number>();
  private verified = new Map<string, number>();

  private bump(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  received1(source: string): void {
    this.bump(this.received, source);
  }
  duplicate1(source: string): void {
    this.bump(this.duplicate, source);
  }
  quarantined1(source: string): void {
    this.bump(this.quarantined, source);
  }
  rejected1(source: string, reason: RejectReason): void {
    this.bump(this.rejected, `${source}\u0000${reason}`);
  }

  /** A request verified with the secret at `position` of its source's rotation (0: the newest). */
  verified1(source: string, position: number): void {
    this.bump(this.verified, `${source}\u0000${position}`);
  }

  /** A 2xx answered `seconds` after the request arrived (the body read, verified and committed). */
  acked(seconds: number): void {
    let i = 0;
    while (i < ACK_BUCKETS_S.length && seconds > ACK_BUCKETS_S[i]) i++;
    this.ack[i]++;
    this.ackSum += seconds;
  }

  /** Prometheus text for the counters. */
  render(): string {
    const out: string[] = [];
    const family = (name: string, help: string, m: Map<string, number>, labels: (k: string) => string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [k, v] of [...m.entries()].sort()) out.push(`${name}{${labels(k)}} ${v}`);
    };
    const bySource = (k: string) => `source="${esc(k)}"`;
    family("hookspool_events_received_total", "Requests accepted and queued, per source.", this.received, bySource);
    family(
      "hookspool_events_duplicate_total",
      "Requests answered duplicate or replayed, per source.",
      this.duplicate,
      bySource,
    );
    family(
      "hookspool_events_quarantined_total",
      "Verified requests quarantined by a plugin error, per source.",
      this.quarantined,
      bySource,
    );
    family(
      "hookspool_requests_rejected_total",
      "Requests refused or ignored, per source and reason.",
      this.rejected,
      (k) => {
        const [source, reason] = k.split("\u0000");
        return `source="${esc(source)}",reason="${esc(reason)}"`;
      },
    );
    family(
      "hookspool_verified_total",
      "Requests verified, per source and the position of the secret that verified them (0: the newest).",
      this.verified,
      (k) => {
        const [source, position] = k.split("\u0000");
        return `source="${esc(source)}",secret="${esc(position)}"`;
      },
    );
    if (this.startedAt !== null)
      out.push(
        "# HELP process_start_time_seconds When this process started counting (Unix seconds).",
        "# TYPE process_start_time_seconds gauge",
        `process_start_time_seconds ${this.startedAt}`,
      );
    out.push(
      "# HELP hookspool_ack_seconds Time from a request's arrival to its 2xx (committed first).",
      "# TYPE hookspool_ack_seconds histogram",
    );
    let cumulative = 0;
    ACK_BUCKETS_S.forEach((le, i) => {
      cumulative += this.ack[i];
      out.push(`hookspool_ack_seconds_bucket{le="${le}"} ${cumulative}`);
    });
    cumulative += this.ack[ACK_BUCKETS_S.length];
    out.push(
      `hookspool_ack_seconds_bucket{le="+Inf"} ${cumulative}`,
      `hookspool_ack_seconds_sum ${this.ackSum}`,
      `hookspool_ack_seconds_count ${cumulative}`,
    );
    // Failures this process caught and survived (a refused write, a chore that threw); under
    // `run` that includes the dispatcher's.
    const faults = faultCounts();
    const byClass = (k: string) => {
      const [component, klass] = k.split("\u0000");
      return `component="${esc(component)}",class="${esc(klass)}"`;
    };
    const sum = (list: typeof faults) => {
      const m = new Map<string, number>();
      for (const f of list)
        m.set(`${f.component}\u0000${f.klass}`, (m.get(`${f.component}\u0000${f.klass}`) ?? 0) + f.n);
      return m;
    };
    family(
      "hookspool_caught_errors_total",
      "Failures caught and survived, per component and class.",
      sum(faults),
      byClass,
    );
    // The bugs among them: each also opened an internal issue that says where.
    family(
      "hookspool_bugs_total",
      "Bugs in hookspool caught and survived, per component and class (each opens an internal issue).",
      sum(faults.filter((f) => f.bug)),
      byClass,
    );
    return `${out.join("\n")}\n${renderDispatchCounters()}`;
  }
}
