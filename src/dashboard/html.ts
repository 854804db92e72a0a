// The dashboard's HTML: every stored string escaped on the way out (a key or event type with
// markup or control characters is inert text), one layout, one embedded stylesheet with a light
// and a dark scheme from the system's preference, no external fonts, scripts only from /assets.
import type { Config } from "../config/types.ts";
import type { DashboardStore } from "../store/api.ts";
import type { AckSample, IntakeView } from "./intake-view.ts";

export interface PageContext {
  store: DashboardStore;
  config: Config;
  dbPath: string;
  now: number;
  /** The session's CSRF token, for the action forms; null when actions are off. */
  csrf: string | null;
  /** The intake's own counters, on the pages that show them (null: no intake answered). */
  intake?: IntakeView | null;
  /** The dashboard's own readings of the intake's ack histogram, oldest first. */
  ackSamples?: readonly AckSample[];
}

/** Text as HTML: markup characters escaped, control characters shown as \xNN. */
export function h(value: unknown): string {
  return String(value ?? "")
    .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** A value as JSON inside a <script type="application/json"> block: no sequence can end the block. */
export function jsonBlock(id: string, value: unknown): string {
  const text = JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/>/g, "\\u003e")
    .replace(/&/g, "\\u0026")
    .replace(/\u2028/g, "\\u2028")
    .replace(/\u2029/g, "\\u2029");
  return `<script type="application/json" id="${h(id)}">${text}</script>`;
}

/** The page's CSS, a line per group of rules (joined with newlines, as the page carries it). */
const STYLE_LINES = [
  ":root { color-scheme: light dark; --fg: #1b1b1b; --bg: #fff; --muted: #595959; --line: #ddd; " +
    "--ok: #1a7f37; --bad: #b71c1c; --warn: #8a5a00; }",
  "@media (prefers-color-scheme: dark) { :root { --fg: #e6e6e6; --bg: #161616; --muted: #a8a8a8; " +
    "--line: #333; --ok: #4ac26b; --bad: #ff7b7b; --warn: #e0b440; } }",
  "body { font: 15px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 0 auto; " +
    "max-width: 72rem; padding: 0 1rem 2rem; }",
  "nav { display: flex; gap: 1rem; flex-wrap: wrap; padding: .75rem 0; border-bottom: 1px solid var(--line); }",
  "nav a { color: inherit; } a { color: inherit; }",
  "a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible " +
    "{ outline: 2px solid currentColor; outline-offset: 2px; }",
  ".skip { position: absolute; left: -999px; } " +
    ".skip:focus { left: 1rem; top: .5rem; background: var(--bg); padding: .25rem; }",
  "table { border-collapse: collapse; width: 100%; margin: .5rem 0 1rem; } " +
    "th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }",
  ".ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); } .muted { color: var(--muted); }",
  "code, pre { font: 13px/1.4 ui-monospace, monospace; } pre { white-space: pre-wrap; overflow-wrap: anywhere; }",
  "form.inline { display: inline; } .scroll { overflow-x: auto; } label { white-space: nowrap; }",
  "figure { margin: .5rem 0 1rem; } figcaption { font-weight: 600; } " +
    ".charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(240px, 1fr)); gap: 1rem; }",
  "ol.timeline { list-style: none; padding-left: 0; border-left: 2px solid var(--line); } " +
    "ol.timeline li { padding: .25rem 0 .25rem 1rem; }",
  ".u-legend { font-size: 12px; }",
];
const STYLE = `\n${STYLE_LINES.join("\n")}\n`;

/** The nav's links: the pages in their order. */
const PAGES: [string, string][] = [
  ["/", "Overview"],
  ["/batches", "Batches"],
  ["/sources", "Sources"],
  ["/issues", "Issues"],
  ["/live", "Live"],
];
const NAV =
  `<nav aria-label="pages"><strong>hookspool</strong>` +
  `${PAGES.map(([href, name]) => `<a href="${href}">${name}</a>`).join("")}</nav>`;
const SCRIPTS = `<script src="/assets/uplot.js"></script><script src="/assets/client.js"></script>`;

/** A whole page around `body` (already HTML); `title` and the nav are escaped here. */
export function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${h(title)} · hookspool</title><style>${STYLE}</style><link rel="stylesheet" href="/assets/uplot.css"></head>
<body><a class="skip" href="#main">skip to the page</a>${NAV}
<main id="main"><h1>${h(title)}</h1>${body}</main>${SCRIPTS}</body></html>`;
}

/** A table of rows of cells (each cell already HTML). */
export function table(head: string[], rows: string[][], caption?: string): string {
  if (rows.length === 0) return `<p class="muted">none</p>`;
  return (
    `<div class="scroll"><table>${caption ? `<caption class="muted">${h(caption)}</caption>` : ""}<thead>` +
    `<tr>${head.map((x) => `<th scope="col">${h(x)}</th>`).join("")}</tr></thead>` +
    `<tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")}</tbody>` +
    "</table></div>"
  );
}

/** A Unix time as an ISO string, or "-". */
export function when(t: number | null | undefined): string {
  return typeof t === "number" && Number.isFinite(t) ? new Date(t * 1000).toISOString().replace(/\.\d{3}Z$/, "Z") : "-";
}

/** The colour class of a state word. */
export function stateClass(s: string): string {
  return s === "closed" || s === "delivered" || s === "ok"
    ? "ok"
    : s === "open" || s === "dead"
      ? "bad"
      : s === "half_open" || s === "paused" || s === "retry" || s === "awaiting"
        ? "warn"
        : "";
}

/** A state-changing button: a POST form with the CSRF token; nothing when actions are off. */
export function action(
  c: PageContext,
  path: string,
  label: string,
  fields: Record<string, string | number> = {},
): string {
  if (!c.csrf) return "";
  const hidden = Object.entries({ ...fields, csrf: c.csrf })
    .map(([k, v]) => `<input type="hidden" name="${h(k)}" value="${h(v)}">`)
    .join("");
  return (
    `<form class="inline" method="post" action="${h(path)}">${hidden}<button type="submit">${h(label)}</button>` +
    "</form>"
  );
}
