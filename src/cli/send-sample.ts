// What `hookspool send <source>` sends when it is given no body: a request the source itself
// classifies. The body is built from the source's own selectors (its key, event type, dedup id and
// attrs, each where the template reads it), and before anything is posted it is run through the
// source offline, as the intake would: a sample the source would quarantine or ignore is never
// sent, and the refusal says what to give instead.
import { dirname } from "node:path";
import type { Config, LoadedConfig } from "../config/types.ts";
import { loadSources } from "../config/sources.ts";
import { HookspoolError } from "../errors.ts";
import { evaluate, quarantineReason } from "../intake/evaluate.ts";
import { hookRequest } from "../plugin/hook-request.ts";
import type { TemplateSettings } from "../plugin/template.ts";
import { alternatives } from "../plugin/template-select.ts";
import type { Env } from "../config/load.ts";

export interface Sample {
  body: Uint8Array;
  /** Headers a selector reads (`header:X-Event`), as the sender would set them. */
  headers: [string, string][];
}

/** The event type a sample carries when none is asked for: one no source ignores by name. */
export const SAMPLE_EVENT_TYPE = "hookspool.test";

function setPath(doc: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split(".");
  let at = doc;
  for (const k of keys.slice(0, -1)) {
    const next = at[k];
    at = (next !== null && typeof next === "object" && !Array.isArray(next) ? next : (at[k] = {})) as Record<
      string,
      unknown
    >;
  }
  const last = keys[keys.length - 1];
  if (at[last] === undefined) at[last] = value;
}

/**
 * A body, and headers, in which each of the template's selectors finds `value`: its first
 * alternative is the one filled (a `const:` needs nothing; `keyof:a|b` gets field a).
 */
export function sampleFor(t: TemplateSettings, o: { eventType: string; id: string }): Sample {
  const doc: Record<string, unknown> = {};
  const headers: [string, string][] = [];
  const fill = (selector: string | undefined, value: string) => {
    if (selector === undefined || selector === "none" || selector === "body_sha256") return;
    const first = alternatives(selector)[0];
    if (first.startsWith("const:")) return;
    if (first.startsWith("header:")) {
      const name = first.slice(7);
      if (!headers.some(([k]) => k.toLowerCase() === name.toLowerCase())) headers.push([name, value]);
    } else if (first.startsWith("keyof:")) setPath(doc, first.slice(6).split("|")[0], {});
    else setPath(doc, first.startsWith("field:") ? first.slice(6) : first, value);
  };
  fill(t.event_type, o.eventType);
  fill(t.dedup, o.id);
  ([] as string[]).concat(t.key ?? []).forEach((sel, i) => fill(sel, i === 0 ? "hookspool-send" : `part-${i + 1}`));
  for (const sel of Object.values(t.attrs ?? {})) fill(sel, "test");
  setPath(doc, "sent_by", "hookspool send");
  // A source that splits one request into events reads the selectors in each element.
  const events = t.split === undefined ? doc : t.split === "*" ? [doc] : {};
  if (t.split !== undefined && t.split !== "*") setPath(events as Record<string, unknown>, t.split, [doc]);
  if (t.body !== "form") return { body: new TextEncoder().encode(JSON.stringify(events)), headers };
  const form = new URLSearchParams();
  if (t.form_json !== undefined) form.set(t.form_json, JSON.stringify(events));
  else for (const [k, v] of Object.entries(doc)) form.set(k, typeof v === "string" ? v : JSON.stringify(v));
  return { body: new TextEncoder().encode(form.toString()), headers };
}

/** What the source's intake would make of a request: null when it is queued, else the words for why not. */
export async function whyNotQueued(
  loaded: LoadedConfig,
  env: Env,
  source: string,
  req: { url: string; headers: [string, string][]; body: Uint8Array },
  now: number,
): Promise<string | null> {
  const config: Config = loaded.config;
  const sources = await loadSources(
    { ...config, sources: { [source]: config.sources[source] } },
    { configDir: dirname(loaded.paths.config ?? loaded.paths.home), env, file: loaded.paths.config ?? "config.toml" },
  );
  const src = sources.get(source);
  if (!src) return "the source takes no requests";
  const ev = await evaluate(
    config,
    src,
    hookRequest({
      method: "POST",
      url: `/hooks/${source}${req.url}`,
      headers: req.headers,
      body: req.body,
      peer: "127.0.0.1",
      now,
    }),
  );
  switch (ev.kind) {
    case "classified":
      return null;
    case "quarantine":
      return `it would be quarantined (${quarantineReason(ev.error)})`;
    case "ignored":
      return `the source ignores it (${ev.reason})`;
    case "unverified":
      return `its signature would be refused (${ev.reason})`;
    case "answered":
    case "learn":
      return "the source takes it for a handshake";
    default:
      return `the source refuses it (${ev.kind})`;
  }
}

/** The refusal when no sample fits: what to give instead. */
export function noSample(source: string, why: string, t: TemplateSettings): HookspoolError {
  const key = ([] as string[]).concat(t.key ?? []).join(", ");
  return new HookspoolError("E_USAGE", `no body given, and a sample for source ${source} would not be queued: ${why}`, {
    hint: `give --data with a body the source's key (${key}) reads, or --file; a bobbin instance also takes --capture`,
  });
}
