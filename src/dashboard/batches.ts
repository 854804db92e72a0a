// The batches: the list with the filters of `list` (state, dead reason, source, destination,
// key, status code, time range, conditions on the payloads), paged by id; one batch with its
// events and routing trace and its attempts as a timeline; its payloads only on an explicit
// click, behind a warning.
import { HookspoolError } from "../errors.ts";
import type { BatchRow, ListFilter } from "../store/batches.ts";
import { parseWheres, WHERE_GRAMMAR } from "../store/where.ts";
import { leaseConsumer } from "../store/pull.ts";
import { parseSince } from "../time.ts";
import { action, h, page, type PageContext, stateClass, table, when } from "./html.ts";

export const PAGE_SIZE = 50;

const TEXT_FILTERS = ["state", "reason", "source", "destination", "key"] as const;

/** The list's filter from the query string; a bad value is a one-line message on the page. */
function filterOf(q: URLSearchParams, now: number): { f: ListFilter; problem: string | null } {
  const f: ListFilter = {};
  try {
    for (const k of TEXT_FILTERS) {
      const v = q.get(k);
      if (v) (f as Record<string, unknown>)[k] = v;
    }
    const status = q.get("status");
    if (status) {
      if (!/^\d{1,3}$/.test(status))
        throw new HookspoolError("E_USAGE", "status: expected an HTTP status or exit code");
      f.status = Number(status);
    }
    const since = q.get("since");
    const until = q.get("until");
    if (since) f.since = parseSince(since, now, "since");
    if (until) f.until = parseSince(until, now, "until");
    const before = q.get("before");
    if (before && /^\d+$/.test(before)) f.before = Number(before);
    const where = wheresOf(q);
    if (where.length) f.where = parseWheres(where, "where");
    return { f, problem: null };
  } catch (e) {
    return { f: {}, problem: e instanceof HookspoolError ? e.message : "a filter could not be read" };
  }
}

/** The query's where conditions, empty fields left out (the form always has one more, empty). */
const wheresOf = (q: URLSearchParams) => q.getAll("where").filter((w) => w.trim() !== "");

const STATES = ["", "open", "sealed", "leased", "retry", "awaiting", "delivered", "dead", "dropped"];

export async function batchesPage(c: PageContext, q: URLSearchParams): Promise<string> {
  const { f, problem } = filterOf(q, c.now);
  const rows = problem ? [] : await c.store.listBatches({ ...f, limit: PAGE_SIZE });
  const input = (k: string, label: string, size = 10) =>
    `<label>${h(label)} <input name="${h(k)}" value="${h(q.get(k) ?? "")}" size="${size}"></label> `;
  const options = STATES.map(
    (s) => `<option value="${h(s)}"${q.get("state") === s ? " selected" : ""}>${h(s || "any")}</option>`,
  );
  const state = `<label>state <select name="state">${options.join("")}</select></label> `;
  const inputs =
    input("reason", "dead reason") +
    input("source", "source") +
    input("destination", "destination") +
    input("key", "key") +
    input("status", "status", 4) +
    input("since", "since", 8) +
    input("until", "until", 8);
  // One field per condition given, and an empty one for the next; a batch has an event matching them all.
  const wheres = [...wheresOf(q), ""]
    .map((w) => `<label>payload <input name="where" value="${h(w)}" size="28"></label> `)
    .join("");
  const form =
    `<form method="get" action="/batches" aria-label="filter batches">${state}${inputs}${wheres}` +
    `<button type="submit">filter</button> <a href="/batches">clear</a></form>` +
    `<p class="muted">since and until: an age (30m, 24h, 7d), an ISO date or Unix seconds, ` +
    "on the batch's last event. payload: a condition on a stored event's payload " +
    `(${h(WHERE_GRAMMAR)}); a batch is listed when one of its events matches every one.</p>`;
  const list = table(
    ["batch", "state", "source", "key", "destination", "events", "last event", "why"],
    rows.map((b) => [
      `<a href="/batches/${h(b.id)}">${h(b.id)}</a>`,
      `<span class="${stateClass(b.state)}">${h(b.state)}</span>`,
      h(b.source),
      h(b.key),
      h(b.destination),
      h(b.count),
      when(b.last_at),
      h((b.state === "dead" ? b.dead_reason : null) ?? b.last_class ?? ""),
    ]),
  );
  let older = "";
  if (rows.length === PAGE_SIZE) {
    const p = new URLSearchParams(q);
    p.set("before", String(rows[rows.length - 1].id));
    older = `<p><a href="/batches?${h(p.toString())}" rel="next">older batches</a></p>`;
  }
  return page("Batches", `${form}${problem ? `<p class="bad" role="alert">${h(problem)}</p>` : ""}${list}${older}`);
}

function facts(b: BatchRow): string {
  return table(
    ["state", "source", "route", "key", "destination", "window", "first event", "last event", "sealed", "content"],
    [
      [
        `<span class="${stateClass(b.state)}" id="batch-state">${h(b.state)}</span>` +
          (b.dead_reason ? ` (${h(b.dead_reason)})` : "") +
          (leaseConsumer(b.lease_owner) !== null ? ` held by <b>${h(leaseConsumer(b.lease_owner))}</b>` : ""),
        h(b.source),
        h(b.route),
        h(b.key),
        h(b.destination),
        h(`quiet ${b.quiet_s} s, max ${b.max_s} s`),
        when(b.first_at),
        when(b.last_at),
        when(b.sealed_at),
        `<code>${h(b.content_hash?.slice(0, 19) ?? "-")}</code>`,
      ],
    ],
  );
}

/** The trace's short reading: the stage, the route or reason, the rule, what matched, the window's origin. */
function why(t: Record<string, unknown> | null): string {
  if (!t) return "-";
  const parts = [String(t.stage ?? "")];
  if (t.route ?? t.reason) parts.push(String(t.route ?? t.reason));
  if (typeof t.rule_index === "number") parts.push(`rule ${t.rule_index + 1}`);
  if (t.matched && typeof t.matched === "object" && Object.keys(t.matched).length)
    parts.push(`matched ${Object.keys(t.matched).join(", ")}`);
  const w = t.window as Record<string, unknown> | undefined;
  if (w && typeof w === "object") parts.push(`window from ${w.from}`);
  return h(parts.join(" · "));
}

export async function batchPage(c: PageContext, id: number): Promise<string | null> {
  const b = await c.store.getBatch(id);
  if (!b) return null;
  const [evs, attempts] = await Promise.all([c.store.batchEvents(id), c.store.batchAttempts(id)]);
  const events = table(
    ["event", "type", "received", "bytes", "dedup id", "why here"],
    evs.map((e) => [
      h(e.id),
      h(e.event_type || "-"),
      when(e.received_at),
      h(e.size),
      h(e.dedup_id ?? "-"),
      why(e.trace as Record<string, unknown> | null),
    ]),
  );
  const next =
    b.next_attempt_at && b.state === "retry" ? `<li class="warn">next attempt ${when(b.next_attempt_at)}</li>` : "";
  const timeline = attempts.length
    ? `<ol class="timeline" aria-label="attempts">${attempts
        .map((a) => {
          const outcome = a.outcome ?? "running";
          const parts = [
            `attempt ${a.n}`,
            when(a.started_at),
            a.status === null ? null : `status ${a.status}`,
            a.klass,
            a.duration_ms === null ? null : `${a.duration_ms} ms`,
            a.probe ? "probe" : null,
          ].filter((x) => x !== null);
          const error = a.error ? `<br><span class="muted">${h(a.error)}</span>` : "";
          const delivery = a.delivery_id ? `<br><code>${h(a.delivery_id)}</code>` : "";
          return (
            `<li data-outcome="${h(outcome)}">` +
            `<span class="${stateClass(outcome === "ok" ? "delivered" : outcome)}">${h(outcome)}</span> ` +
            `${h(parts.join(" · "))}${error}${delivery}</li>`
          );
        })
        .join("")}${next}</ol>`
    : `<p class="muted">no attempt yet</p>`;
  const acts =
    b.state === "dead" && b.destination !== "quarantine"
      ? action(c, "/actions/replay", "replay", { batch: id })
      : b.state === "retry"
        ? action(c, "/actions/retry", "retry now", { batch: id })
        : "";
  const quarantine =
    b.destination === "quarantine"
      ? `<p class="muted">A quarantined request is replayed with <code>hookspool replay ${h(id)}</code>, ` +
        "which runs its source plugin again.</p>"
      : "";
  return page(
    `Batch ${id}`,
    `${facts(b)}${b.last_error ? `<p>last error: ${h(b.last_error)}</p>` : ""}${acts}${quarantine}` +
      `<h2>Events</h2>${events}` +
      `<p><a href="/batches/${h(id)}/payloads">show the payloads…</a> ` +
      `<span class="muted">(they may hold secrets or personal data)</span></p>` +
      `<h2>Attempts</h2>${timeline}`,
  );
}

/** The payloads, reached only by the batch page's explicit link; the warning comes first. */
export async function payloadsPage(c: PageContext, id: number): Promise<string | null> {
  const b = await c.store.getBatch(id);
  if (!b) return null;
  const items = (await c.store.batchPayloads(id)).map((p) => {
    const body = p.payload ?? (p.raw ? `(${p.raw.byteLength} raw bytes, not shown)` : "(none stored)");
    const headers =
      p.headers && p.headers !== "{}" ? `<p class="muted">kept headers</p><pre>${h(p.headers)}</pre>` : "";
    return `<h2>Event ${h(p.id)}</h2><pre>${h(body)}</pre>${headers}`;
  });
  return page(
    `Batch ${id}: payloads`,
    `<p class="warn" role="alert">warning: payloads may hold secrets or personal data</p>` +
      `<p><a href="/batches/${h(id)}">back to the batch</a></p>` +
      (items.join("") || `<p class="muted">no events</p>`),
  );
}
