// hookspool check, the secrets: every reference resolves (readable, non-empty), files are
// private, env references do not rotate; a secret a handshake teaches may be missing yet.
import { readFileSync } from "node:fs";
import { quoteKey } from "../config/parse.ts";
import { describeSecretRef, resolveSecret } from "../config/secrets.ts";
import { systemClock } from "../clock.ts";
import type { Config, ConfigProblem, SecretRef, SourceSecret } from "../config/types.ts";
import { isHookspoolError } from "../errors.ts";
import type { CheckDeps } from "./check.ts";
import { problem, statOrNull } from "./problem.ts";

/** A secret reference, or (ref null) a script's env_file, which holds secrets too. */
interface SecretUse {
  key: string;
  ref: SecretRef | null;
  path?: string;
  resolve: boolean;
  /** A secret the source learns from its handshake: no file yet is a warning, not an error. */
  learned?: string;
  /** A rotation's older entry: ignored from this instant (epoch seconds) on. */
  until?: number;
}

/** A source's or an instance's secret as uses: one, or each entry of a rotation's list. */
function sourceSecretUses(key: string, s: SourceSecret, learned: string | undefined): SecretUse[] {
  if (!Array.isArray(s)) return [{ key, ref: s, resolve: true, learned }];
  return s.map((r, i) => {
    const { until, ...ref } = r;
    return { key: `${key}[${i}]`, ref: ref as SecretRef, resolve: true, until };
  });
}

function secretUses(config: Config): SecretUse[] {
  const out: SecretUse[] = [];
  const learns = (source: string, secret: string) =>
    secret === "secret" && typeof config.sources[source]?.template?.learn === "string" ? source : undefined;
  for (const [name, src] of Object.entries(config.sources)) {
    for (const [s, ref] of Object.entries(src.secrets ?? {}))
      out.push(...sourceSecretUses(`sources.${quoteKey(name)}.secrets.${quoteKey(s)}`, ref, learns(name, s)));
    // A pull source's bearer token for the upstream it leases from.
    if (src.pull?.token) out.push({ key: `sources.${quoteKey(name)}.pull.token`, ref: src.pull.token, resolve: true });
  }
  for (const [name, b] of Object.entries(config.bobbins)) {
    for (const [s, ref] of Object.entries(b.secrets ?? {}))
      out.push(...sourceSecretUses(`bobbins.${quoteKey(name)}.secrets.${quoteKey(s)}`, ref, learns(name, s)));
  }
  // A destination's check() resolves its own secrets (and knows whsec_); here only mode and env.
  for (const [name, d] of Object.entries(config.destinations)) {
    const key = `destinations.${quoteKey(name)}`;
    if (d.secret) out.push({ key: `${key}.secret`, ref: d.secret, resolve: false });
    const previous =
      d.secret_previous === undefined ? [] : Array.isArray(d.secret_previous) ? d.secret_previous : [d.secret_previous];
    previous.forEach((ref, i) =>
      out.push({
        key: Array.isArray(d.secret_previous) ? `${key}.secret_previous[${i}]` : `${key}.secret_previous`,
        ref,
        resolve: false,
      }),
    );
    if (d.env_file) out.push({ key: `${key}.env_file`, ref: null, path: d.env_file, resolve: false });
    // A pull destination's tokens: its consumers' bearer tokens, read at each request.
    const tokens = d.token === undefined ? [] : Array.isArray(d.token) ? d.token : [d.token];
    tokens.forEach((ref, i) =>
      out.push({ key: Array.isArray(d.token) ? `${key}.token[${i}]` : `${key}.token`, ref, resolve: true }),
    );
  }
  return out;
}

function readableNonEmpty(path: string): boolean {
  try {
    return readFileSync(path, "utf8").trim() !== "";
  } catch {
    return false;
  }
}

/** Every reference resolves (readable, non-empty); files are private; env refs do not rotate. */
export function secretRules(config: Config, deps: CheckDeps): ConfigProblem[] {
  const out: ConfigProblem[] = [];
  const now = deps.now ?? systemClock.now();
  for (const { key, ref, path: envFile, resolve: read, learned, until } of secretUses(config)) {
    // An old secret of a rotation past its until: verify no longer tries it.
    if (until !== undefined && now >= until) {
      out.push(
        problem(
          "warning",
          key,
          `past its until (${new Date(until * 1000).toISOString()}): requests signed with it are refused now`,
          "remove it from the list",
        ),
      );
      continue;
    }
    // Not learned yet: the intake must start (and reload) to take the handshake that teaches it.
    if (learned && ref && "file" in ref && !readableNonEmpty(ref.file)) {
      out.push(
        problem(
          "warning",
          key,
          `no secret learned yet in ${ref.file}: events are answered 503 until the handshake comes`,
          `hookspool source arm ${learned}, then create the webhook at the provider`,
        ),
      );
      continue;
    }
    if (read && ref) {
      try {
        resolveSecret(ref, deps.env);
      } catch (e) {
        // resolveSecret's message names the reference, never the value.
        if (!isHookspoolError(e)) throw e;
        out.push(problem("error", key, e.message, e.hint));
        continue;
      }
    }
    if (ref && "env" in ref) {
      out.push(
        problem(
          "warning",
          key,
          `${describeSecretRef(ref)}: env references do not rotate without a restart`,
          "use { file = ... } or { env_file = ..., key = ... } to rotate without a restart",
        ),
      );
      continue;
    }
    const path = ref === null ? (envFile as string) : "file" in ref ? ref.file : ref.env_file;
    const st = statOrNull(path);
    if (st && st.mode & 0o077) {
      out.push(
        problem(
          "warning",
          key,
          `${path} is readable by group/other (mode ${(st.mode & 0o777).toString(8).padStart(4, "0")})`,
          `chmod 600 ${path}`,
        ),
      );
    }
  }
  return out;
}
