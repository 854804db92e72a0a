// The sources: each with its scheme, its URL, its last event and silence, whether its sender
// retries, and what was refused or quarantined; the issues with their history; the polls with
// their clock.
import { existsSync } from "node:fs";
import { dashboardStatus } from "./status.ts";
import { armedUntil } from "../intake/learn.ts";
import { action, h, page, type PageContext, stateClass, table, when } from "./html.ts";

const DAY_S = 86_400;

function schemeOf(s: PageContext["config"]["sources"][string], now: number): string {
  if (s.kind === "poll") return "poll";
  const scheme = s.template?.scheme;
  if (typeof scheme !== "string") return s.module ? "code" : "-";
  // A source that learns its secret from a handshake: whether it has one yet, or is armed for it.
  const ref = s.secrets?.secret;
  if (typeof s.template?.learn !== "string" || !ref || !("file" in ref)) return scheme;
  if (existsSync(ref.file)) return `${scheme} (secret learned)`;
  const until = armedUntil(ref.file);
  return until !== null && until >= now
    ? `${scheme} (armed for its handshake)`
    : `${scheme} (no secret yet: hookspool source arm)`;
}

export async function sourcesPage(c: PageContext): Promise<string> {
  const { doc } = await dashboardStatus(c.store, c.config, c.dbPath, c.now);
  const quarantined = new Map<string, string[]>();
  for (const q of await c.store.quarantineReasons(c.now - DAY_S))
    quarantined.set(q.source, [...(quarantined.get(q.source) ?? []), `${q.n} ${q.reason}`]);
  const listen = c.config.intake.listen;
  const base = listen.startsWith("unix:") ? "" : `http://${listen}`;
  const rows = Object.entries(c.config.sources).map(([name, s]) => {
    const st = doc.sources[name];
    const refused = c.intake?.refused[name];
    const refusals =
      c.intake === null || c.intake === undefined
        ? `<span class="muted">no intake answered</span>`
        : refused
          ? h(
              Object.entries(refused)
                .map(([r, n]) => `${n} ${r}`)
                .join(", "),
            )
          : "none";
    const retries = s.sender_retries ?? s.template?.sender_retries;
    return [
      h(name),
      h(schemeOf(s, c.now)),
      s.kind === "poll" ? "-" : `<code>${h(`${base}/hooks/${encodeURIComponent(name)}`)}</code>`,
      st?.last_event_age_s == null ? "never" : `${h(Math.round(st.last_event_age_s))} s ago`,
      st?.silent
        ? `<span class="bad">silent</span>`
        : st?.expected_every_s
          ? `<span class="ok">ok</span> <span class="muted">(every ${h(st.expected_every_s)} s)</span>`
          : "-",
      retries === undefined ? "-" : retries ? "yes" : "no",
      refusals,
      h(quarantined.get(name)?.join(", ") ?? "none"),
    ];
  });
  const polls = Object.entries(doc.polls ?? {}).map(([name, p]) => [
    h(name),
    p.every_s === null ? "-" : `${h(p.every_s)} s`,
    `${when(p.next_at)} <span class="muted">(in ${h(p.next_in_s)} s)</span>`,
    when(p.last_tick_at),
    when(p.delivered_at),
    p.pending ? `<span class="warn">pending</span>` : "-",
    h(p.skipped),
    p.stale ? `<span class="bad">stale</span>` : "-",
  ]);
  const sourceHead = [
    "source",
    "scheme",
    "URL",
    "last event",
    "silence",
    "sender retries",
    "refused (since the intake started)",
    "quarantined (last day)",
  ];
  const pollHead = ["poll", "every", "next tick", "last tick", "delivered", "pending", "skipped", "stale"];
  return page("Sources", `${table(sourceHead, rows)}<h2>Polls</h2>${table(pollHead, polls)}`);
}

/** An issue's state as a class: an open one is bad, an acknowledged one a warning. */
const issueClass = (state: string) => (state === "open" ? "bad" : state === "acked" ? "warn" : stateClass(state));

export async function issuesPage(c: PageContext): Promise<string> {
  const rows = await c.store.listIssues({ state: "all" });
  return page(
    "Issues",
    table(
      ["issue", "kind", "state", "count", "first", "last", "about", "error", ""],
      rows.map((i) => [
        h(i.id),
        h(i.kind),
        `<span class="${issueClass(i.state)}">${h(i.state)}</span>`,
        h(i.count),
        when(i.first_at),
        when(i.last_at),
        h(i.destination ?? i.route ?? "") +
          (i.sample_batch_id ? ` <a href="/batches/${h(i.sample_batch_id)}">batch ${h(i.sample_batch_id)}</a>` : ""),
        h(i.last_error ?? ""),
        i.state === "open" || i.state === "acked"
          ? ["ack", "resolve", "ignore"]
              .filter((v) => !(v === "ack" && i.state === "acked"))
              .map((v) => action(c, "/actions/issue", v, { id: i.id, verb: v }))
              .join(" ")
          : "",
      ]),
    ),
  );
}
