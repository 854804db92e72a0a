// An instance's health probe: its bobbin's [health] with the instance's values. The instance turns
// it on with `health = { <arg> = "...", ... }` and the section's secret; `probe_every_s` (default
// one hour, at least a minute) sets how often maintenance asks. `health.api_url` replaces the
// manifest's URL (a GitHub Enterprise Server's /api/v3, or a test's stub on this machine).
import { HEALTH_INSTANCE_KEYS, type HealthSection } from "../bobbin/manifest-health.ts";
import type { Manifest } from "../bobbin/manifest.ts";
import { closest } from "../spelling.ts";
import { type Problems, quoteKey } from "./parse.ts";
import type { BobbinInstanceConfig, SourceSecret } from "./types.ts";

export const PROBE_EVERY_S = 3600;
const PROBE_MIN_EVERY_S = 60;

export interface ProbeConfig {
  /** The provider as messages name it (the manifest's vendor). */
  vendor: string;
  section: HealthSection;
  /** The instance's value of each of the section's args. */
  args: Record<string, string>;
  /** Replaces the section's URL. */
  apiUrl?: string;
  everyS: number;
  secret: SourceSecret;
}

/** An API base URL an instance may give: https, or plain http to this machine only. */
export function probeUrlOk(raw: string): boolean {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return false;
  }
  if (u.search || u.hash || u.username || u.password) return false;
  return (
    u.protocol === "https:" || (u.protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(u.hostname))
  );
}

/** The instance's probe, or undefined when it asks for none; each problem reported at its key. */
export function probeOf(
  m: Manifest,
  inst: BobbinInstanceConfig,
  key: string,
  secrets: Record<string, SourceSecret>,
  p: Problems,
): ProbeConfig | undefined {
  const given = inst.health;
  if (given === undefined) {
    if (inst.probe_every_s !== undefined)
      p.error(`${key}.probe_every_s`, "no health probe to schedule", "health = { ... } turns it on");
    return undefined;
  }
  const section = m.health;
  if (!section) {
    p.error(`${key}.health`, `${m.name} has no health probe`, "only a bobbin with a [health] section has one");
    return undefined;
  }
  let ok = true;
  const args: Record<string, string> = {};
  let apiUrl: string | undefined;
  for (const [a, v] of Object.entries(given)) {
    const at = `${key}.health.${quoteKey(a)}`;
    if (!Object.hasOwn(section.args, a) && !HEALTH_INSTANCE_KEYS.includes(a)) {
      const names = [...Object.keys(section.args), ...HEALTH_INSTANCE_KEYS];
      p.error(at, `${m.name}'s health probe takes no ${a}`, closest(a, names) ?? `it takes ${names.join(", ")}`);
      ok = false;
    } else if (typeof v !== "string" || v === "") {
      p.error(at, "expected a non-empty string");
      ok = false;
    } else if (a === "api_url") {
      if (!probeUrlOk(v)) {
        p.error(at, "expected an https URL (plain http only to this machine), without a query or credentials");
        ok = false;
      } else apiUrl = v;
    } else args[a] = v;
  }
  for (const [a, what] of Object.entries(section.args))
    if (!Object.hasOwn(args, a) && given[a] === undefined) {
      p.error(`${key}.health.${a}`, `required by ${m.name}'s health probe: ${what}`);
      ok = false;
    }
  const secret = secrets[section.secret];
  if (!secret) {
    p.error(
      `${key}.secrets.${section.secret}`,
      `the health probe needs it: ${m.secrets[section.secret]?.description ?? "the API token"}`,
      `secrets.${section.secret} = { file = "/etc/hookspool/secrets/..." }`,
    );
    ok = false;
  }
  const every = inst.probe_every_s ?? PROBE_EVERY_S;
  if (!Number.isFinite(every) || every < PROBE_MIN_EVERY_S) {
    p.error(`${key}.probe_every_s`, `at least ${PROBE_MIN_EVERY_S}: a provider's API is asked rarely`);
    ok = false;
  }
  if (!ok || !secret) return undefined;
  return { vendor: m.provider.vendor, section, args, ...(apiUrl ? { apiUrl } : {}), everyS: every, secret };
}
