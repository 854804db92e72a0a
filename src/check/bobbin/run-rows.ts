// The scorecard rows that run the bobbin: its captures through a real intake (each `# expect:`
// holds), the source kit's matrix on its accepted capture, its processor and its own tests.
import { isCompiled } from "../../self.ts";
import { stringify } from "smol-toml";
import { systemClock } from "../../clock.ts";
import {
  type Capture,
  capturesOf,
  type Kit,
  type PollCapture,
  parseKit,
  parsePollCapture,
} from "../../bobbin/captures.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import { builtinModule } from "../../bobbin/registry.ts";
import { registerPluginApi } from "../../bobbin/plugin-api.ts";
import { canSign, isTimestamped, signsBody, signTemplate } from "../../plugin/sign.ts";
import { parseConfig } from "../../config/load.ts";
import { type TemplateSettings, templateSource } from "../../plugin/template.ts";
import type { SourcePlugin } from "../../plugin/types.ts";
import { hookRequest } from "../../plugin/hook-request.ts";
import { startKitIntake } from "../kit/intake.ts";
import { type KitRequest, type KitSubject, runSourceKit } from "../kit/source-kit.ts";
import { lineOf, type Problem, type Row, row, skipped } from "./row.ts";
import type { CheckSubject } from "./subject.ts";

const KIT = "captures/kit.toml";

/** Values that look like a real credential, whatever file they are in. */
const CREDENTIAL = [
  /\bgh[pousr]_[A-Za-z0-9]{30,}/,
  /\bgithub_pat_[A-Za-z0-9_]{20,}/,
  /\bxox[abposr]-[A-Za-z0-9-]{10,}/,
  /\b[sr]k_live_[A-Za-z0-9]{10,}/,
  /\bAKIA[0-9A-Z]{16}\b/,
  /\bAIza[0-9A-Za-z_-]{35}\b/,
  /\bya29\.[A-Za-z0-9_-]{20,}/,
  /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
  // A JWT is a credential where it is a bearer token: a signature header (Plaid-Verification)
  // only proves one request and is fine in a capture.
  /^(authorization|proxy-authorization|cookie|x-api-key):.*\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./i,
  /"(access_token|id_token|refresh_token)"\s*:\s*"eyJ/,
];
/** An e-mail address that is not on a reserved example domain or a no-reply address. */
const EMAIL = /[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,}/g;
const SAFE_EMAIL =
  /(@|\.)(example\.(com|org|net)|[a-z0-9-]+\.(test|example|invalid))$|^(no-?reply|noreply)[^@]*@|@users\.noreply\.github\.com$|^git@/i;
/** A kit secret says it is a test value. */
const TEST_VALUE = /test|kit|example|fake|dummy/i;

export interface Loaded {
  kit: Kit | null;
  captures: Capture[];
  /** A poll bobbin's captures/poll-*.json. */
  polls: PollCapture[];
  problems: Problem[];
}

export function loadCaptures(s: CheckSubject): Loaded {
  const problems: Problem[] = [];
  let kit: Kit | null = null;
  const kitText = s.files.get(KIT);
  if (kitText !== undefined) {
    try {
      kit = parseKit(kitText);
    } catch (e) {
      problems.push({
        file: KIT,
        message: (e as Error).message,
        fix: "see docs/bobbins/writing-a-bobbin.md for the kit file",
      });
    }
  }
  const captures: Capture[] = [];
  for (const [f, text] of s.files) {
    if (!f.startsWith("captures/") || !f.endsWith(".http")) continue;
    try {
      captures.push(...capturesOf(new Map([[f, text]])));
    } catch (e) {
      problems.push({
        file: f,
        line: 1,
        message: (e as Error).message.replace(`${f}: `, ""),
        fix: "open it with # expect: <status> [word], then METHOD PATH, headers, a blank line and the body",
      });
    }
  }
  const polls: PollCapture[] = [];
  for (const [f, text] of s.files) {
    if (!/^captures\/poll-[^/]+\.json$/.test(f)) continue;
    try {
      polls.push(parsePollCapture(f, text));
    } catch (e) {
      problems.push({
        file: f,
        message: (e as Error).message.replace(`${f}: `, ""),
        fix: 'a poll capture is {"description": ..., "now": ..., "http": [{"url": ..., "status": ..., "body": ...}], "items": [...]}',
      });
    }
  }
  return { kit, captures, polls, problems };
}

/** A bobbin's accepted capture for the kit's own instance: 202 queued, no settings of its own. */
const acceptedOf = (l: Loaded) =>
  l.captures.find(
    (c) => (c.expect.status === 202 || c.expect.status === 200) && c.expect.word === "queued" && !c.settings,
  );

/** Each capture's instance: the kit's, or one per distinct `# settings:`. */
function instancesOf(
  kit: Kit,
  captures: Capture[],
): Map<string, { settings: Record<string, unknown>; captures: Capture[] }> {
  const out = new Map<string, { settings: Record<string, unknown>; captures: Capture[] }>();
  const ids = new Map<string, string>([[JSON.stringify(kit.instance.settings), kit.instance.name]]);
  out.set(kit.instance.name, { settings: kit.instance.settings, captures: [] });
  for (const c of captures) {
    const key = JSON.stringify(c.settings ?? kit.instance.settings);
    let name = ids.get(key);
    if (!name) {
      name = `${kit.instance.name}-${ids.size}`;
      ids.set(key, name);
      out.set(name, { settings: c.settings ?? {}, captures: [] });
    }
    out.get(name)?.captures.push(c);
  }
  return out;
}

/** The config the kit serves a bobbin with: one [bobbins.<i>] table per instance. */
export function kitConfig(
  s: CheckSubject,
  m: Manifest,
  kit: Kit,
  instances: Iterable<[string, { settings: Record<string, unknown> }]>,
): string {
  const secrets = Object.fromEntries(Object.keys(kit.secrets).map((n) => [n, { file: `{{secret:${n}}}` }]));
  const outputs = Object.fromEntries(Object.keys(m.outputs).map((o) => [o, "kit"]));
  const doc: Record<string, unknown> = {
    bobbins: Object.fromEntries(
      [...instances].map(([name, i]) => [
        name,
        { bobbin: m.name, secrets, ...(Object.keys(i.settings).length ? { settings: i.settings } : {}), outputs },
      ]),
    ),
    // Never delivered to: the intake is what the kit runs.
    destinations: { kit: { type: "http", url: "http://127.0.0.1:9/kit", allow_insecure: true, unsigned: true } },
  };
  if (!s.shipped && s.root) doc.spool = { bobbin_path: [s.root] };
  return stringify(doc);
}

/** A capture as the kit sends it: to its instance's path, framed by fetch (its own Host and length). */
export function requestOf(c: Capture, instance: string): KitRequest {
  const r = c.request;
  return {
    method: r.method,
    url: r.url.replace(/^\/hooks\/[^/?]+/, `/hooks/${instance}`),
    headers: r.headers.filter(([k]) => !["host", "content-length"].includes(k.toLowerCase())),
    body: r.body,
  };
}

export async function capturesRow(s: CheckSubject, m: Manifest | null, l: Loaded): Promise<Row> {
  const out = [...l.problems];
  for (const [f, text] of s.files) {
    if (!f.startsWith("captures/")) continue;
    for (const [i, line] of text.split("\n").entries()) {
      if (CREDENTIAL.some((re) => re.test(line)))
        out.push({
          file: f,
          line: i + 1,
          message: "holds what looks like a real credential",
          fix: "replace it with a test value (the kit's secrets say test or kit)",
        });
      for (const e of line.match(EMAIL) ?? [])
        if (!SAFE_EMAIL.test(e))
          out.push({
            file: f,
            line: i + 1,
            message: `holds a real-looking e-mail address ${e.replace(/^[^@]{2}[^@]*/, (x) => `${x.slice(0, 2)}…`)}`,
            fix: "redact it to an address at example.com",
          });
    }
  }
  for (const [n, v] of Object.entries(l.kit?.secrets ?? {}))
    if (!TEST_VALUE.test(v))
      out.push({
        file: KIT,
        line: lineOf(s.files.get(KIT), new RegExp(`^\\s*${n}\\s*=`)),
        message: `secrets.${n} does not look like a test value`,
        fix: "use a made-up value that says test or kit; never a real secret",
      });
  if (m?.poll) {
    // A poll has no requests: its captures are what a tick finds (the processor row runs them).
    for (const c of l.captures)
      out.push({
        file: c.file,
        message: "a poll bobbin takes no requests",
        fix: "remove it; a poll bobbin's captures are captures/poll-<name>.json",
      });
    if (!l.polls.length && !l.problems.length)
      out.push({
        file: "captures/",
        message: "no poll capture",
        fix: "add captures/poll-<name>.json: what one tick finds (the API's answers, redacted)",
      });
    return row("captures", out, out.length ? undefined : `${l.polls.length} poll capture(s)`);
  }
  if (!acceptedOf(l))
    out.push({
      file: "captures/",
      message: "no accepted capture (# expect: 202 queued) for the kit's instance",
      fix: "add captures/accepted.http: a real delivery, redacted, signed with the kit's secret",
    });
  if (!l.captures.some((c) => c.expect.status === 401))
    out.push({
      file: "captures/",
      message: "no rejected capture (# expect: 401)",
      fix: "add captures/rejected.http: the accepted delivery under a wrong signature",
    });
  if (out.length) return row("captures", out);
  if (!m || !l.kit)
    return skipped("captures", "the manifest or captures/kit.toml does not load, so no capture was sent");
  out.push(...(await expectationsHold(s, m, l.kit, l.captures)));
  return row("captures", out, `${l.captures.length} captures`);
}

/** Serve the bobbin and send every capture at the kit's time: each gets what it says. */
async function expectationsHold(s: CheckSubject, m: Manifest, kit: Kit, captures: Capture[]): Promise<Problem[]> {
  const instances = instancesOf(kit, captures);
  const out: Problem[] = [];
  let k: Awaited<ReturnType<typeof startKitIntake>>;
  try {
    k = await startKitIntake({
      config: kitConfig(s, m, kit, instances),
      secrets: kit.secrets,
      now: kit.now ?? Math.floor(systemClock.now()),
      http: kit.http,
    });
  } catch (e) {
    const problems = (e as { problems?: { key: string; message: string }[] }).problems;
    const why = problems?.length ? problems.map((p) => `${p.key}: ${p.message}`).join("; ") : (e as Error).message;
    return [
      {
        file: KIT,
        message: `the kit's instance does not load: ${why}`,
        fix: "make [instance] settings and [secrets] what the manifest requires",
      },
    ];
  }
  try {
    for (const [name, i] of instances) {
      for (const c of i.captures) {
        const r = await k.send(requestOf(c, name));
        const word = (() => {
          try {
            return (
              (JSON.parse(r.text) as { status?: string }).status ?? r.headers.get("x-hookspool-status") ?? undefined
            );
          } catch {
            // A source's own ack body (TwiML, Discord's reply): the word is in the header.
            return r.headers.get("x-hookspool-status") ?? undefined;
          }
        })();
        const fail = (message: string) =>
          out.push({
            file: c.file,
            line: 1,
            message,
            fix: "correct the capture or the bobbin; a capture is a real delivery and what it must get",
          });
        if (r.status !== c.expect.status)
          fail(
            `got ${r.status}${word ? ` ${word}` : ""}, # expect: says ${c.expect.status}${c.expect.word ? ` ${c.expect.word}` : ""}`,
          );
        else if (c.expect.word && word !== c.expect.word)
          fail(`got ${r.status} ${word ?? "(no status word)"}, # expect: says ${c.expect.word}`);
        else if (c.expect.word === "queued" && (c.expect.key !== undefined || c.expect.eventType !== undefined)) {
          const ev = k.spool.newestEvent();
          if (c.expect.key !== undefined && ev?.key !== c.expect.key)
            fail(`queued under key ${JSON.stringify(ev?.key)}, # expect-key: says ${JSON.stringify(c.expect.key)}`);
          if (c.expect.eventType !== undefined && ev?.event_type !== c.expect.eventType)
            fail(
              `queued as event type ${JSON.stringify(ev?.event_type)}, # expect-event-type: says ${JSON.stringify(c.expect.eventType)}`,
            );
        }
      }
    }
  } finally {
    await k.stop();
  }
  return out;
}

/** The template the kit's instance runs, as config loading expands it (fixed keys and settings). */
function templateOf(config: string, instance: string): TemplateSettings | null {
  const text = config.replace(/\{\{secret:[^}]+\}\}/g, "/nonexistent");
  const t = parseConfig(text, KIT, { home: () => "/var/lib/hookspool" }).config.sources[instance]?.template;
  return (t ?? null) as TemplateSettings | null;
}

async function codeSource(s: CheckSubject, m: Manifest): Promise<SourcePlugin | null> {
  const mod = m.source?.module;
  if (!mod) return null;
  registerPluginApi();
  const loaded = s.dir.startsWith("builtin:") ? builtinModule(`${s.dir}/${mod}`) : await import(`${s.dir}/${mod}.ts`);
  return ((loaded as { default?: SourcePlugin } | undefined)?.default ?? null) as SourcePlugin | null;
}

/**
 * Set a body-field timestamp in the kit's own JSON bodies, in the unit the accepted capture uses
 * (milliseconds when its value is above 1e12, as the verifier reads it).
 */
function stampedBy(
  path: string,
  acceptedBody: Uint8Array,
): (fields: Record<string, unknown>, now: number) => Record<string, unknown> {
  let ms = false;
  try {
    let v: unknown = JSON.parse(new TextDecoder().decode(acceptedBody));
    for (const k of path.split("."))
      v = v !== null && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined;
    ms = Number(v) > 1e12;
  } catch {
    // An accepted capture that is not JSON: seconds.
  }
  return (fields, now) => {
    const out: Record<string, unknown> = { ...fields };
    const keys = path.split(".");
    let at = out;
    for (const k of keys.slice(0, -1)) at = (at[k] = {}) as Record<string, unknown>;
    at[keys[keys.length - 1] as string] = ms ? Math.round(now * 1000) : now;
    return out;
  };
}

export async function sourceKitRow(s: CheckSubject, m: Manifest | null, l: Loaded): Promise<Row> {
  const name = "source-kit";
  if (!m || !l.kit) return skipped(name, "the manifest or captures/kit.toml does not load");
  if (m.poll) return skipped(name, "a poll bobbin has no source");
  const accepted = acceptedOf(l);
  if (!accepted) return skipped(name, "no accepted capture to run it on (see the captures row)");
  const kit = l.kit;
  const instance = kit.instance.name;
  const config = kitConfig(s, m, kit, [[instance, { settings: kit.instance.settings }]]);
  let t: TemplateSettings | null;
  try {
    t = templateOf(config, instance);
  } catch (e) {
    return row(name, [
      {
        file: KIT,
        message: `the kit's instance does not load: ${(e as Error).message.split("\n")[0]}`,
        fix: "see the captures row",
      },
    ]);
  }
  let plugin: SourcePlugin | null;
  try {
    plugin = t ? templateSource(t) : await codeSource(s, m);
  } catch (e) {
    const message = (e as Error).message.split("\n")[0];
    // The compiled binary carries the packages of its own code only: a bobbin on disk that imports
    // another (jose, say) cannot load in it, though it may be sound.
    const pkg = /Cannot find (?:package|module) '([^']+)'/.exec(message)?.[1];
    if (pkg && isCompiled())
      return row(name, [
        {
          file: `${m.source?.module ?? "bobbin"}.ts`,
          message: `the hookspool binary cannot load this code: it imports ${pkg}, which the binary does not carry`,
          fix: "check it from a source checkout (bun src/main.ts bobbin check <dir>), or import only hookspool/plugin and hookspool/providers",
        },
      ]);
    return row(name, [
      {
        file: `${m.source?.module ?? "bobbin"}.ts`,
        message: `cannot load the source: ${message}`,
        fix: "export default defineSource({...})",
      },
    ]);
  }
  if (!plugin)
    return row(name, [
      { file: `${m.source?.module}.ts`, message: "has no default export", fix: "export default defineSource({...})" },
    ]);
  const secret = kit.secrets.secret;
  const sameInstance = l.captures.filter((c) => !c.settings);
  const subject: KitSubject = {
    source: instance,
    config,
    secrets: kit.secrets,
    now: kit.now ?? Math.floor(systemClock.now()),
    http: kit.http,
    accepted: requestOf(accepted, instance),
    ...(t && secret !== undefined && canSign(t)
      ? { sign: (body: Uint8Array, now: number, id: string) => signTemplate(t, secret, body, now, id) }
      : {}),
    authHeaders: plugin.authHeaders ?? [],
    bodySigned: t ? signsBody(t) : (kit.body_signed ?? true),
    timestamped: t ? isTimestamped(t) : (kit.timestamped ?? false),
    ...(t?.tolerance_s !== undefined ? { toleranceS: t.tolerance_s } : {}),
    ...(t?.timestamp_field !== undefined
      ? { stamped: stampedBy(t.timestamp_field, requestOf(accepted, instance).body) }
      : {}),
    dedup: plugin.dedupId !== undefined,
    ack: plugin.ack !== undefined,
    headHandshake: plugin.challengeUnauthenticated === true,
    broken: (() => {
      const c = sameInstance.find((x) => x.expect.status === 202 && x.expect.word === "quarantined");
      return c ? requestOf(c, instance) : undefined;
    })(),
    // A handshake that teaches the secret is not signed: the kit's tampering does not apply to it.
    answered: sameInstance
      .filter(
        (c) =>
          c.expect.status >= 200 &&
          c.expect.status < 300 &&
          c.request.method === "POST" &&
          !["queued", "duplicate", "quarantined", "replayed"].includes(c.expect.word ?? ""),
      )
      .filter((c) => !offersSecret(plugin, requestOf(c, instance)))
      .map((c) => ({ request: requestOf(c, instance) })),
  };
  let run: Awaited<ReturnType<typeof runSourceKit>>;
  try {
    run = await runSourceKit(subject);
  } catch (e) {
    return row(name, [
      {
        file: KIT,
        message: `the kit could not serve the bobbin: ${(e as Error).message.split("\n")[0]}`,
        fix: "see the captures row",
      },
    ]);
  }
  const problems = run.cases
    .filter((c) => c.outcome === "fail")
    .map((c) => ({
      file: accepted.file,
      message: `${c.name}: ${c.detail}`,
      fix: "the source must refuse, answer or keep this as every source does",
    }));
  const ran = run.cases.filter((c) => c.outcome === "pass").length;
  const skips = run.cases.filter((c) => c.outcome === "skip").map((c) => `${c.name.split(":")[0]} (${c.detail})`);
  return row(
    name,
    problems,
    `${ran} of ${run.cases.length} cases ran${skips.length ? `; not applicable: ${skips.join(", ")}` : ""}`,
  );
}

/** Whether a capture is a handshake the source learns its secret from (Asana's, Notion's). */
function offersSecret(plugin: SourcePlugin, r: KitRequest): boolean {
  if (!plugin.learn) return false;
  return (
    plugin.learn(
      hookRequest({ method: r.method, url: r.url, headers: r.headers, body: r.body, peer: "127.0.0.1", now: 0 }),
    ) !== null
  );
}
