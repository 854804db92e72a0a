// The live tail: the journal `watch` follows, the last 50 changes on the page (it reads without
// JavaScript) and, with it, each new one as a server-sent event whose id is its cursor, so a
// reconnecting browser resumes after the last line it saw.
import type { TailRow } from "../store/api.ts";
import type { JournalRow } from "../store/journal.ts";
import { h, page, type PageContext, when } from "./html.ts";

/** One change as a line: cursor, time, kind, batch, source -> destination, key, and its small facts. */
export function journalLine(r: JournalRow): string {
  let facts = "";
  if (r.detail) {
    try {
      const d = JSON.parse(r.detail) as Record<string, unknown>;
      if (r.attempt_n !== null) delete d.n;
      facts = Object.entries(d)
        .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : String(v)}`)
        .join(" ");
    } catch {
      facts = "";
    }
  }
  const attempt = r.attempt_n !== null ? ` attempt ${r.attempt_n}` : "";
  return (
    `${r.id} ${when(r.at)} ${r.kind} batch ${r.batch_id}${attempt} ` +
    `${r.source} -> ${r.destination} key=${r.key}${facts ? ` ${facts}` : ""}`
  );
}

export async function livePage(c: PageContext): Promise<string> {
  const { rows, cursor } = await c.store.journalTail(50);
  const list =
    `<p class="muted" aria-live="polite"><span id="tail-status">the last ${h(rows.length)} change(s); ` +
    `with JavaScript the list follows new ones</span></p><ol id="tail" data-since="${h(cursor)}" ` +
    `aria-live="polite">${rows.map((r) => `<li data-cursor="${h(r.cursor)}">${h(journalLine(r))}</li>`).join("")}</ol>`;
  return page("Live", list);
}

/** The SSE frame of one row: its cursor as the id, the line (with no line break) as the data. */
export function sseFrame(r: TailRow): string {
  const line = journalLine(r).replace(
    /[\u0000-\u001f\u007f]/g,
    (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, "0")}`,
  );
  return `id: ${r.cursor}\ndata: ${line}\n\n`;
}
