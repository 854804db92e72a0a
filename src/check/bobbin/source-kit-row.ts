// The scorecard's source-kit row: the source kit's matrix (tampering, replays, handshakes, acks)
// run on the bobbin's accepted capture, through its template or its code source.
import { isCompiled } from "../../self.ts";
import { systemClock } from "../../clock.ts";
import type { Manifest } from "../../bobbin/manifest.ts";
import { builtinModule } from "../../bobbin/registry.ts";
import { registerPluginApi } from "../../bobbin/plugin-api.ts";
import { canSign, isTimestamped, signsBody, signTemplate } from "../../plugin/sign.ts";
import { parseConfig } from "../../config/load.ts";
import { type TemplateSettings, templateSource } from "../../plugin/template.ts";
import type { SourcePlugin } from "../../plugin/types.ts";
import { hookRequest } from "../../plugin/hook-request.ts";
import { type KitRequest, type KitSubject, runSourceKit } from "../kit/source-kit.ts";
import { acceptedOf, KIT, kitConfig, type Loaded, requestOf } from "./kit-files.ts";
import { type Row, row, skipped } from "./row.ts";
import type { CheckSubject } from "./subject.ts";

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
          fix:
            "check it from a source checkout (bun src/main.ts bobbin check <dir>), " +
            "or import only hookspool/plugin and hookspool/providers",
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
      ? {
          sign: (body: Uint8Array, now: number, id: string) =>
            signTemplate(t, secret, body, now, id, undefined, t.header2 ? kit.secrets.secret2 : undefined),
        }
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
    headHandshake: plugin.challengeUnauthenticated === true && !t?.echo_unsigned,
    ...(t?.echo_unsigned
      ? {
          unsignedEcho: {
            spec: t.echo_unsigned,
            method: t.echo_method ?? "GET",
            reply: t.echo_reply ?? "text",
          },
        }
      : {}),
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
