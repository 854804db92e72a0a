// Destination names to instances: hermes:<route> and script:<name> are implicit destinations,
// [destinations.<name>] tables define http ones and override defaults for the implicit ones;
// quarantine never delivers.
import type { Clock } from "../clock.ts";
import { destinationSettings } from "../config/destinations.ts";
import type { Env } from "../config/secrets.ts";
import type { Config, SecretRef } from "../config/types.ts";
import { HermesDestination } from "./hermes.ts";
import { HttpDestination } from "./http.ts";
import { ScriptDestination } from "./script.ts";
import type { Destination, Pace } from "../delivery.ts";
import { systemClock } from "../clock.ts";
import { parseRate, type Rate } from "../pacing.ts";

export interface RegistryOptions {
  /** The dispatcher's environment: { env } secret refs, HOME for ~, and a script's PATH/HOME/LANG. */
  env: Env;
  /** Accepted for symmetry with the dispatcher; deliveries use ctx.clock. */
  clock: Clock;
  /** The spool's instance id (for per-event ids with unwrap). */
  instanceId: string;
}

function asList(refs: SecretRef | SecretRef[] | undefined): SecretRef[] {
  if (refs === undefined) return [];
  return Array.isArray(refs) ? refs : [refs];
}

/** A table's rate: undefined when it sets none, null for "none"; one load refused already refuses a bad one. */
function tableRate(text: string | undefined): Rate | null | undefined {
  if (text === undefined) return undefined;
  try {
    return parseRate(text);
  } catch {
    return undefined;
  }
}

/**
 * The destination a name resolves to, or null for quarantine, a name that does not resolve,
 * and module = "..." destinations (not in this build); the dispatcher turns null into a config
 * outcome "unknown destination". Cheap: reads no file, so it can be called per attempt.
 */
export function makeDestination(config: Config, name: string, opts: RegistryOptions): Destination | null {
  const s = destinationSettings(config, name);
  if (s === null) return null;
  const t = s.table;
  const common = {
    name,
    timeoutS: s.timeout_s,
    maxBodyBytes: s.max_body_bytes,
    maxInflight: s.max_inflight,
    rate: tableRate(t?.rate),
  };
  switch (s.type) {
    case "hermes":
      return new HermesDestination({
        ...common,
        route: name.startsWith("hermes:") ? name.slice("hermes:".length) : name,
        baseUrl: config.hermes.base_url,
        subscriptionsPath: config.hermes.subscriptions_path,
        legacySignature: config.hermes.legacy_signature,
        unwrap: t?.unwrap ?? false,
        eventHeader: t?.event_header,
        dedupHeader: t?.dedup_header,
        instanceId: opts.instanceId,
        env: opts.env,
        gatewayRateLimit: config.hermes.rate_limit,
        ignoredIssueAfter: t?.ignored_issue_after,
      });
    case "http":
      return new HttpDestination({
        ...common,
        url: t?.url ?? "",
        secret: t?.secret,
        secretPrevious: asList(t?.secret_previous),
        unsigned: t?.unsigned ?? false,
        headers: t?.headers,
        allowInsecure: t?.allow_insecure ?? false,
        unwrap: t?.unwrap ?? false,
        eventHeader: t?.event_header,
        dedupHeader: t?.dedup_header,
        instanceId: opts.instanceId,
        env: opts.env,
      });
    case "script":
      return new ScriptDestination({
        ...common,
        argv: t?.argv,
        processor: t?.processor,
        cwd: t?.cwd,
        envFile: t?.env_file,
        env: t?.env,
        stateDir: t?.state_dir,
        parentEnv: opts.env,
      });
    default:
      return null;
  }
}

/** The pace `name` is delivered at (hermes: the gateway's, from its subscriptions file), or null. */
export function destinationPace(config: Config, name: string, env: Env): Pace | null {
  return makeDestination(config, name, { env, clock: systemClock, instanceId: "pace" })?.pace() ?? null;
}

/** check() of every destination a config names: name -> problems (only names with problems). */
export function checkDestinations(
  config: Config,
  names: Iterable<string>,
  opts: RegistryOptions,
): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const name of new Set(names)) {
    const d = makeDestination(config, name, opts);
    const problems = d ? d.check() : [];
    if (problems.length) out.set(name, problems);
  }
  return out;
}
