// hookspool send, the request: the template the source runs, the capture or body it sends, the
// intake's URL, and the request built and signed as the source's sender would (the scheme's
// headers, a fresh timestamp and delivery id).
import { type Capture, capturesOf } from "../bobbin/captures.ts";
import { findBobbins } from "../bobbin/registry.ts";
import { parseListen } from "../config/listen.ts";
import type { Config } from "../config/types.ts";
import { HookspoolError } from "../errors.ts";
import { canSign, signTemplate } from "../plugin/sign.ts";
import type { TemplateSettings } from "../plugin/template.ts";

export interface Built {
  url: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** The template the source runs, or a one-line refusal for what send cannot sign. */
export function templateOf(config: Config, source: string): TemplateSettings {
  const src = config.sources[source];
  if (!src)
    throw new HookspoolError("E_NOT_FOUND", `no source "${source}" in the config`, {
      hint: "hookspool check lists the sources and bobbin instances",
    });
  if (src.kind === "poll")
    throw new HookspoolError("E_USAGE", `source ${source} is a poll source: it takes no requests`);
  if (!src.template)
    throw new HookspoolError("E_USAGE", `source ${source} is a code source: send signs template sources only`, {
      hint: "use the provider's test delivery, or hookspool source test with a capture",
    });
  const t = src.template as unknown as TemplateSettings;
  if (!canSign(t))
    throw new HookspoolError(
      "E_USAGE",
      `source ${source} (${t.scheme}) is signed with the sender's private key: send cannot sign as it`,
      { hint: "use the provider's own test delivery" },
    );
  return t;
}

/** A bobbin instance's capture by name (`accepted` is captures/accepted.http). */
export function captureOf(config: Config, source: string, name: string): Capture {
  const instance = config.bobbins[source];
  if (!instance?.bobbin)
    throw new HookspoolError("E_USAGE", `--capture needs a bobbin instance; ${source} is a plain source`);
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    instance.bobbin,
  );
  if (!b) throw new HookspoolError("E_NOT_FOUND", `no bobbin "${instance.bobbin}"`);
  const all = capturesOf(b.files());
  const c = all.find((x) => x.file === `captures/${name}.http` || x.file === name);
  if (!c)
    throw new HookspoolError("E_NOT_FOUND", `${instance.bobbin} has no capture ${name}`, {
      hint: `its captures: ${all.map((x) => x.file.replace(/^captures\/|\.http$/g, "")).join(", ")}`,
    });
  return c;
}

/** A bobbin instance's captures/accepted.http, when it has one. */
export function acceptedCapture(config: Config, source: string): Capture | undefined {
  const instance = config.bobbins[source];
  if (!instance?.bobbin) return undefined;
  const b = findBobbins({ bobbinPath: config.spool.bobbin_path, presets: Object.keys(config.spans) }).bobbins.get(
    instance.bobbin,
  );
  return b ? capturesOf(b.files()).find((x) => x.file === "captures/accepted.http") : undefined;
}

/** Where the running intake takes the source's requests. */
export function intakeUrl(config: Config, source: string, given: string | undefined): { url: string; unix?: string } {
  if (given) return { url: given };
  const listen = parseListen(config.intake.listen, true);
  const path = `/hooks/${encodeURIComponent(source)}`;
  if ("unix" in listen) return { url: `http://localhost${path}`, unix: listen.unix };
  const host = listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname;
  return { url: `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${listen.port}${path}` };
}

/** The request: the capture's or the given body, the sender's headers, signed now with the source's secret. */
export function build(
  t: TemplateSettings,
  secret: string,
  o: {
    body: Uint8Array;
    captured?: Capture;
    headers?: [string, string][];
    eventType?: string;
    now: number;
    id: string;
  },
): Built {
  const signing = new Set(
    [
      t.header,
      t.timestamp_header,
      t.id_header,
      "webhook-id",
      "webhook-timestamp",
      "webhook-signature",
      "svix-id",
      "svix-timestamp",
      "svix-signature",
    ]
      .filter((h): h is string => !!h)
      .map((h) => h.toLowerCase()),
  );
  const headers: [string, string][] = o.captured
    ? o.captured.request.headers.filter(
        ([k]) => !signing.has(k.toLowerCase()) && !["host", "content-length"].includes(k.toLowerCase()),
      )
    : [
        ["Content-Type", t.body === "form" ? "application/x-www-form-urlencoded" : "application/json"],
        ...(o.headers ?? []),
      ];
  const set = (name: string, value: string) => {
    const at = headers.findIndex(([k]) => k.toLowerCase() === name.toLowerCase());
    if (at >= 0) headers[at] = [name, value];
    else headers.push([name, value]);
  };
  // A header the template reads the event type or the dedup id from, as the sender sets it.
  if (o.eventType !== undefined && t.event_type?.startsWith("header:"))
    set(t.event_type.slice(7).split("|")[0], o.eventType);
  if (t.dedup?.startsWith("header:")) set(t.dedup.slice(7).split("|")[0], o.id);
  const body = t.timestamp_field ? restamped(o.body, t.timestamp_field, o.now) : o.body;
  const signed = signTemplate(t, secret, body, o.now, o.id);
  for (const [k, v] of signed.headers) set(k, v);
  const query = signed.query ? `?${signed.query}` : "";
  return { url: query, headers, body };
}

/**
 * A body whose timestamp field is set to now, in the unit it was written in (milliseconds above
 * 1e12): a sender that signs its timestamp in the body (Linear) sends a fresh one each time.
 */
function restamped(body: Uint8Array, path: string, now: number): Uint8Array {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return body;
  }
  const keys = path.split(".");
  let at = doc as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) {
    if (at === null || typeof at !== "object") return body;
    at = at[k] as Record<string, unknown>;
  }
  if (at === null || typeof at !== "object") return body;
  const last = keys[keys.length - 1];
  at[last] = Number(at[last]) > 1e12 ? Math.round(now * 1000) : now;
  return new TextEncoder().encode(JSON.stringify(doc));
}
