// The overview: the /healthz verdict with its reasons, each destination's gate, the batch
// counts, the spool and its disk, charts of the last hour and day, and the last actions.
import type { Buckets } from "../store/charts.ts";
import type { StatusDoc } from "../obs/status.ts";
import { dashboardStatus } from "./status.ts";
import { ackReadings, ackSeries } from "./intake-view.ts";
import { action, h, jsonBlock, page, type PageContext, stateClass, table, when } from "./html.ts";

interface Chart {
  title: string;
  unit: string;
  x: number[];
  names: string[];
  values: (number | null)[][];
}

const SPANS = [
  { id: "hour", label: "last hour", bucketS: 60, count: 60 },
  { id: "day", label: "last day", bucketS: 900, count: 96 },
] as const;

async function chartsOf(c: PageContext): Promise<Record<string, Chart>> {
  const out: Record<string, Chart> = {};
  for (const s of SPANS) {
    const end = Math.floor(c.now / s.bucketS) * s.bucketS + s.bucketS;
    const b: Buckets = { since: end - s.bucketS * s.count, bucketS: s.bucketS, count: s.count };
    const x = Array.from({ length: b.count }, (_, i) => b.since + i * b.bucketS);
    const [events, outcomes, latency] = await Promise.all([
      c.store.eventsBySource(b),
      c.store.attemptsByOutcome(b),
      c.store.readyToOkLatency(b),
    ]);
    out[`events-${s.id}`] = {
      title: `events received by source, ${s.label}`,
      unit: `per ${s.bucketS / 60} min`,
      x,
      names: Object.keys(events),
      values: Object.values(events),
    };
    out[`attempts-${s.id}`] = {
      title: `deliveries by outcome, ${s.label}`,
      unit: `per ${s.bucketS / 60} min`,
      x,
      names: Object.keys(outcomes),
      values: Object.values(outcomes),
    };
    out[`latency-${s.id}`] = {
      title: `readiness to 2xx, ${s.label}`,
      unit: "seconds",
      x,
      names: ["p50", "p99"],
      values: [latency.p50, latency.p99],
    };
    const ack = ackSeries(ackReadings(c.ackSamples ?? [], c.intake ?? null, c.now), b.since, b.bucketS, b.count);
    out[`ack-${s.id}`] = {
      title: `ack latency (upper bound), ${s.label}`,
      unit: "seconds",
      x,
      names: ["p50", "p99"],
      values: [ack.p50, ack.p99],
    };
  }
  return out;
}

/** A chart's figure: drawn by the page script; its caption says the totals, so it reads without it. */
function figure(id: string, ch: Chart): string {
  const totals =
    ch.unit === "seconds"
      ? ch.values.map((v, i) => `${ch.names[i]} ${worst(v)}`).join(", ")
      : ch.names.length
        ? ch.names.map((n, i) => `${n} ${ch.values[i].reduce<number>((a, x) => a + (x ?? 0), 0)}`).join(", ")
        : "nothing";
  return (
    `<figure data-chart="${h(id)}"><figcaption>${h(ch.title)}</figcaption>` +
    `<div class="plot" role="img" aria-label="${h(`${ch.title}: ${totals}`)}">` +
    `</div><p class="muted">${h(totals)}</p></figure>`
  );
}

function worst(v: (number | null)[]): string {
  const xs = v.filter((x): x is number => x !== null);
  if (!xs.length) return "no figures";
  const top = Math.max(...xs);
  return top < 1 ? `up to ${Math.round(top * 1000 * 10) / 10} ms` : `up to ${top.toFixed(2)} s`;
}

function ms(s: number | null): string {
  return s === null ? "-" : `≤ ${s * 1000 >= 1 ? Math.round(s * 1000) : (s * 1000).toFixed(1)} ms`;
}

/** Pull destinations' consumers: each one's last lease and the batches it holds leased now ("" without a pull). */
function pullTable(destinations: StatusDoc["destinations"]): string {
  const rows = Object.entries(destinations)
    .filter(([, d]) => d.type === "pull")
    .flatMap(([name, d]) =>
      d.consumers?.length
        ? d.consumers.map((c) => [
            h(name),
            `<span data-consumer="${h(`${name} ${c.name}`)}">${h(c.name)}</span>`,
            c.last_lease_at === null
              ? "-"
              : `${when(c.last_lease_at)} <span class="muted">${h(Math.round(c.last_lease_age_s ?? 0))} s ago</span>`,
            h(c.leased),
          ])
        : [[h(name), `<span class="muted">none has leased yet</span>`, "-", "0"]],
    );
  return rows.length
    ? `<h3>Pull destinations</h3>${table(["pull destination", "consumer", "last lease", "leased now"], rows)}`
    : "";
}

export async function overviewPage(c: PageContext): Promise<string> {
  const { doc, facts } = await dashboardStatus(c.store, c.config, c.dbPath, c.now);
  const health = doc.ok
    ? `<p class="ok" id="health">ok: nothing degraded</p>`
    : `<p class="bad" id="health">${h(doc.degraded.length)} problem(s)</p>` +
      `<ul>${doc.degraded.map((d) => `<li>${h(d)}</li>`).join("")}</ul>`;
  // The gates as the status read them (one read of the destinations' rows).
  const gates = new Map(facts.destinationRows.map((r) => [r.name, r]));
  const ready = await c.store.readyCounts(c.now);
  const dests = table(
    ["destination", "gate", "in flight", "window", "ready", "oldest pending", "last error", ""],
    Object.entries(doc.destinations).map(([name, d]) => {
      const g = gates.get(name);
      const left =
        g?.state === "open" && g.opened_at !== null && g.cooldown_s !== null
          ? Math.max(0, g.opened_at + g.cooldown_s - c.now)
          : null;
      const held =
        d.gated_for_s !== undefined
          ? ` <span class="muted">${d.throttled ? "429" : "Retry-After"} ` +
            `gate ${h(Math.round(d.gated_for_s))} s left</span>`
          : d.throttled
            ? ` <span class="muted">probing after a 429</span>`
            : "";
      const cooldown = left !== null ? ` <span class="muted">cooldown ${h(Math.round(left))} s left</span>` : "";
      const probeId = g?.state === "half_open" ? g.last_probe_batch_id : null;
      const probe = probeId
        ? ` <span class="muted">probe <a href="/batches/${h(probeId)}">${h(probeId)}</a></span>`
        : "";
      const gate =
        `<span class="${stateClass(d.state)}" data-gate="${h(name)}">${h(d.state.replace("_", "-"))}</span>` +
        `${cooldown}${probe}${held}`;
      // A paced destination's window: used of allowed, and when a full one has room again.
      const nextFree = d.rate?.next_free_in_s ?? null;
      const window = d.rate
        ? `<span data-window="${h(name)}" title="${h(d.rate.from)}">` +
          `${h(d.rate.used)} / ${h(d.rate.limit)} per ${h(d.rate.window_s)} s</span>` +
          (nextFree !== null ? ` <span class="muted">next in ${h(Math.ceil(nextFree))} s</span>` : "")
        : "-";
      // A run budget: batches delivered in its window of the limit, held when spent.
      const spend = [
        d.budget
          ? `budget ${h(d.budget.used)} / ${h(d.budget.limit)} per ${h(d.budget.window_s)} s` +
            (d.budget.next_free_at !== null ? " (held)" : "")
          : "",
        d.key_budget ? `key budget ${h(d.key_budget.limit)} per ${h(d.key_budget.window_s)} s` : "",
      ].filter(Boolean);
      const budget = spend.length ? `<br><span data-budget="${h(name)}">${spend.join("; ")}</span>` : "";
      const pause =
        d.state === "paused"
          ? action(c, "/actions/resume", "resume", { destination: name })
          : action(c, "/actions/pause", "pause", { destination: name });
      return [
        h(name),
        gate,
        h(d.inflight ?? 0),
        window + budget,
        h(ready.get(name) ?? 0),
        d.oldest_pending_age_s == null ? "-" : `${h(Math.round(d.oldest_pending_age_s))} s`,
        h(d.last_error ?? ""),
        pause,
      ];
    }),
  );
  const pulls = pullTable(doc.destinations);
  const b = doc.batches;
  const counts = table(
    ["open", "sealed", "leased", "retry", "awaiting", "delivered", "dead", "dropped", "quarantined"],
    [[b.open, b.sealed, b.leased, b.retry, b.awaiting, b.delivered, b.dead, b.dropped, b.quarantined].map((n) => h(n))],
  );
  const dead = Object.entries(doc.dead_by_reason).filter(([, n]) => n > 0);
  const deadLinks = dead.map(
    ([r, n]) => `<a href="/batches?state=dead&amp;reason=${h(encodeURIComponent(r))}">${h(n)} ${h(r)}</a>`,
  );
  const deadLine = dead.length ? `<p>dead by reason: ${deadLinks.join(", ")}</p>` : "";
  const disk =
    doc.disk_free_bytes == null ? "free disk unknown" : `${h(Math.round(doc.disk_free_bytes / 1024 ** 2))} MiB free`;
  const alive = doc.dispatcher.alive ? `<span class="ok">alive</span>` : `<span class="bad">not running</span>`;
  const spool =
    `<p>schema ${h(doc.schema)}, spool ${h(Math.round(doc.spool_bytes / 1024))} KiB, ${disk}; ` +
    `dispatcher ${alive}; <a href="/issues">${h(doc.issues_open)} open issue(s)</a></p>`;
  const ack = c.intake
    ? `<p>ack latency since the intake started: p50 ${h(ms(c.intake.ack.p50))}, ` +
      `p99 ${h(ms(c.intake.ack.p99))} over ${h(c.intake.ack.count)} answer(s)</p>`
    : `<p class="muted">ack latency: no intake answered on ${h(c.config.intake.listen)}</p>`;
  const charts = await chartsOf(c);
  const figures = SPANS.map((s) => {
    const row = ["events", "attempts", "latency", "ack"].map((k) => figure(`${k}-${s.id}`, charts[`${k}-${s.id}`]));
    return `<h3>${h(s.label)}</h3><div class="charts">${row.join("")}</div>`;
  }).join("");
  const acts = await c.store.recentActions(10);
  const actions = acts.length
    ? `<h2>Recent actions</h2>${table(
        ["at", "via", "action", "target"],
        acts.map((a) => [when(a.at), h(a.via), h(a.verb), h(a.target)]),
      )}`
    : "";
  return page(
    "Overview",
    `<h2>Health</h2>${health}${spool}${ack}<h2>Destinations</h2>${dests}${pulls}` +
      `<h2>Batches</h2>${counts}${deadLine}` +
      `<h2>Traffic</h2>${figures}${jsonBlock("chart-data", charts)}${actions}`,
  );
}
