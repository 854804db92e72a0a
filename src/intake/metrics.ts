// The intake's counters: per process, in memory, reset on restart (rate() copes).
import { renderDispatchCounters } from "../obs/counters.ts";
import { faultCounts } from "../obs/faults.ts";

export type RejectReason = "unverified" | "too_large" | "chunked" | "spool_full" | "busy" | "ignored" | "verify_error";

function esc(v: string): string {
  return v.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}

export class IntakeMetrics {
  private received = new Map<string, number>();
  private duplicate = new Map<string, number>();
  private quarantined = new Map<string, number>();
  private rejected = new Map<string, number>();

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

  /** Prometheus text for the counters. */
  render(): string {
    const out: string[] = [];
    const family = (name: string, help: string, m: Map<string, number>, labels: (k: string) => string) => {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const [k, v] of [...m.entries()].sort()) out.push(`${name}{${labels(k)}} ${v}`);
    };
    const bySource = (k: string) => `source="${esc(k)}"`;
    family("hookspool_events_received_total", "Requests accepted and queued, per source.", this.received, bySource);
    family("hookspool_events_duplicate_total", "Requests answered duplicate or replayed, per source.", this.duplicate, bySource);
    family("hookspool_events_quarantined_total", "Verified requests quarantined by a plugin error, per source.", this.quarantined, bySource);
    family("hookspool_requests_rejected_total", "Requests refused or ignored, per source and reason.", this.rejected, (k) => {
      const [source, reason] = k.split("\u0000");
      return `source="${esc(source)}",reason="${esc(reason)}"`;
    });
    // Failures this process caught and survived (a refused write, a chore that threw); under
    // `run` that includes the dispatcher's.
    const faults = faultCounts();
    const byClass = (k: string) => {
      const [component, klass] = k.split("\u0000");
      return `component="${esc(component)}",class="${esc(klass)}"`;
    };
    const sum = (list: typeof faults) => {
      const m = new Map<string, number>();
      for (const f of list) m.set(`${f.component}\u0000${f.klass}`, (m.get(`${f.component}\u0000${f.klass}`) ?? 0) + f.n);
      return m;
    };
    family("hookspool_caught_errors_total", "Failures caught and survived, per component and class.", sum(faults), byClass);
    // The bugs among them: each also opened an internal issue that says where.
    family("hookspool_bugs_total", "Bugs in hookspool caught and survived, per component and class (each opens an internal issue).", sum(faults.filter((f) => f.bug)), byClass);
    return `${out.join("\n")}\n${renderDispatchCounters()}`;
  }
}
